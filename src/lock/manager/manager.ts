import {
  acquireCall,
  acquireManyCall,
  acquirePermitCall,
  tryAcquireCall,
  tryAcquirePermitCall,
} from './acquire-calls.js';
import { maintenanceLoop, managerContext } from './call-options.js';
import type { LockContext } from '../context/lock-context.js';
import type { Grant, GrantedWork, LockedGroupWork, LockedWork, LockGroup, LockSets } from '../../contract/api.js';
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
} from '../../options.js';
import type { LockState } from '../../sql/inspect.js';
import type { GrantHistoryEntry, ListedGrant, LockStats } from '../../sql/operate.js';
import type { Knex } from 'knex';
import type { ExclusiveResult } from '../scheduled/exclusive.js';
import type { MaintenanceLoop } from '../scheduled/maintenance.js';
import { Campaigns, leaderCall, termsCall } from '../leader/calls.js';
import type { Campaign, LeadWork } from '../leader/campaign.js';
import type { CampaignOptions } from '../leader/campaign-options.js';
import type { LeaderInfo } from '../../sql/leader.js';
import type { TermRecord } from '../../sql/terms.js';

// Each method hands its call to the module of its concern (see README.md), counted in flight by
// `#calls`. The TSDoc is the source of the API reference: what each call does and throws in a few
// lines, the docs/ page that explains it, and an example where that page does not show the same.

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
  /** Campaigns for leadership in progress, which `close()` closes. */
  readonly #campaigns = new Campaigns();

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

  /** As tryAcquireWrite, for a read lock: the Grant, or null when a writer holds or waits. Takes no options. */
  tryAcquireRead(resourceId: string): Promise<Grant | null> {
    const n = arguments.length;
    return this.#calls.track('tryAcquireRead', () =>
      tryAcquireCall(this.#ctx, 'read', resourceId, n, 'tryAcquireRead'),
    );
  }

  /**
   * Waits for a write lock: the Grant, or LockTimeoutError after `waitMs`, or LockAbortedError.
   * See docs/manager.md ("Acquiring").
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

  /** As acquireWrite, for a read lock: the Grant, or LockTimeoutError after `waitMs`, or LockAbortedError. */
  acquireRead(resourceId: string, options?: AcquireOptions): Promise<Grant> {
    return this.#calls.track('acquireRead', () => acquireCall(this.#ctx, 'read', resourceId, options, 'acquireRead'));
  }

  /**
   * Runs `work` in a transaction under a write lock. The transaction commits only if the grant is
   * still live at commit time, and the release rides inside that commit; otherwise it rolls back
   * and LockLostError is thrown. The grant is released in every outcome. `work` may run again if
   * the transaction is rolled back by a deadlock or a cluster's certification conflict, so keep
   * side effects outside the database out of it. See docs/scoped-calls.md.
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

  /** As withWriteLock, under a read lock. */
  withReadLock<T>(resourceId: string, work: LockedWork<T>, options?: WithLockOptions): Promise<T> {
    return this.#calls.track('withReadLock', () =>
      scopedCall(this.#ctx, 'read', resourceId, work, options, 'withReadLock'),
    );
  }

  /**
   * Runs `work(grant)` under a write lock, for a business transaction of any ORM: `work` opens its
   * own transaction and makes `await grant.fence(adapter)` its last statement before the commit
   * (adapters in `mysql-rwlock/adapters`). The grant is released in every outcome, by that commit or
   * here; a COMMIT whose reply was lost is settled from the grant row (undefined if it committed). A
   * deadlock or certification conflict runs `work` again under the same grant. Nested in another
   * scoped call on the same resource: InvalidOptionsError. Each outcome, and an example: docs/scoped-calls.md.
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
   * See docs/semaphores.md.
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
   * or LockAbortedError. `count` permits are taken together, all or none; a grant like the others.
   * See docs/semaphores.md.
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
   * are counted durable grants. See docs/semaphores.md.
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
   * The enclosing scoped call of this manager in the current async context: its grant and
   * transaction (undefined when the transaction is another ORM's), so that code the callback calls
   * reaches them without being handed them. With a resource id, the call on that resource; without,
   * the innermost. Undefined outside any. An example: docs/decorators.md.
   */
  current(resourceId?: string): { grant: Grant; trx: Knex.Transaction | undefined } | undefined {
    return currentCall(this.#ctx, resourceId);
  }

  /** Lock counts and live grants of a resource, on the database clock. See docs/admin.md, with an example. */
  inspect(resourceId: string): Promise<LockState> {
    return this.#calls.track('inspect', () => inspectCall(this.#ctx, resourceId));
  }

  /**
   * Runs `work` in one transaction under locks on several resources, each in its mode: all taken in
   * one order (by resource id bytes, so two such calls cannot deadlock on each other) within
   * `waitMs`, or none held and LockTimeoutError, LockAbortedError or the database's error thrown.
   * One fence covers every grant: the commit releases them all, or it rolls back and LockLostError
   * names a lost grant. Settled as withWriteLock is. Nesting, and an example: docs/groups.md.
   */
  withLocks<T>(sets: LockSets, work: LockedGroupWork<T>, options?: WithLockOptions): Promise<T> {
    return this.#calls.track('withLocks', () => scopedGroupCall(this.#ctx, sets, work, options));
  }

  /**
   * Waits for locks on several resources, each in its mode, taken in one order (by resource id
   * bytes) within `waitMs`, all or none: the group, or LockTimeoutError / LockAbortedError with
   * nothing held. Release it with `release()`, or fence a transaction with `fence()`. See docs/groups.md.
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
   * under it as `withWriteLock` runs it (with `{ grant: true }`, as `withWriteGrant` does), or
   * `{ ran: false, heldBy }` at once when another instance holds it. The lease is kept ahead for at
   * most `lockAtMostFor`; with `lockAtLeastFor` the grant is kept after a faster run until that long
   * after it was granted, and `close()` waits for that hold. See docs/jobs.md.
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
   * See docs/admin.md, with an example.
   */
  forceRelease(grantId: number, options?: ForceReleaseOptions): Promise<boolean> {
    return this.#calls.track('forceRelease', () => forceReleaseCall(this.#ctx, grantId, options));
  }

  /**
   * Live grants across all resources, oldest first, a page at a time: `next` is the `after` of the
   * next page, null on the last. Ages and `stale` are on the database clock, with this manager's
   * `staleAfterMs` (the reaper's test). See docs/admin.md.
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
   * null on the last. See docs/admin.md, with an example.
   */
  history(resourceId: string, options?: HistoryOptions): Promise<{ grants: GrantHistoryEntry[]; next: number | null }> {
    return this.#calls.track('history', () => historyCall(this.#ctx, resourceId, options));
  }

  /**
   * Counts across all resources: live grants by mode, stale, leased, waiting writers, the oldest age,
   * the last hour's forced releases. See docs/admin.md, with an example.
   */
  stats(): Promise<LockStats> {
    return this.#calls.track('stats', () => statsCall(this.#ctx));
  }

  /**
   * Campaigns for the leadership of `name`: one process at a time leads, and `lead(term)` is
   * called each time this one becomes leader. A term is a leased write grant of `name` (its id the
   * term, a fencing token), renewed every `renewEveryMs`; `term.fence(adapter)` as the last
   * statement of a transaction lets it commit only while the term leads, and leaves it leading.
   * Losing the lease, failing to renew it, `resign()` or `close()` aborts `term.signal`; the
   * campaign goes on (a later term has a higher id) until closed. Resolves once the first attempt
   * was made (leading or waiting); a name held as a semaphore (ResourceKindError) or by readers
   * (LeadershipError) is refused with nothing held. See docs/leader.md.
   *
   * @example
   * ```ts
   * import type { LockManager } from 'mysql-rwlock';
   * import { fromKnex } from 'mysql-rwlock/adapters';
   * import type { Knex } from 'knex';
   * declare const locks: LockManager;
   * declare const db: Knex;
   *
   * await using campaign = await locks.campaign('outbox:shard-1', async (term) => {
   *   while (!term.signal.aborted) {
   *     await db.transaction(async (trx) => {
   *       await trx('outbox_sent').insert({ shard: 1, term: term.id });
   *       await term.fence(fromKnex(trx));
   *     });
   *     await new Promise((resolve) => setTimeout(resolve, 1_000));
   *   }
   * }, { leaseMs: 10_000 });
   * ```
   */
  campaign(name: string, lead: LeadWork, options?: CampaignOptions): Promise<Campaign> {
    return this.#calls.track('campaign', () => this.#campaigns.start(this.#ctx, name, lead, options));
  }

  /**
   * Who leads `name`: the owner, term and start of the live write grant whose lease has not run
   * out, on the database clock; null when no term leads. See docs/leader.md.
   */
  leader(name: string): Promise<LeaderInfo | null> {
    return this.#calls.track('leader', () => leaderCall(this.#ctx, name));
  }

  /**
   * The terms of `name`, newest first: each term's owner, id, start, end, last lease and how it
   * ended (`leading`, `lease-ran-out`, `resigned`, `reaped`, `healed` by a successor, `operator`),
   * a page of `limit` at a time (`next` is the `before` of the next page). See docs/leader.md.
   */
  terms(name: string, options?: HistoryOptions): Promise<{ terms: TermRecord[]; next: number | null }> {
    return this.#calls.track('terms', () => termsCall(this.#ctx, name, options));
  }

  /**
   * Closes the manager: refuses new calls with ManagerClosedError (nothing written), and resolves
   * once the calls in progress (and a `maintenance` sweep) have ended; calls their work makes are
   * still served. Grants already handed out stay valid until released. It does not destroy the knex
   * instance, which is the caller's: destroy it once `close()` resolves. Idempotent: every call
   * returns the same promise. See docs/manager.md, with an example.
   */
  close(): Promise<void> {
    return this.#calls.close(() =>
      Promise.all([this.#maintenance?.stop(), this.#campaigns.closeAll()]).then(() => undefined),
    );
  }

  /** `await using locks = createLockManager(...)` closes the manager when the scope ends: see `close()`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/**
 * Creates a lock manager over a knex (mysql2) instance, on a database where `migrate()` (from
 * `mysql-rwlock/admin`) has run. Options are validated here, once: a bad one throws
 * InvalidOptionsError, with nothing written. The options, and an example: docs/manager.md.
 */
export function createLockManager(options: LockManagerOptions): LockManager {
  return new LockManager(options);
}
