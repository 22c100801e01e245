import { LockAbortedError } from './errors.js';

/** Waiters of this process per resource, woken at once when a grant of that resource is released here. */
const waiters = new Map<string, Set<() => void>>();

export function wakeWaiters(resourceHex: string): void {
  const set = waiters.get(resourceHex);
  if (set) for (const wake of [...set]) wake();
}

/** Full-jitter exponential backoff: a random delay in [min, min(max, min * 2^attempt)]. */
export function backoffDelay(attempt: number, minMs: number, maxMs: number): number {
  const cap = Math.min(maxMs, minMs * 2 ** Math.min(attempt, 30));
  return minMs + Math.random() * (cap - minMs);
}

/**
 * Waits `ms`, or less when a grant of the same resource is released in this process, and rejects
 * with LockAbortedError when `signal` aborts.
 */
export function pause(resourceHex: string, ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(new LockAbortedError(signal.reason));
      return;
    }
    let set = waiters.get(resourceHex);
    if (!set) waiters.set(resourceHex, (set = new Set()));
    const own = set;
    const finish = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      own.delete(wake);
      if (own.size === 0 && waiters.get(resourceHex) === own) waiters.delete(resourceHex);
    };
    const wake = (): void => {
      finish();
      resolve();
    };
    const onAbort = (): void => {
      finish();
      reject(new LockAbortedError(signal?.reason));
    };
    const timer = setTimeout(wake, ms);
    own.add(wake);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
