import { acquire, attempt, type Target } from './acquire.js';
import { withConnection } from '../sql/connection.js';
import type { LockContext } from './context.js';
import { InvalidOptionsError, LockUpgradeError, PoolTooSmallError } from '../errors.js';
import { runFenced, type LockedWork } from './fenced.js';
import type { Grant } from './grant.js';
import { keepLeaseAhead } from './lease.js';
import {
  booleanOption, integerOption, LIMITS, OPERATE_DEFAULTS, optionsObject, resolveCallOptions, resolveManagerOptions, textOption,
  type AcquireOptions, type ForceReleaseOptions, type HistoryOptions, type ListOptions, type LockManagerOptions, type WithLockOptions,
} from '../options.js';
import { resourceKey } from './resource-id.js';
import { inspectResource, type LockState } from '../sql/inspect.js';
import { findGrantRef } from '../sql/lookup.js';
import { lockStats, listLive, resourceHistory, type GrantHistoryEntry, type ListedGrant, type ListFilter, type LockStats } from '../sql/operate.js';
import { operatorRelease } from '../sql/release-note.js';
import type { LockMode } from '../types.js';
import { Scopes } from './scope.js';
import { acquireChannel, releaseChannel, traced } from '../observability/tracing.js';
import { WaitQueues } from './wait.js';

export type { LockedWork } from './fenced.js';

/** The front door: acquire, scoped fenced work, inspection and operator release over one database. */
export class LockManager {
  readonly #ctx: LockContext;

