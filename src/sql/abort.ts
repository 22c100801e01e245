// One 'abort' listener per AbortSignal however many waits share it (see onAbort).
/**
 * The abort callbacks of sleeping waiters, by signal: one 'abort' listener per signal however many
 * waiters share it. A listener per waiter made Node warn (MaxListenersExceededWarning past 10) when
 * an application passed one shutdown signal to many acquires, and cost each removal a scan of them all.
 */
const abortWatchers = new WeakMap<AbortSignal, { callbacks: Set<() => void>; listener: () => void }>();

/** Calls `callback` once when `signal` aborts; the returned function unsubscribes. */
export function onAbort(signal: AbortSignal, callback: () => void): () => void {
  let watcher = abortWatchers.get(signal);
  if (!watcher) {
    const callbacks = new Set<() => void>();
    const listener = (): void => {
      abortWatchers.delete(signal);
      for (const cb of callbacks) cb();
    };
    watcher = { callbacks, listener };
    abortWatchers.set(signal, watcher);
    signal.addEventListener('abort', listener, { once: true });
  }
  const { callbacks, listener } = watcher;
  // A wrapper of its own, so one callback subscribed twice is two subscriptions.
  const entry = (): void => callback();
  callbacks.add(entry);
  return () => {
    if (!callbacks.delete(entry) || callbacks.size > 0) return;
    if (abortWatchers.get(signal)?.callbacks === callbacks) abortWatchers.delete(signal);
    signal.removeEventListener('abort', listener);
  };
}
