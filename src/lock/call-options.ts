import { tryOnce, type Target } from './acquire.js';
import type { LockContext } from './context.js';
import { PoolTooSmallError } from '../errors.js';
import { healStale } from './heal.js';
import { MaintenanceLoop } from '../jobs/maintenance.js';
import { optionsObject, permitOptions, type ResolvedManagerOptions } from '../options.js';
import { Scopes } from './scope.js';
import { WaitQueues } from './wait.js';
import { resourceKey } from './resource-id.js';
import type { LockMode } from '../types.js';

// A manager's options put to use: the context its calls share, its maintenance loop, and what
// each call makes of its own arguments before anything is written.

/** What a manager shares with its calls, from its options (validated by `resolveManagerOptions`). */
export function managerContext(o: ResolvedManagerOptions): LockContext {
  return {
    knex: o.knex,
    options: o,
    policy: { retries: o.deadlockRetries, resolveTimeoutMs: o.resolveTimeoutMs },
    queues: new WaitQueues(),
    scopes: new Scopes(),
    ownerBytes: Buffer.from(o.owner, 'utf8'),
    acquirePath: { statements: o.procedures === false },
    sections: {},
  };
}

/** `maintenance: true`: the in-process sweep, stopped by `close()`; undefined without it. */
export function maintenanceLoop(ctx: LockContext): MaintenanceLoop | undefined {
  const o = ctx.options;
  return o.maintenance === null
    ? undefined
    : new MaintenanceLoop({
        knex: o.knex,
        owner: o.owner,
        staleAfterMs: o.staleAfterMs,
        ...o.maintenance,
        tryWrite: (id) => tryOnce(ctx, target('write', id)),
        heal: (id) => healStale(ctx, resourceKey(id), {}, true),
      });
}

/** What a manager call takes: a lock on one resource, in one mode. */
export function target(mode: LockMode, resourceId: string): Target {
  return { mode, resourceId, resource: resourceKey(resourceId) };
}

/** A permit call's target, validated before anything is written; `only` lists the keys allowed, if any. */
export function permitTarget(what: string, resourceId: string, options: unknown, only: readonly string[]): Target {
  const resource = resourceKey(resourceId);
  if (only.length > 0) optionsObject(what, options ?? null, only);
  return { mode: 'permit', resourceId, resource, permit: permitOptions(what, options) };
}

/** A permit call's options without `permits` and `count`, for the options every acquire shares. */
export function withoutPermits(options: unknown): Record<string, unknown> {
  if (typeof options !== 'object' || options === null) return {};
  const { permits: _permits, count: _count, ...rest } = options as Record<string, unknown>;
  return rest;
}

/** knex's pool size when its config names none. */
const KNEX_DEFAULT_POOL_MAX = 10;

/**
 * A fenced operation holds a pool connection for its transaction, each enclosing one holds
 * another, and a lease keep-alive needs one more while they are held: with fewer, the waits
 * would end only in knex's acquireConnectionTimeout.
 */
export function checkPool(ctx: LockContext, keepAlive: boolean, what: string): void {
  const max = (ctx.knex.client as { config?: { pool?: { max?: number } } }).config?.pool?.max ?? KNEX_DEFAULT_POOL_MAX;
  const open = ctx.scopes.depth;
  const needed = open + 1 + (keepAlive ? 1 : 0);
  if (needed > max) {
    const why =
      open > 0 ? `${what} nested in ${open} other fenced operation${open > 1 ? 's' : ''}` : `${what} with leaseMs`;
    throw new PoolTooSmallError(needed, max, `${why}${keepAlive && open > 0 ? ' and a lease keep-alive' : ''}`);
  }
}