  constructor(options: LockManagerOptions) {
    const o = resolveManagerOptions(options);
    this.#ctx = {
      knex: o.knex,
      options: o,
      policy: { retries: o.deadlockRetries, resolveTimeoutMs: o.resolveTimeoutMs },
      queues: new WaitQueues(),
      scopes: new Scopes(),
      ownerBytes: Buffer.from(o.owner, 'utf8'),
      acquirePath: { statements: o.procedures === false },
    };
  }

  /** The owner string recorded with this manager's grants. */
  get owner(): string {
    return this.#ctx.options.owner;
  }

  /** One attempt at a write lock: the Grant, or null when the resource is held. Takes no options. */
  tryAcquireWrite(resourceId: string, ...noOptions: never[]): Promise<Grant | null> {
    return this.#tryOnce('write', resourceId, noOptions, 'tryAcquireWrite');
  }

  /** One attempt at a read lock: the Grant, or null when a writer holds or waits. Takes no options. */
  tryAcquireRead(resourceId: string, ...noOptions: never[]): Promise<Grant | null> {
    return this.#tryOnce('read', resourceId, noOptions, 'tryAcquireRead');
  }

  /** Waits for a write lock: the Grant, or LockTimeoutError after `waitMs`, or AbortError. */
  acquireWrite(resourceId: string, options?: AcquireOptions): Promise<Grant> {
    return this.#acquire('write', resourceId, options, 'acquireWrite');
  }

  /** Waits for a read lock: the Grant, or LockTimeoutError after `waitMs`, or AbortError. */
  acquireRead(resourceId: string, options?: AcquireOptions): Promise<Grant> {
    return this.#acquire('read', resourceId, options, 'acquireRead');
  }

  /**
   * Runs `work` in a transaction under a write lock. The transaction commits only if the grant is
   * still live at commit time, and the release rides inside that commit; otherwise it rolls back
   * and LockLostError is thrown. The grant is released in every outcome. `work` may run again if
   * the transaction is rolled back by a deadlock or a cluster's certification conflict, so keep
   * side effects outside the database out of it.
   */
  withWriteLock<T>(resourceId: string, work: LockedWork<T>, options?: WithLockOptions): Promise<T> {
    return this.#withLock('write', resourceId, work, options, 'withWriteLock');
  }

  /** As withWriteLock, under a read lock. */
  withReadLock<T>(resourceId: string, work: LockedWork<T>, options?: WithLockOptions): Promise<T> {
    return this.#withLock('read', resourceId, work, options, 'withReadLock');
  }

  /** Lock counts and live grants of a resource, on the database clock. */
  async inspect(resourceId: string): Promise<LockState> {
    const resource = resourceKey(resourceId);
    return withConnection(this.#ctx.knex, (conn) => inspectResource(conn, resourceId, resource, this.#ctx.options.staleAfterMs));
  }

  /**
   * Releases any live grant by id as an operator, and notes who (this manager's owner) and why
   * (`reason`) in `t_lock_release_note`, in the same transaction. True when it was live and is now
   * released; false, with nothing written, when it was not. Its holder's commit will be refused.
   */
  async forceRelease(grantId: number, options?: ForceReleaseOptions): Promise<boolean> {
    integerOption('grantId', grantId, 1);
    const o = optionsObject('forceRelease', options, ['reason']);
    const reason = o.reason === undefined ? null : textOption('reason', o.reason, LIMITS.maxReasonChars);
    return traced(releaseChannel, () => ({ grantId, by: 'operator' as const }), () => withConnection(this.#ctx.knex, async (conn) => {
      const ref = await findGrantRef(conn, grantId);
      return ref !== null && operatorRelease(conn, ref, this.#ctx.ownerBytes, reason);
    }));
  }

  /**
   * Live grants across all resources, oldest first, a page at a time: `next` is the `after` of the
   * next page, null on the last. Ages and `stale` are on the database clock, with this manager's
   * `staleAfterMs` (the reaper's test).
   */
  async list(options?: ListOptions): Promise<{ grants: ListedGrant[]; next: number | null }> {
    const o = optionsObject('list', options, ['mode', 'owner', 'staleOnly', 'resourcePrefix', 'limit', 'after']);
    if (o.mode !== undefined && o.mode !== 'write' && o.mode !== 'read') throw new InvalidOptionsError(`mode must be 'write' or 'read', got ${JSON.stringify(o.mode) ?? typeof o.mode}`);
    const filter: ListFilter = {
      mode: o.mode as LockMode | undefined,
      owner: o.owner === undefined ? undefined : textOption('owner', o.owner, LIMITS.maxOwnerChars),
      staleOnly: booleanOption('staleOnly', o.staleOnly, false),
      resourcePrefix: o.resourcePrefix === undefined ? undefined : resourceKey(o.resourcePrefix),
      limit: integerOption('limit', o.limit ?? OPERATE_DEFAULTS.listLimit, 1, LIMITS.maxPageSize),
      after: o.after === undefined ? undefined : integerOption('after', o.after, 1),
    };
    return withConnection(this.#ctx.knex, (conn) => listLive(conn, filter, this.#ctx.options.staleAfterMs));
  }

  /**
   * A resource's grants, newest first, with how each ended (holder, reaper, operator, withdrawn, or
   * still live), when, how long it was held and an operator's reason. `next` is the `before` of
   * the next page, null on the last.
   */
  async history(resourceId: string, options?: HistoryOptions): Promise<{ grants: GrantHistoryEntry[]; next: number | null }> {
    const resource = resourceKey(resourceId);
    const o = optionsObject('history', options, ['limit', 'before']);
    const limit = integerOption('limit', o.limit ?? OPERATE_DEFAULTS.historyLimit, 1, LIMITS.maxPageSize);
    const before = o.before === undefined ? undefined : integerOption('before', o.before, 1);
    return withConnection(this.#ctx.knex, (conn) => resourceHistory(conn, resource, limit, before));
  }

  /** Counts across all resources: live grants by mode, stale, leased, waiting writers, the oldest age, the last hour's forced releases. */
  async stats(): Promise<LockStats> {
    return withConnection(this.#ctx.knex, (conn) => lockStats(conn, this.#ctx.options.staleAfterMs));
  }

  #target(mode: LockMode, resourceId: string): Target {
    return { mode, resourceId, resource: resourceKey(resourceId) };
  }

  async #tryOnce(mode: LockMode, resourceId: string, extra: unknown[], what: string): Promise<Grant | null> {
    const target = this.#target(mode, resourceId);
    // An options object here would otherwise be ignored silently, e.g. a waitMs the caller relies on.
    if (extra.length > 0) throw new InvalidOptionsError(`${what} takes no options (one attempt); use ${what.replace('try', '').replace(/^A/, 'a')}(id, { waitMs }) to wait`);
    return this.#traceAcquire(target, 0, () => attempt(this.#ctx, target, 0));
  }

  #traceAcquire<T extends Grant | null>(t: Target, waitMs: number, run: () => Promise<T>): Promise<T> {
    return traced(acquireChannel, () => ({ resourceId: t.resourceId, mode: t.mode, waitMs, owner: this.#ctx.options.owner }), run);
  }

  async #acquire(mode: LockMode, resourceId: string, options: AcquireOptions | undefined, what: string): Promise<Grant> {
    const target = this.#target(mode, resourceId);
    const { waitMs, signal } = resolveCallOptions(what, options, false);
    return this.#traceAcquire(target, waitMs, () => acquire(this.#ctx, target, waitMs, signal));
  }

  async #withLock<T>(mode: LockMode, resourceId: string, work: LockedWork<T>, options: WithLockOptions | undefined, what: string): Promise<T> {
    const target = this.#target(mode, resourceId);
    const { waitMs, signal, isolationLevel, leaseMs } = resolveCallOptions(what, options, true);
    if (typeof work !== 'function') throw new InvalidOptionsError(`work: ${what} needs a function (trx, grant) => Promise`);
    // Reentrant: inside an operation on the same resource, join its grant and transaction.
    const outer = this.#ctx.scopes.held(target.resource.toString('hex'));
    if (outer) {
      if (mode === 'write' && outer.grant.mode === 'read') throw new LockUpgradeError(resourceId);
      return work(outer.trx, outer.grant);
    }
    this.#checkPool(leaseMs !== undefined, what);
    const grant = await this.#traceAcquire(target, waitMs, () => acquire(this.#ctx, target, waitMs, signal));
    const keepAlive = leaseMs === undefined ? undefined : keepLeaseAhead(grant, leaseMs);
    try {
      await keepAlive?.first;
      return await runFenced(this.#ctx, grant, work, isolationLevel);
    } finally {
      keepAlive?.stop();
      // An error is already on its way to the caller; if this release fails too, the reaper releases it.
      if (!grant.settled) await grant.release().catch(() => undefined);
    }
  }

  /**
   * A fenced operation holds a pool connection for its transaction, each enclosing one holds
   * another, and a lease keep-alive needs one more while they are held: with fewer, the waits
   * would end only in knex's acquireConnectionTimeout.
   */
  #checkPool(keepAlive: boolean, what: string): void {
    const max = (this.#ctx.knex.client as { config?: { pool?: { max?: number } } }).config?.pool?.max ?? KNEX_DEFAULT_POOL_MAX;
    const open = this.#ctx.scopes.depth;
    const needed = open + 1 + (keepAlive ? 1 : 0);
    if (needed > max) {
      const why = open > 0 ? `${what} nested in ${open} other fenced operation${open > 1 ? 's' : ''}` : `${what} with leaseMs`;
      throw new PoolTooSmallError(needed, max, `${why}${keepAlive && open > 0 ? ' and a lease keep-alive' : ''}`);
    }
  }
}

/** knex's pool size when its config names none. */
const KNEX_DEFAULT_POOL_MAX = 10;

/** Creates a lock manager over a knex (mysql2) instance. Options are validated here, once. */
export function createLockManager(options: LockManagerOptions): LockManager {
  return new LockManager(options);
}
