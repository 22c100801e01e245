// The one hook the lock core gives an instrumentation beyond the diagnostics channels: a scoped call
// (`withWriteLock`, `withReadLock`) runs the rest of its work, after the grant, through the wrappers
// registered here. A diagnostics channel can report that work but cannot make a tracer's span the
// active context inside it: that needs the tracer's own context store, which it does not expose.
// Internal: `mysql-rwlock/otel` registers a wrapper; no entry point exports this module.
import type { Grant } from '../lock/api.js';

/** Runs `run` (the scoped work under `grant`, through commit and release) in a context of its choosing. */
export type HoldScopeWrapper = <T>(grant: Grant, run: () => Promise<T>) => Promise<T>;

const wrappers = new Set<HoldScopeWrapper>();

/** Adds a wrapper; the function returned removes it. */
export function addHoldScope(wrapper: HoldScopeWrapper): () => void {
  wrappers.add(wrapper);
  return () => void wrappers.delete(wrapper);
}

/** Runs the scoped work under `grant` through every wrapper registered; with none, `run()` itself. */
export function inHoldScope<T>(grant: Grant, run: () => Promise<T>): Promise<T> {
  if (wrappers.size === 0) return run();
  let call = run;
  for (const wrap of wrappers) {
    const inner = call;
    call = () => wrap(grant, inner);
  }
  return call();
}
