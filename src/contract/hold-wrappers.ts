// The one hook the lock core gives an instrumentation beyond the diagnostics channels: a scoped call
// runs the rest of its work, after the grant, through the wrappers registered here. A diagnostics
// channel can report that work but cannot make a tracer's span the active context inside it: that
// needs the tracer's own context store, which it does not expose.
// Internal: `mysql-rwlock/otel` registers a wrapper; no entry point exports this module.
import type { Grant } from './api.js';

/**
 * Runs `run` (the scoped work under `grants`, through its commit and release) in a context of its
 * choosing. One grant for `with*Lock`/`with*Grant`; a group's grants in resource order for
 * `withLocks`; a section's grants (`{ section: true }`), whose commit is its fence event.
 */
export type HoldWrapper = <T>(grants: readonly Grant[], run: () => Promise<T>) => Promise<T>;

const wrappers = new Set<HoldWrapper>();

/** Adds a wrapper; the function returned removes it. */
export function addHoldWrapper(wrapper: HoldWrapper): () => void {
  wrappers.add(wrapper);
  return () => void wrappers.delete(wrapper);
}

/**
 * Runs the scoped work under `grants` through every wrapper registered; with none, `run()` itself.
 * Call it once the grants are held, around everything up to their release or commit.
 */
export function inHoldWrappers<T>(grants: Grant | readonly Grant[], run: () => Promise<T>): Promise<T> {
  if (wrappers.size === 0) return run();
  const held: readonly Grant[] = Array.isArray(grants) ? grants : [grants as Grant];
  let call = run;
  for (const wrap of wrappers) {
    const inner = call;
    call = () => wrap(held, inner);
  }
  return call();
}
