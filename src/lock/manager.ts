import { acquire, tryOnce, type Target } from './acquire.js';
import { withConnection } from '../sql/connection.js';
import type { LockContext } from './context.js';
import {
  InvalidOptionsError,
  LockLostError,
  LockUpgradeError,
  ManagerClosedError,
  PoolTooSmallError,
  ResourceKindError,
  SectionError,
} from '../errors.js';
import { runFenced, runFencedHold, runGranted } from './fenced.js';
import type { Grant, GrantedWork, LockedGroupWork, LockedWork, LockGroup, LockSets } from './api.js';
import { acquireGroup, groupTargets, inResourceOrder, type HeldGroup } from './group.js';
import type { HeldGrant } from './grant.js';
import { keepLeaseAhead } from './lease.js';
import {
  booleanOption,
  DEFAULTS,
  integerOption,
  LIMITS,
  optionsObject,
  permitOptions,
  resolveCallOptions,
  resolveExclusiveOptions,
  resolveManagerOptions,
  textOption,
  type AcquireOptions,
  type ExclusiveOptions,
  type ForceReleaseOptions,
  type HistoryOptions,
  type ListOptions,
  type LockManagerOptions,
  type PermitOptions,
  type WithGrantOptions,
  type WithLockOptions,
} from '../options.js';
import { resourceKey } from './resource-id.js';
import { inspectResource, type LockState } from '../sql/inspect.js';
import { findGrantRef } from '../sql/lookup.js';
import {
  lockStats,
  listLive,
  resourceHistory,
  type GrantHistoryEntry,
  type ListedGrant,
  type ListFilter,
  type LockStats,
} from '../sql/operate.js';
import { operatorRelease } from '../sql/release-note.js';
import type { LockMode } from '../types.js';
import type { Knex } from 'knex';
import { Scopes } from './scope.js';
import { acquireChannel, releaseChannel, traced } from '../observability/tracing.js';
import { inHoldScope } from '../observability/hold-scope.js';
import { WaitQueues } from './wait.js';
import { runSection, SectionGrant } from './section.js';
import { checkJobName, runExclusiveJob, type ExclusiveResult } from '../jobs/exclusive.js';
import { MaintenanceLoop } from '../jobs/maintenance.js';
import { healStale } from './heal.js';

/**
 * The front door: acquire, scoped fenced work, inspection and operator release over one database.
 * Made by {@link createLockManager}; exported as a type only.
 */
export class LockManager {
  readonly #ctx: LockContext;
  /** Calls in progress (acquires, scoped work, reads, operator releases), which `close()` waits for. */
  #inFlight = 0;
  #closed: Promise<void> | undefined;
  #drained: (() => void) | undefined;
  /** `maintenance: true`: the in-process sweep, stopped by `close()`. */
  readonly #maintenance: MaintenanceLoop | undefined;

