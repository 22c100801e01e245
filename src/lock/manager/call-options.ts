import { tryOnce, type Target } from '../durable/durable-acquire.js';
import type { LockContext } from '../context/lock-context.js';
import { PoolTooSmallError } from '../../errors.js';
import { healStale } from '../durable/heal-stale.js';
import { MaintenanceLoop } from '../scheduled/maintenance.js';
import { permitOptions, type ResolvedManagerOptions } from '../../options.js';
import { EnclosingFences } from '../context/enclosing-fences.js';
import { WaitQueues } from '../waiting/wait.js';
import { resourceKey } from '../durable/resource-id.js';
import type { LockMode } from '../../types.js';

// A manager's options put to use: the context its calls share, its maintenance loop, and what
// each call makes of its own arguments before anything is written.

/** What a manager shares with its calls, from its options (validated by `resolveManagerOptions`). */
export function managerContext(o: ResolvedManagerOptions): LockContext {
  return {
    knex: o.knex,
    options: o,
    policy: { retries: o.deadlockRetries, resolveTimeoutMs: o.resolveTimeoutMs },
    queues: new WaitQueues(),
    scopes: new EnclosingFences(),
    ownerBytes: Buffer.from(o.owner, 'utf8'),
    acquirePath: { statements: o.procedures === false },
    sections: {},
    fences: {},
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

/**
 * A permit call's target, validated before anything is written; `alone`: the permit's options are
 * all the call takes (see `permitOptions`).
 */
export function permitTarget(what: string, resourceId: string, options: unknown, alone: boolean): Target {
  const resource = resourceKey(resourceId);
  return { mode: 'permit', resourceId, resource, permit: permitOptions(what, options, alone) };
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
