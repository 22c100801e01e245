import type { Grant } from './api.js';

/**
 * Keeps a grant's lease `leaseMs` ahead: extended now and every third of it until stopped. A
 * failed extension (database unreachable) is retried on the next tick; one that finds the grant
 * gone aborts `grant.signal` and stops.
 */
export function keepLeaseAhead(grant: Grant, leaseMs: number): { first: Promise<unknown>; stop(): void } {
  const tick = (): Promise<unknown> =>
    grant.extend(leaseMs).then(
      (live) => live || stop(),
      () => undefined,
    );
  const timer = setInterval(() => void tick(), Math.max(10, Math.floor(leaseMs / 3)));
  timer.unref();
  const stop = (): void => clearInterval(timer);
  return { first: tick(), stop };
}