  /** Use createLockManager: the class is exported as a type only. */
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
      sections: {},
    };
    const ctx = this.#ctx;
    this.#maintenance =
      o.maintenance === null
        ? undefined
        : new MaintenanceLoop({
            knex: o.knex,
            owner: o.owner,
            staleAfterMs: o.staleAfterMs,
            ...o.maintenance,
            tryWrite: (id) => tryOnce(ctx, this.#target('write', id)),
            heal: (id) => healStale(ctx, resourceKey(id), {}, true),
          });
  }

  /** The owner string recorded with this manager's grants. */
  get owner(): string {
    return this.#ctx.options.owner;
  }

  /**
   * One attempt at a write lock: the Grant, or null when the resource is held. Takes no options: an
   * options argument is refused with InvalidOptionsError (use `acquireWrite(id, { waitMs })` to wait).
   *
   * @example
   * ```ts
   * import type { LockManager } from 'mysql-rwlock';
   * declare const locks: LockManager;
   *
   * const grant = await locks.tryAcquireWrite('report:daily');
   * if (grant === null) console.log('another process is writing it');
   * else await grant.release();
   * ```
   */
  tryAcquireWrite(resourceId: string): Promise<Grant | null> {
    return this.#tryOnce('write', resourceId, arguments.length, 'tryAcquireWrite');
  }

  /**
   * One attempt at a read lock: the Grant, or null when a writer holds or waits. Takes no options.
   *
   * @example
   * ```ts
   * import type { LockManager } from 'mysql-rwlock';
   * declare const locks: LockManager;
   *
   * const grant = await locks.tryAcquireRead('report:daily');
   * if (grant !== null) await grant.release();
   * ```
   */
  tryAcquireRead(resourceId: string): Promise<Grant | null> {
    return this.#tryOnce('read', resourceId, arguments.length, 'tryAcquireRead');
  }

  /**
   * Waits for a write lock: the Grant, or LockTimeoutError after `waitMs`, or LockAbortedError.
   *
   * @example
   * ```ts
   * import type { LockManager } from 'mysql-rwlock';
   * declare const locks: LockManager;
   *
   * const grant = await locks.acquireWrite('invoice:42', { waitMs: 5_000, signal: AbortSignal.timeout(10_000) });
   * try {
   *   // ... work under the lock
   * } finally {
   *   await grant.release();
   * }
   * ```
   */
  acquireWrite(resourceId: string, options?: AcquireOptions): Promise<Grant> {
    return this.#acquire('write', resourceId, options, 'acquireWrite');
  }

  /**
   * Waits for a read lock: the Grant, or LockTimeoutError after `waitMs`, or LockAbortedError.
   *
   * @example
   * ```ts
   * import type { LockManager } from 'mysql-rwlock';
   * declare const locks: LockManager;
   *
   * await using grant = await locks.acquireRead('invoice:42');
   * console.log(`reading under grant ${grant.id}`);
   * ```
   */
  acquireRead(resourceId: string, options?: AcquireOptions): Promise<Grant> {
    return this.#acquire('read', resourceId, options, 'acquireRead');
  }

  /**
   * Runs `work` in a transaction under a write lock. The transaction commits only if the grant is
   * still live at commit time, and the release rides inside that commit; otherwise it rolls back
   * and LockLostError is thrown. The grant is released in every outcome. `work` may run again if
   * the transaction is rolled back by a deadlock or a cluster's certification conflict, so keep
   * side effects outside the database out of it.
   *
   * @example
   * ```ts
   * import type { LockManager } from 'mysql-rwlock';
   * declare const locks: LockManager;
   *
   * const balance = await locks.withWriteLock('account:7', async (trx) => {
   *   await trx('account').where({ id: 7 }).decrement('balance', 10);
   *   const row = (await trx('account').where({ id: 7 }).first('balance')) as { balance: number };
   *   return row.balance;
   * }, { waitMs: 5_000 });
   * ```
   */
  withWriteLock<T>(resourceId: string, work: LockedWork<T>, options?: WithLockOptions): Promise<T> {
    return this.#withLock('write', resourceId, work, options, 'withWriteLock');
  }

  /**
   * As withWriteLock, under a read lock.
   *
   * @example
   * ```ts
   * import type { LockManager } from 'mysql-rwlock';
   * declare const locks: LockManager;
   *
   * const rows = await locks.withReadLock('catalog', (trx) => trx('product').select('id', 'price'));
   * ```
   */
  withReadLock<T>(resourceId: string, work: LockedWork<T>, options?: WithLockOptions): Promise<T> {
    return this.#withLock('read', resourceId, work, options, 'withReadLock');
  }

  /**
   * Runs `work(grant)` under a write lock, for a business transaction of any ORM: `work` opens its
   * own transaction and makes `await grant.fence(adapter)` its last statement before the commit
   * (adapters in `mysql-rwlock/adapters`). When `work` resolves after a fence, the grant row tells
   * whether that transaction committed (which released the grant) or rolled back (the grant is then
   * released here); without a fence the grant is released. When `work` rejects, the grant is
   * released unless the commit happened: a COMMIT whose reply was lost is settled from the grant row
   * as in withWriteLock (it resolves undefined if it committed, as `work` returned nothing). A
   * deadlock or certification conflict runs `work` again under the same grant, within
   * `deadlockRetries`. A call nested in another scoped call on the same resource is refused with
   * InvalidOptionsError: the transactions could not be one.
   *
   * @example
   * ```ts
   * import type { LockManager } from 'mysql-rwlock';
   * import { fromKnex } from 'mysql-rwlock/adapters';
   * import type { Knex } from 'knex';
   * declare const locks: LockManager;
   * declare const db: Knex;
   *
   * await locks.withWriteGrant('loan:7', (grant) =>
   *   db.transaction(async (trx) => {
   *     await trx('payments').insert({ loan_id: '7', amount: 10 });
   *     await grant.fence(fromKnex(trx)); // last statement: LockLostError (and a rollback) if the grant was lost
   *   }),
   * );
   * ```
   */
  withWriteGrant<T>(resourceId: string, work: GrantedWork<T>, options?: WithGrantOptions): Promise<T | undefined> {
    return this.#track('withWriteGrant', () => this.#granted('write', resourceId, work, options, 'withWriteGrant'));
  }

  /** As withWriteGrant, under a read lock. */
  withReadGrant<T>(resourceId: string, work: GrantedWork<T>, options?: WithGrantOptions): Promise<T | undefined> {
    return this.#track('withReadGrant', () => this.#granted('read', resourceId, work, options, 'withReadGrant'));
  }

  /**
   * One attempt at permits of a semaphore: the Grant (mode 'permit'), or null when the semaphore has
   * fewer than `count` permits free. At most `permits` permits of the semaphore are held at once;
   * PermitLimitError when its holders hold it under another limit, ResourceKindError when readers or
   * a writer hold the id. Takes `{ permits, count? }` and nothing else (use `acquirePermit` to wait).
   *
   * @example
   * ```ts
   * import type { LockManager } from 'mysql-rwlock';
   * declare const locks: LockManager;
   *
   * const grant = await locks.tryAcquirePermit('exports:tenant-7', { permits: 5 });
   * if (grant === null) console.log('5 exports already run for this tenant');
   * else await grant.release();
   * ```
   */
  tryAcquirePermit(resourceId: string, options: PermitOptions): Promise<Grant | null> {
    const what = 'tryAcquirePermit';
    return this.#track(what, async () => {
      const target = this.#permitTarget(what, resourceId, options, ['permits', 'count']);
      this.#notInSection(target, what);
      return this.#traceAcquire(target, 0, () => tryOnce(this.#ctx, target));
    });
  }

  /**
   * Waits for permits of a semaphore: the Grant (mode 'permit'), or LockTimeoutError after `waitMs`,
   * or LockAbortedError. At most `permits` permits of the semaphore are held at once; `count`
   * permits are taken together, all or none. A grant like the others: `release()`, `extend()`,
   * `fence()`, `signal`, reaped when stale. See docs/api.md, Semaphores.
   *
   * @example
   * ```ts
   * import type { LockManager } from 'mysql-rwlock';
   * declare const locks: LockManager;
   *
   * await using permit = await locks.acquirePermit('partner-api', { permits: 20, waitMs: 5_000 });
   * console.log(`call ${permit.id} of at most 20 in flight`);
   * ```
   */
  acquirePermit(resourceId: string, options: PermitOptions & AcquireOptions): Promise<Grant> {
    const what = 'acquirePermit';
    return this.#track(what, async () => {
      const target = this.#permitTarget(what, resourceId, options, []);
      const { waitMs, signal, leaseMs, maxHoldMs } = resolveCallOptions(what, withoutPermits(options), 'acquire');
      this.#notInSection(target, what);
      const grant = await this.#traceAcquire(target, waitMs, () => acquire(this.#ctx, target, waitMs, signal));
      if (leaseMs !== undefined) await keepLeaseAhead(grant, leaseMs, maxHoldMs).first;
      return grant;
    });
  }

  /**
   * Runs `work` in a transaction under permits of a semaphore, as withWriteLock runs it under a
   * write lock: the transaction commits only if the permit grant is still live, and its release
   * rides inside that commit (otherwise LockLostError, rolled back). At most `permits` such calls
   * (counting `count` each) run at once across every process. No `section`: a semaphore's holders
   * are counted durable grants.
   *
   * @example
   * ```ts
   * import type { LockManager } from 'mysql-rwlock';
   * declare const locks: LockManager;
   *
   * await locks.withPermit('exports:tenant-7', async (trx, grant) => {
   *   await trx('export_job').insert({ tenant: 7, grant_id: grant.id });
   * }, { permits: 5, waitMs: 10_000 });
   * ```
   */
  withPermit<T>(
    resourceId: string,
    work: LockedWork<T>,
    options: PermitOptions & Omit<WithLockOptions, 'section'>,
  ): Promise<T> {
    const what = 'withPermit';
    return this.#track(what, async () => {
      const target = this.#permitTarget(what, resourceId, options, []);
      const rest = withoutPermits(options);
      if (booleanOption('section', rest.section, false))
        throw new InvalidOptionsError(
          'section: withPermit has no one-commit section (permit holders are durable grants)',
        );
      return this.#scoped('permit', resourceId, work, rest, what, target);
    });
  }

  /**
   * The enclosing scoped call of this manager (`withWriteLock`/`withReadLock`) in the current async
   * context: its grant and transaction, so that code the callback calls reaches them without being
   * handed them. With a resource id, the call on that resource (an outer one when calls nest); without,
   * the innermost. Undefined outside any. `trx` is typed as possibly undefined: a scoped call whose
   * transaction belongs to another ORM, not to this knex, has none to give.
   *
   * @example
   * ```ts
   * import type { LockManager } from 'mysql-rwlock';
   * declare const locks: LockManager;
   *
   * async function markPaid(invoiceId: number): Promise<void> {
   *   const trx = locks.current(`invoice:${invoiceId}`)?.trx;
   *   if (trx === undefined) throw new Error('markPaid runs under the invoice lock');
   *   await trx('invoice').where({ id: invoiceId }).update({ status: 'paid' });
   * }
   * await locks.withWriteLock('invoice:42', () => markPaid(42));
   * ```
   */
  current(resourceId?: string): { grant: Grant; trx: Knex.Transaction | undefined } | undefined {
    const held =
      resourceId === undefined
        ? this.#ctx.scopes.current()
        : this.#ctx.scopes.current(resourceKey(resourceId).toString('hex'));
    return held === undefined ? undefined : { grant: held.grant, trx: held.trx };
  }

  /**
   * Lock counts and live grants of a resource, on the database clock.
   *
   * @example
   * ```ts
   * import type { LockManager } from 'mysql-rwlock';
   * declare const locks: LockManager;
   *
   * const { live, holders } = await locks.inspect('invoice:42');
   * console.log(live.write, live.read, holders.map((h) => h.owner));
   * ```
   */
  inspect(resourceId: string): Promise<LockState> {
    return this.#track('inspect', async () => {
      const resource = resourceKey(resourceId);
      return withConnection(this.#ctx.knex, (conn) =>
        inspectResource(conn, resourceId, resource, this.#ctx.options.staleAfterMs),
      );
    });
  }

  /**
   * Runs `work` in one transaction under locks on several resources, each in its mode: all are
   * taken, in one order (by resource id bytes, the same in every process, so two such calls cannot
   * deadlock on each other), within `waitMs`, or none is held and LockTimeoutError,
   * LockAbortedError or the database's error is thrown. The transaction's last statement is one
   * fence covering every grant: it commits only if every grant is still live, and releases them
   * all inside that commit; otherwise it rolls back and LockLostError names a lost grant. Settled
   * as withWriteLock is (a lost COMMIT reply, deadlock and certification retries under the same
   * grants). `grants` are sorted by resource id bytes. Inside `work`, a nested `with*Lock` or
   * `withLocks` on resources the group holds joins it (see docs/api.md).
   *
   * @example
   * ```ts
   * import type { LockManager } from 'mysql-rwlock';
   * declare const locks: LockManager;
   *
   * await locks.withLocks({ write: ['loan:1', 'loan:2'] }, async (trx) => {
   *   await trx('loan').where({ id: 1 }).decrement('balance', 100);
   *   await trx('loan').where({ id: 2 }).increment('balance', 100);
   * }, { waitMs: 5_000 });
   * ```
   */
  withLocks<T>(sets: LockSets, work: LockedGroupWork<T>, options?: WithLockOptions): Promise<T> {
    return this.#track('withLocks', () => this.#scopedGroup(sets, work, options));
  }

  /**
   * Waits for locks on several resources, each in its mode, taken in one order (by resource id
   * bytes) within `waitMs`, all or none: the group, or LockTimeoutError / LockAbortedError with
   * nothing held. Release it with `release()`, or fence a transaction with `fence()`.
   *
   * @example
   * ```ts
   * import type { LockManager } from 'mysql-rwlock';
   * declare const locks: LockManager;
   *
   * const group = await locks.acquireMany({ write: ['claim:9'], read: ['loan:1'] }, { waitMs: 5_000 });
   * try {
   *   // ... work under both locks
   * } finally {
   *   await group.release();
   * }
   * ```
   */
  acquireMany(sets: LockSets, options?: AcquireOptions): Promise<LockGroup> {
    return this.#track('acquireMany', async () => {
      const targets = groupTargets('acquireMany', sets);
      const { waitMs, signal, leaseMs, maxHoldMs } = resolveCallOptions('acquireMany', options, 'acquire');
      for (const t of targets) this.#notInSection(t, 'acquireMany');
      const group = await this.#acquireGroup(targets, waitMs, signal);
      if (leaseMs !== undefined)
        await Promise.all(group.grants.map((g) => keepLeaseAhead(g, leaseMs, maxHoldMs).first));
      return group;
    });
  }

  /**
   * Runs a job on one instance at a time: one attempt at the write grant of `name`, and `work` run
   * under it as `withWriteLock` runs it (`work(trx, grant)` in a fenced knex transaction; with
   * `{ grant: true }`, `work(grant)` as `withWriteGrant` does), or `{ ran: false, heldBy }` at once
   * when another instance holds it (`heldBy` its owner, null if it was released meanwhile). The lease
   * is kept ahead for at most `lockAtMostFor`: a run still going past it gets `grant.signal` aborted,
   * and once the reaper has released its grant its commit is refused (LockLostError). With
   * `lockAtLeastFor` the grant is kept after a faster run until that long after it was granted, on
   * the database clock; `close()` waits for that hold. See docs/jobs.md.
   *
   * @example
   * ```ts
   * import type { LockManager } from 'mysql-rwlock';
   * declare const locks: LockManager;
   *
   * const result = await locks.runExclusive(
   *   'invoices:nightly',
   *   (trx) => trx('invoice').where({ status: 'due' }).update({ status: 'sent' }),
   *   { lockAtMostFor: 600_000, lockAtLeastFor: 30_000 },
   * );
   * if (!result.ran) console.log(`running on ${result.heldBy ?? 'another instance'}`);
   * ```
   */
  runExclusive<T>(
    name: string,
    work: LockedWork<T>,
    options: ExclusiveOptions & { grant?: false },
  ): Promise<ExclusiveResult<T>>;
  runExclusive<T>(
    name: string,
    work: GrantedWork<T>,
    options: ExclusiveOptions & { grant: true },
  ): Promise<ExclusiveResult<T | undefined>>;
  runExclusive<T>(
    name: string,
    work: LockedWork<T> | GrantedWork<T>,
    options: ExclusiveOptions,
  ): Promise<ExclusiveResult<T | undefined>> {
    return this.#track('runExclusive', async () => {
      const o = resolveExclusiveOptions('runExclusive', options);
      checkJobName(name, o);
      const job = this.#target('write', name);
      if (typeof work !== 'function')
        throw new InvalidOptionsError(
          `work: runExclusive needs a function (${o.grant ? 'grant' : 'trx, grant'}) => Promise`,
        );
      this.#notInSection(job, 'runExclusive');
      this.#checkPool(true, 'runExclusive');
      const ctx = this.#ctx;
      return runExclusiveJob<T | undefined>(
        {
          tryWrite: (id) => {
            const t = this.#target('write', id);
            return this.#traceAcquire(t, 0, () => tryOnce(ctx, t));
          },
          heldBy: async (id) =>
            (await withConnection(ctx.knex, (conn) => inspectResource(conn, id, resourceKey(id), 0))).holders.find(
              (h) => h.mode === 'write',
            )?.owner ?? null,
          ageMs: async (grant) =>
            (
              await withConnection(ctx.knex, (conn) => inspectResource(conn, grant.resourceId, grant.ref.resource, 0))
            ).holders.find((h) => h.id === grant.id)?.ageMs ?? null,
          // The hold after the run is part of this call's effect: close() waits for it.
          inFlight: (hold) => {
            this.#inFlight++;
            void hold.finally(() => {
              if (--this.#inFlight === 0) this.#drained?.();
            });
          },
          run: (grant) =>
            inHoldScope(grant, () =>
              o.grant
                ? runGranted(ctx, grant, work as GrantedWork<T>)
                : runFenced(ctx, grant, work as LockedWork<T>, undefined),
            ),
        },
        name,
        o,
      );
    });
  }

  /**
   * Releases any live grant by id as an operator, and notes who (this manager's owner) and why
   * (`reason`) in `t_lock_release_note`, in the same transaction. True when it was live and is now
   * released; false, with nothing written, when it was not. Its holder's commit will be refused.
   *
   * @example
   * ```ts
   * import type { LockManager } from 'mysql-rwlock';
   * declare const locks: LockManager;
   *
   * const released = await locks.forceRelease(1234, { reason: 'holder host died, ticket OPS-17' });
   * ```
   */
  forceRelease(grantId: number, options?: ForceReleaseOptions): Promise<boolean> {
    return this.#track('forceRelease', async () => {
      integerOption('grantId', grantId, 1);
      const o = optionsObject('forceRelease', options, ['reason']);
      const reason = o.reason === undefined ? null : textOption('reason', o.reason, LIMITS.maxReasonChars);
      return traced(
        releaseChannel,
        () => ({ grantId, by: 'operator' as const, knex: this.#ctx.knex }),
        () =>
          withConnection(this.#ctx.knex, async (conn) => {
            const ref = await findGrantRef(conn, grantId);
            return ref !== null && operatorRelease(conn, ref, this.#ctx.ownerBytes, reason);
          }),
      );
    });
  }

  /**
   * Live grants across all resources, oldest first, a page at a time: `next` is the `after` of the
   * next page, null on the last. Ages and `stale` are on the database clock, with this manager's
   * `staleAfterMs` (the reaper's test).
   *
   * @example
   * ```ts
   * import type { LockManager } from 'mysql-rwlock';
   * declare const locks: LockManager;
   *
   * let after: number | undefined;
   * do {
   *   const page = await locks.list({ staleOnly: true, ...(after === undefined ? {} : { after }) });
   *   for (const g of page.grants) console.log(g.id, g.resourceId, g.owner, g.ageMs);
   *   after = page.next ?? undefined;
   * } while (after !== undefined);
   * ```
   */
  list(options?: ListOptions): Promise<{ grants: ListedGrant[]; next: number | null }> {
    return this.#track('list', async () => {
      const o = optionsObject('list', options, ['mode', 'owner', 'staleOnly', 'resourcePrefix', 'limit', 'after']);
      if (o.mode !== undefined && o.mode !== 'write' && o.mode !== 'read' && o.mode !== 'permit')
        throw new InvalidOptionsError(
          `mode must be 'write', 'read' or 'permit', got ${JSON.stringify(o.mode) ?? typeof o.mode}`,
        );
      const filter: ListFilter = {
        mode: o.mode as LockMode | undefined,
        owner: o.owner === undefined ? undefined : textOption('owner', o.owner, LIMITS.maxOwnerChars),
        staleOnly: booleanOption('staleOnly', o.staleOnly, false),
        resourcePrefix: o.resourcePrefix === undefined ? undefined : resourceKey(o.resourcePrefix),
        limit: integerOption('limit', o.limit ?? DEFAULTS.list.limit, 1, LIMITS.maxPageSize),
        after: o.after === undefined ? undefined : integerOption('after', o.after, 1),
      };
      return withConnection(this.#ctx.knex, (conn) => listLive(conn, filter, this.#ctx.options.staleAfterMs));
    });
  }

  /**
   * A resource's grants, newest first, with how each ended (see `ReleasedBy`; null while live),
   * when, how long it was held and an operator's reason. `next` is the `before` of the next page,
   * null on the last.
   *
   * @example
   * ```ts
   * import type { LockManager } from 'mysql-rwlock';
   * declare const locks: LockManager;
   *
   * const { grants } = await locks.history('invoice:42', { limit: 10 });
   * for (const g of grants) console.log(g.id, g.mode, g.releasedBy ?? 'live', g.heldMs, g.reason);
   * ```
   */
  history(resourceId: string, options?: HistoryOptions): Promise<{ grants: GrantHistoryEntry[]; next: number | null }> {
    return this.#track('history', async () => {
      const resource = resourceKey(resourceId);
      const o = optionsObject('history', options, ['limit', 'before']);
      const limit = integerOption('limit', o.limit ?? DEFAULTS.history.limit, 1, LIMITS.maxPageSize);
      const before = o.before === undefined ? undefined : integerOption('before', o.before, 1);
      return withConnection(this.#ctx.knex, (conn) => resourceHistory(conn, resource, limit, before));
    });
  }

  /**
   * Counts across all resources: live grants by mode, stale, leased, waiting writers, the oldest age, the last hour's forced releases.
   *
   * @example
   * ```ts
   * import type { LockManager } from 'mysql-rwlock';
   * declare const locks: LockManager;
   *
   * const stats = await locks.stats();
   * if (stats.stale > 0) console.warn(`${stats.stale} grants wait for the reaper`);
   * ```
   */
  stats(): Promise<LockStats> {
    return this.#track('stats', () =>
      withConnection(this.#ctx.knex, (conn) => lockStats(conn, this.#ctx.options.staleAfterMs)),
    );
  }

  /**
   * Closes the manager: refuses new calls with ManagerClosedError (nothing written), and resolves
   * once the calls in progress have ended: acquires still waiting (granted, timed out or aborted),
   * scoped `with*Lock` work (committed or rolled back, its grant released, its lease keep-alive
   * stopped), reads and operator releases. Calls the work in progress makes on this manager are
   * still served, so it can finish. Grants already handed out stay valid until released: their
   * methods (`release()`, `fence()`, `extend()`...) keep working. With `maintenance`, no sweep starts
   * any more and the one running is waited for. It does not destroy the knex
   * instance, which is the caller's. Idempotent: every call returns the same promise.
   *
   * @example
   * ```ts
   * import type { LockManager } from 'mysql-rwlock';
   * import type { Knex } from 'knex';
   * declare const locks: LockManager;
   * declare const db: Knex;
   *
   * process.once('SIGTERM', async () => {
   *   await locks.close(); // in-flight work finishes
   *   await db.destroy();
   * });
   * ```
   */
  close(): Promise<void> {
    this.#closed ??= Promise.all([
      this.#maintenance?.stop(),
      this.#inFlight === 0
        ? undefined
        : new Promise<void>((resolve) => {
            this.#drained = resolve;
          }),
    ]).then(() => undefined);
    return this.#closed;
  }

  /** `await using locks = createLockManager(...)` closes the manager when the scope ends: see `close()`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /**
   * Runs one call, counted as in flight. Once closed, a new call is refused, unless it is made
   * inside a fenced operation of this manager that was in flight: that work is allowed to finish.
   */
  #track<T>(what: string, run: () => Promise<T>): Promise<T> {
    if (this.#closed && this.#ctx.scopes.depth === 0) return Promise.reject(new ManagerClosedError(what));
    this.#inFlight++;
    return run().finally(() => {
      if (--this.#inFlight === 0) this.#drained?.();
    });
  }

  #target(mode: LockMode, resourceId: string): Target {
    return { mode, resourceId, resource: resourceKey(resourceId) };
  }

  /** A permit call's target, validated before anything is written; `only` lists the keys allowed, if any. */
  #permitTarget(what: string, resourceId: string, options: unknown, only: readonly string[]): Target {
    const resource = resourceKey(resourceId);
    if (only.length > 0) optionsObject(what, options ?? null, only);
    return { mode: 'permit', resourceId, resource, permit: permitOptions(what, options) };
  }

  /**
   * A durable acquire of a resource that an enclosing section holds would wait on the section's
   * own row lock until its waitMs: refused at once.
   */
  #notInSection(t: Target, what: string): void {
    if (this.#ctx.scopes.held(t.resource.toString('hex'))?.grant instanceof SectionGrant)
      throw new SectionError(
        `${what}(${JSON.stringify(t.resourceId)}) inside a section on the same resource would wait on the section itself: use the section's grant, or with*Lock (which joins it)`,
      );
  }

  #tryOnce(mode: LockMode, resourceId: string, argumentCount: number, what: string): Promise<Grant | null> {
    return this.#track(what, async () => {
      const target = this.#target(mode, resourceId);
      // An options object here would otherwise be ignored silently, e.g. a waitMs the caller relies on.
      if (argumentCount > 1)
        throw new InvalidOptionsError(
          `${what} takes no options (one attempt); use ${what.replace('try', '').replace(/^A/, 'a')}(id, { waitMs }) to wait`,
        );
      this.#notInSection(target, what);
      return this.#traceAcquire(target, 0, () => tryOnce(this.#ctx, target));
    });
  }

  #traceAcquire<T extends HeldGrant | null>(t: Target, waitMs: number, run: () => Promise<T>): Promise<T> {
    return traced(
      acquireChannel,
      () => ({ resourceId: t.resourceId, mode: t.mode, waitMs, owner: this.#ctx.options.owner, knex: this.#ctx.knex }),
      run,
    );
  }

  #acquire(mode: LockMode, resourceId: string, options: AcquireOptions | undefined, what: string): Promise<Grant> {
    return this.#track(what, async () => {
      const target = this.#target(mode, resourceId);
      const { waitMs, signal, leaseMs, maxHoldMs } = resolveCallOptions(what, options, 'acquire');
      this.#notInSection(target, what);
      const grant = await this.#traceAcquire(target, waitMs, () => acquire(this.#ctx, target, waitMs, signal));
      // Kept ahead until released: the keep-alive stops at its first tick after the grant settles.
      if (leaseMs !== undefined) await keepLeaseAhead(grant, leaseMs, maxHoldMs).first;
      return grant;
    });
  }

  #withLock<T>(
    mode: LockMode,
    resourceId: string,
    work: LockedWork<T>,
    options: WithLockOptions | undefined,
    what: string,
  ): Promise<T> {
    return this.#track(what, () => this.#scoped(mode, resourceId, work, options, what));
  }

  async #scoped<T>(
    mode: LockMode,
    resourceId: string,
    work: LockedWork<T>,
    options: WithLockOptions | undefined,
    what: string,
    permitTarget?: Target,
  ): Promise<T> {
    const target = permitTarget ?? this.#target(mode, resourceId);
    const { waitMs, signal, isolationLevel, leaseMs, maxHoldMs, section } = resolveCallOptions(what, options, 'scoped');
    if (typeof work !== 'function')
      throw new InvalidOptionsError(`work: ${what} needs a function (trx, grant) => Promise`);
    // Reentrant: inside an operation on the same resource (durable or section), join its grant and
    // transaction, which hold the resource until they commit.
    const outer = this.#ctx.scopes.held(target.resource.toString('hex'));
    if (outer) {
      if (mode === 'write' && outer.grant.mode === 'read') throw new LockUpgradeError(resourceId);
      if ((mode === 'permit') !== (outer.grant.mode === 'permit'))
        throw new ResourceKindError(resourceId, mode === 'permit' ? 'permit' : 'read-write');
      if (mode === 'permit' && (outer.grant.permits ?? 1) < (target.permit?.count ?? 1))
        throw new InvalidOptionsError(
          `count: ${what} nested in a call that holds ${outer.grant.permits ?? 1} permits of ${JSON.stringify(resourceId)} asks for more`,
        );
      if (outer.trx === undefined)
        throw new InvalidOptionsError(
          `${what}: ${resourceId} is held by an enclosing withWriteGrant/withReadGrant, whose transaction is not a knex one to join; use its grant (locks.current(id).grant) and transaction`,
        );
      return work(outer.trx, outer.grant);
    }
    this.#checkPool(leaseMs !== undefined, what);
    if (section)
      return runSection(this.#ctx, [target], (trx, grants) => work(trx, grants[0]!), {
        waitMs,
        signal,
        isolationLevel,
      });
    const grant = await this.#traceAcquire(target, waitMs, () => acquire(this.#ctx, target, waitMs, signal));
    return inHoldScope(grant, async () => {
      const keepAlive = leaseMs === undefined ? undefined : keepLeaseAhead(grant, leaseMs, maxHoldMs);
      try {
        await keepAlive?.first;
        return await runFenced(this.#ctx, grant, work, isolationLevel);
      } finally {
        keepAlive?.stop();
        await releaseLeftover(grant);
      }
    });
  }

  #acquireGroup(targets: Target[], waitMs: number, signal: AbortSignal | undefined): Promise<HeldGroup> {
    return acquireGroup(this.#ctx, targets, waitMs, signal, (t, w, run) => this.#traceAcquire(t, w, run));
  }

  async #scopedGroup<T>(sets: LockSets, work: LockedGroupWork<T>, options: WithLockOptions | undefined): Promise<T> {
    const what = 'withLocks';
    const targets = groupTargets(what, sets);
    const { waitMs, signal, isolationLevel, leaseMs, maxHoldMs, section } = resolveCallOptions(what, options, 'scoped');
    if (typeof work !== 'function')
      throw new InvalidOptionsError(`work: ${what} needs a function (trx, grants) => Promise`);
    const joined = this.#joinGroup(targets);
    if (joined) return work(joined.trx, joined.grants);
    this.#checkPool(leaseMs !== undefined, what);
    // A section takes the rows in the same order, in its one transaction.
    if (section) {
      if (targets.some((t) => t.mode === 'permit'))
        throw new InvalidOptionsError(
          'section: withLocks with permits has no one-commit section (permit holders are durable grants)',
        );
      return runSection(this.#ctx, inResourceOrder(targets), work, { waitMs, signal, isolationLevel });
    }
    const group = await this.#acquireGroup(targets, waitMs, signal);
    // The work, its commit and the release inside the hold scope: its queries are children of the
    // first grant's hold, as a single grant's are of its own.
    return inHoldScope(group.grants, async () => {
      const keepAlive = leaseMs === undefined ? [] : group.grants.map((g) => keepLeaseAhead(g, leaseMs, maxHoldMs));
      try {
        await Promise.all(keepAlive.map((k) => k.first));
        return await runFencedHold(
          this.#ctx,
          group,
          (trx) =>
            this.#ctx.scopes.run(
              group.grants.map((grant) => [grant.ref.resource.toString('hex'), { grant, trx }] as const),
              () => work(trx, group.grants),
            ),
          isolationLevel,
        );
      } catch (err) {
        // A refused group fence cannot say which grant was lost: releasing the rest finds it.
        if (err instanceof LockLostError && !group.settled) {
          await group.release().catch(() => undefined);
          throw group.lost() ?? err;
        }
        throw err;
      } finally {
        for (const k of keepAlive) k.stop();
        await releaseLeftover(group);
      }
    });
  }

  /**
   * Reentrancy of withLocks: when one enclosing operation's transaction holds every resource named,
   * each in the mode asked or a stronger one, the call joins it (its grants in resource byte
   * order); a write asked where a read is held is refused (LockUpgradeError), as is a call that
   * names some held resources and not others, or resources held by different enclosing operations:
   * it cannot join one transaction, and waiting could deadlock with its own enclosing grants.
   */
  #joinGroup(targets: Target[]): { trx: Knex.Transaction; grants: Grant[] } | undefined {
    const held = targets.map((t) => ({ t, outer: this.#ctx.scopes.held(t.resource.toString('hex')) }));
    if (held.every((h) => h.outer === undefined)) return undefined;
    const trx = held.find((h) => h.outer !== undefined)!.outer!.trx;
    // A scoped grant's transaction is the caller's ORM's: a group cannot join it.
    if (trx === undefined)
      throw new InvalidOptionsError(
        `withLocks: a resource named is held by an enclosing withWriteGrant/withReadGrant, whose transaction is not a knex one to join`,
      );
    const partial = held.find((h) => h.outer === undefined || h.outer.trx !== trx);
    if (partial)
      throw new InvalidOptionsError(
        `withLocks: ${JSON.stringify(partial.t.resourceId)} is not held by the enclosing operation that holds the others; a nested withLocks names only resources one enclosing operation holds, or none of them`,
      );
    for (const h of held) {
      if (h.t.mode === 'write' && h.outer!.grant.mode === 'read') throw new LockUpgradeError(h.t.resourceId);
      if ((h.t.mode === 'permit') !== (h.outer!.grant.mode === 'permit'))
        throw new ResourceKindError(h.t.resourceId, h.t.mode === 'permit' ? 'permit' : 'read-write');
    }
    const sorted = [...held].sort((a, b) => Buffer.compare(a.t.resource, b.t.resource));
    return { trx: trx!, grants: sorted.map((h) => h.outer!.grant) };
  }

  async #granted<T>(
    mode: LockMode,
    resourceId: string,
    work: GrantedWork<T>,
    options: WithGrantOptions | undefined,
    what: string,
  ): Promise<T | undefined> {
    const target = this.#target(mode, resourceId);
    const { waitMs, signal, leaseMs, maxHoldMs } = resolveCallOptions(what, options, 'granted');
    if (typeof work !== 'function') throw new InvalidOptionsError(`work: ${what} needs a function (grant) => Promise`);
    // Its transaction is the caller's own: it cannot join an enclosing one, nor fence a grant another call settles.
    if (this.#ctx.scopes.held(target.resource.toString('hex')))
      throw new InvalidOptionsError(
        `${what}: ${resourceId} is already held by an enclosing scoped call of this manager; use its grant (locks.current(id).grant)`,
      );
    this.#checkPool(leaseMs !== undefined, what);
    const grant = await this.#traceAcquire(target, waitMs, () => acquire(this.#ctx, target, waitMs, signal));
    return inHoldScope(grant, async () => {
      const keepAlive = leaseMs === undefined ? undefined : keepLeaseAhead(grant, leaseMs, maxHoldMs);
      try {
        await keepAlive?.first;
        return await runGranted(this.#ctx, grant, work);
      } finally {
        keepAlive?.stop();
        await releaseLeftover(grant);
      }
    });
  }

  /**
   * A fenced operation holds a pool connection for its transaction, each enclosing one holds
   * another, and a lease keep-alive needs one more while they are held: with fewer, the waits
   * would end only in knex's acquireConnectionTimeout.
   */
  #checkPool(keepAlive: boolean, what: string): void {
    const max =
      (this.#ctx.knex.client as { config?: { pool?: { max?: number } } }).config?.pool?.max ?? KNEX_DEFAULT_POOL_MAX;
    const open = this.#ctx.scopes.depth;
    const needed = open + 1 + (keepAlive ? 1 : 0);
    if (needed > max) {
      const why =
        open > 0 ? `${what} nested in ${open} other fenced operation${open > 1 ? 's' : ''}` : `${what} with leaseMs`;
      throw new PoolTooSmallError(needed, max, `${why}${keepAlive && open > 0 ? ' and a lease keep-alive' : ''}`);
    }
  }
}

/**
 * Releases what a scoped call still holds once its work ended (rolled back, or never started). A
 * release is sent again while no connection can be had, up to `resolveTimeoutMs`; one that still
 * cannot be done rejects the call with its typed error (DatabaseUnreachableError or
 * LockOutcomeUnknownError, naming the grant), in place of what the work ended with: the caller
 * must learn that a grant stays live until the reaper takes it.
 */
async function releaseLeftover(held: { readonly settled: boolean; release(): Promise<boolean> }): Promise<void> {
  if (!held.settled) await held.release();
}

/** A permit call's options without `permits` and `count`, for the options every acquire shares. */
function withoutPermits(options: unknown): Record<string, unknown> {
  if (typeof options !== 'object' || options === null) return {};
  const { permits: _permits, count: _count, ...rest } = options as Record<string, unknown>;
  return rest;
}

/** knex's pool size when its config names none. */
const KNEX_DEFAULT_POOL_MAX = 10;

/**
 * Creates a lock manager over a knex (mysql2) instance, on a database where `migrate()` (from
 * `mysql-rwlock/admin`) has run. Options are validated here, once: a bad one throws
 * InvalidOptionsError, with nothing written.
 *
 * @example
 * ```ts
 * import knex from 'knex';
 * import { createLockManager } from 'mysql-rwlock';
 *
 * const db = knex({ client: 'mysql2', connection: process.env.MYSQL_URL });
 * const locks = createLockManager({ knex: db, owner: 'billing@web-1' });
 * await locks.withWriteLock('invoice:42', async (trx) => {
 *   await trx('invoice').where({ id: 42 }).update({ status: 'paid' });
 * });
 * await locks.close();
 * await db.destroy();
 * ```
 */
export function createLockManager(options: LockManagerOptions): LockManager {
  return new LockManager(options);
}
