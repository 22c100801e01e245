import type { DurableGrant } from './grant.js';

/**
 * Keeps a grant's lease `leaseMs` ahead: extended now and every third of it until stopped. A
 * failed extension (database unreachable) is retried on the next tick; one that finds the grant
 * gone aborts `grant.signal` and stops, and so does a release (the grant is settled).
 *
 * With `maxHoldMs`, the lease is never extended past `maxHoldMs` after the keep-alive started
 * (right after the grant): the last extensions only reach that point, and then the renewal stops
 * and `grant.signal` aborts with a TimeoutError, as `AbortSignal.timeout` does. The grant is left
 * as it is: once its lease has run out it is stale as any other grant, and the reaper releases it.
 * A hung holder that keeps its event loop running therefore cannot hold the lock forever.
 */
export function keepLeaseAhead(
  grant: DurableGrant,
  leaseMs: number,
  maxHoldMs?: number,
): { first: Promise<unknown>; stop(): void } {
  const started = performance.now();
  const left = (): number => (maxHoldMs === undefined ? leaseMs : maxHoldMs - (performance.now() - started));
  const tick = (): Promise<unknown> => {
    const ms = Math.min(leaseMs, Math.floor(left()));
    if (ms < 1) return Promise.resolve();
    // Once an extension reaches the cap, later ones could only repeat it.
    if (ms < leaseMs) clearInterval(timer);
    return grant.extend(ms).then(
      (live) => live || stop(),
      () => undefined,
    );
  };
  const timer = setInterval(() => void tick(), Math.max(10, Math.floor(leaseMs / 3)));
  timer.unref();
  const cap =
    maxHoldMs === undefined
      ? undefined
      : setTimeout(() => {
          stop();
          if (!grant.settled)
            grant.capHold(
              new DOMException(
                `grant ${grant.id} reached maxHoldMs (${maxHoldMs} ms): its lease is no longer extended`,
                'TimeoutError',
              ),
            );
        }, maxHoldMs);
  cap?.unref();
  const stop = (): void => {
    clearInterval(timer);
    clearTimeout(cap);
  };
  return { first: tick(), stop };
}
