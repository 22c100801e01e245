import {
  acquireCall,
  acquireManyCall,
  acquirePermitCall,
  tryAcquireCall,
  tryAcquirePermitCall,
} from './acquire-calls.js';
import { maintenanceLoop, managerContext } from './call-options.js';
import type { LockContext } from './context.js';
import type { Grant, GrantedWork, LockedGroupWork, LockedWork, LockGroup, LockSets } from './api.js';
import { InFlight } from './in-flight.js';
import { currentCall, forceReleaseCall, historyCall, inspectCall, listCall, statsCall } from './operator-calls.js';
import { runExclusiveCall } from './exclusive-call.js';
import { grantedCall, scopedCall, scopedGroupCall, withPermitCall } from './scoped-calls.js';
import {
  resolveManagerOptions,
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
import type { LockState } from '../sql/inspect.js';
import type { GrantHistoryEntry, ListedGrant, LockStats } from '../sql/operate.js';
import type { Knex } from 'knex';
import type { ExclusiveResult } from '../jobs/exclusive.js';
import type { MaintenanceLoop } from '../jobs/maintenance.js';

// Each method hands its call to the module of its concern (see README.md), counted in flight by
// `#calls`. The file is over 400 lines by its TSDoc alone, the source of the API reference.

/**
 * The front door: acquire, scoped fenced work, inspection and operator release over one database.
 * Made by {@link createLockManager}; exported as a type only.
 */
export class LockManager {
  readonly #ctx: LockContext;
  /** Calls in progress, which `close()` waits for. */
  readonly #calls: InFlight;
  /** `maintenance: true`: the in-process sweep, stopped by `close()`. */
  readonly #maintenance: MaintenanceLoop | undefined;

  /** Use createLockManager: the class is exported as a type only. */
  constructor(options: LockManagerOptions) {
    this.#ctx = managerContext(resolveManagerOptions(options));
    this.#calls = new InFlight(this.#ctx.scopes);
    this.#maintenance = maintenanceLoop(this.#ctx);
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
    const n = arguments.length;
    return this.#calls.track('tryAcquireWrite', () =>
      tryAcquireCall(this.#ctx, 'write', resourceId, n, 'tryAcquireWrite'),
    );
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
    const n = arguments.length;
    return this.#calls.track('tryAcquireRead', () =>
      tryAcquireCall(this.#ctx, 'read', resourceId, n, 'tryAcquireRead'),
    );
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
    return this.#calls.track('acquireWrite', () =>
      acquireCall(this.#ctx, 'write', resourceId, options, 'acquireWrite'),
    );
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
    return this.#calls.track('acquireRead', () => acquireCall(this.#ctx, 'read', resourceId, options, 'acquireRead'));
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
    return this.#calls.track('withWriteLock', () =>
      scopedCall(this.#ctx, 'write', resourceId, work, options, 'withWriteLock'),
    );
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
    return this.#calls.track('withReadLock', () =>
      scopedCall(this.#ctx, 'read', resourceId, work, options, 'withReadLock'),
    );
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
    return this.#calls.track('withWriteGrant', () =>
      grantedCall(this.#ctx, 'write', resourceId, work, options, 'withWriteGrant'),
    );
  }

  /** As withWriteGrant, under a read lock. */
  withReadGrant<T>(resourceId: string, work: GrantedWork<T>, options?: WithGrantOptions): Promise<T | undefined> {
    return this.#calls.track('withReadGrant', () =>
      grantedCall(this.#ctx, 'read', resourceId, work, options, 'withReadGrant'),
    );
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
    return this.#calls.track('tryAcquirePermit', () => tryAcquirePermitCall(this.#ctx, resourceId, options));
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
    return this.#calls.track('acquirePermit', () => acquirePermitCall(this.#ctx, resourceId, options));
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
    return this.#calls.track('withPermit', () => withPermitCall(this.#ctx, resourceId, work, options));
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
    return currentCall(this.#ctx, resourceId);
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
    return this.#calls.track('inspect', () => inspectCall(this.#ctx, resourceId));
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
    return this.#calls.track('withLocks', () => scopedGroupCall(this.#ctx, sets, work, options));
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
    return this.#calls.track('acquireMany', () => acquireManyCall(this.#ctx, sets, options));
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
    return this.#calls.track('runExclusive', () =>
      runExclusiveCall(this.#ctx, name, work, options, (hold) => this.#calls.hold(hold)),
    );
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
    return this.#calls.track('forceRelease', () => forceReleaseCall(this.#ctx, grantId, options));
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
    return this.#calls.track('list', () => listCall(this.#ctx, options));
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
    return this.#calls.track('history', () => historyCall(this.#ctx, resourceId, options));
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
    return this.#calls.track('stats', () => statsCall(this.#ctx));
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
    return this.#calls.close(() => this.#maintenance?.stop());
  }

  /** `await using locks = createLockManager(...)` closes the manager when the scope ends: see `close()`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

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
