// The types an application holds of the lock client: a grant, the work run under it, the fence's
// executor and the lost-grant hook. Declared here, apart from their implementations, so that every
// module naming a grant (options, tracing, scopes) depends on this leaf and not on the class, which
// depends on them: no import cycle.
import type { Knex } from 'knex';
import type { LockLostInfo, LockMode } from '../types.js';

/**
 * Runs one statement on the caller's open transaction and resolves to its affected-row count. The
 * fence calls it once, with one `UPDATE` statement whose placeholders are `?` and whose parameters
 * are numbers and hexadecimal strings only (no Buffer, no Date), so any driver or ORM can send them
 * as they are.
 */
export type FenceExecutor = (sql: string, params: (number | string)[]) => Promise<number>;

/** Business work run under a lock, inside the transaction the lock commits with. */
export type LockedWork<T> = (trx: Knex.Transaction, grant: Grant) => Promise<T>;

/**
 * Business work run under a lock by `withWriteGrant`/`withReadGrant`: it runs its own transaction,
 * with any ORM, and makes `grant.fence(adapter)` its last statement before the commit.
 */
export type GrantedWork<T> = (grant: Grant) => Promise<T>;

/** `onLockLost`: called once per grant this process learns it lost. */
export type LockLostHandler = (grant: Grant, info: LockLostInfo) => void | Promise<void>;

/**
 * A lock held by this process, as `acquireWrite`, `acquireRead`, `tryAcquire*` and the `with*Lock`
 * callbacks give it. `id` is the fencing token: strictly increasing within one database server.
 * Its methods keep working after the manager that made it is closed.
 *
 * @example
 * ```ts
 * import { createLockManager } from 'mysql-rwlock';
 * import type { Knex } from 'knex';
 * declare const db: Knex;
 *
 * const locks = createLockManager({ knex: db });
 * await using grant = await locks.acquireWrite('invoice:42', { waitMs: 5_000 });
 * console.log(grant.id, grant.mode, grant.resourceId); // released when the scope ends
 * ```
 */
export interface Grant {
  readonly id: number;
  readonly resourceId: string;
  /** The owner of the manager that acquired it. */
  readonly owner: string;
  /** Hex of the client-generated token stored with the grant row. */
  readonly token: string;
  /**
   * 'write', 'read' or 'permit'; a read or write grant changes mode only through `downgrade()` or
   * `tryUpgrade()`, a permit grant never.
   */
  readonly mode: LockMode;
  /** How many permits a permit grant holds (`count` of `acquirePermit`); undefined for read and write grants. */
  readonly permits?: number;

  /**
   * Aborted, with a LockLostError as its reason, when this process learns that the grant was
   * released by someone else (the reaper or an operator) while it still held it: an extension found
   * it gone, or the fence refused it.
   *
   * @example
   * ```ts
   * import type { Grant } from 'mysql-rwlock';
   * declare const grant: Grant;
   *
   * await fetch('https://example.com/slow-export', { signal: grant.signal });
   * ```
   */
  readonly signal: AbortSignal;

  /** True once this object saw the grant end (released by it, or found released by someone else). */
  readonly settled: boolean;

  /**
   * The fence, for a business transaction on any driver or ORM. Call it as the last statement
   * before the caller's COMMIT, through `execute`, which runs one statement on that open
   * transaction and resolves to its affected-row count. It releases the grant inside the
   * transaction: if the transaction commits, the business writes and the release commit together;
   * if the grant is no longer live (reaped, or released by an operator) it throws LockLostError
   * and the caller must roll back. If the caller rolls back after a successful fence, the grant is
   * still held and `release()` releases it. After a commit, call `committed()` (no round trip) or
   * `release()` (one round trip; it then returns false).
   *
   * @example
   * ```ts
   * import type { Grant } from 'mysql-rwlock';
   * import type { Connection, ResultSetHeader } from 'mysql2/promise';
   * declare const conn: Connection;
   * declare const grant: Grant;
   *
   * await conn.beginTransaction();
   * try {
   *   await conn.execute('UPDATE account SET balance = balance - 10 WHERE id = 1');
   *   await grant.fence(async (sql, params) => (await conn.execute<ResultSetHeader>(sql, params))[0].affectedRows);
   *   await conn.commit();
   *   grant.committed();
   * } catch (err) {
   *   await conn.rollback();
   *   await grant.release();
   *   throw err;
   * }
   * ```
   */
  fence(execute: FenceExecutor): Promise<void>;

  /**
   * Turns this live write grant into a read grant, atomically: no writer can get in between, and
   * readers waiting can join at once. The same grant (id, token) stays held, now shared; the log
   * records when (`mode_changed_at`). Inside `withWriteLock` the rest of the callback then runs
   * under the read grant, and the fence checks and releases the read grant. Writes the callback
   * made before the downgrade stay invisible to the new readers until the transaction commits.
   *
   * @example
   * ```ts
   * import type { Grant } from 'mysql-rwlock';
   * declare const grant: Grant;
   *
   * if (grant.mode === 'write') await grant.downgrade(); // readers may join now
   * ```
   */
  downgrade(): Promise<void>;

  /**
   * Turns this live read grant into a write grant if it is the resource's only holder: resolves to
   * this grant, now a write grant, or to null at once when other readers hold it too. Never waits
   * for other grants, so two readers trying to upgrade cannot deadlock; a one-commit section in
   * progress on the resource holds its row until its commit, and the upgrade waits for that.
   *
   * @example
   * ```ts
   * import type { Grant } from 'mysql-rwlock';
   * declare const grant: Grant;
   *
   * const writer = await grant.tryUpgrade();
   * if (writer === null) console.log('other readers hold it; try again later');
   * ```
   */
  tryUpgrade(): Promise<Grant | null>;

  /**
   * Reads the grant row: true while the grant is live. False once it has ended: by this holder (its
   * fenced commit or a release; `signal` not aborted) or by the reaper or an operator (`signal`
   * aborted). After a COMMIT of a fenced transaction that replied an error, this says whether to run
   * it again: the error normally means it rolled back (true), but a cluster member that leaves the
   * group while the commit is being certified cannot know the outcome, and the rest of the group may
   * apply it (false, `signal` not aborted: it committed). Asks until the database answers (through a
   * failover), then LockOutcomeUnknownError after `resolveTimeoutMs`. For a COMMIT whose reply was
   * lost use `release()`, which waits for the lost transaction to finish.
   *
   * @example
   * ```ts
   * import type { Grant } from 'mysql-rwlock';
   * declare const grant: Grant;
   *
   * if (!(await grant.isLive())) console.log('the grant has ended; do not run the work again');
   * ```
   */
  isLive(): Promise<boolean>;

  /**
   * Records that the transaction that ran `fence()` committed: the grant is released. No round trip.
   *
   * @example
   * ```ts
   * import type { Grant } from 'mysql-rwlock';
   * declare const grant: Grant;
   *
   * // after the COMMIT of the transaction whose last statement was grant.fence(...)
   * grant.committed();
   * ```
   */
  committed(): void;

  /**
   * Sets the grant's lease to `ms` from now (database clock), shorter or longer than what was left:
   * by the lease rule (docs/healing.md) the grant is stale once that and the grace have passed,
   * however young or old it is. True if the grant is still live; false (and `signal` aborted) if it
   * had already been released by someone else.
   *
   * @example
   * ```ts
   * import type { Grant } from 'mysql-rwlock';
   * declare const grant: Grant;
   *
   * if (!(await grant.extend(60_000))) throw new Error('lost the lock; stop');
   * ```
   */
  extend(ms: number): Promise<boolean>;

  /**
   * Releases the grant. Idempotent: true when this call released it, false when it had already
   * been released (by this holder earlier, the reaper or an operator), in which case nothing changes.
   * A lost reply is settled by running the same guarded statement again.
   *
   * @example
   * ```ts
   * import type { Grant } from 'mysql-rwlock';
   * declare const grant: Grant;
   *
   * try {
   *   // ... work outside the database, under the lock
   * } finally {
   *   await grant.release();
   * }
   * ```
   */
  release(): Promise<boolean>;

  /**
   * `await using grant = await locks.acquireWrite(id)` releases the grant when the scope ends.
   * Idempotent (a grant already released, by this holder or anyone else, is left as it is); a
   * release that fails rejects, so the failure is reported rather than lost.
   */
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * The resources of `withLocks` and `acquireMany`, each in its mode: ids to lock for writing and ids
 * to lock for reading. Either list may be left out; together they name at least one resource and
 * at most `LIMITS.maxGroupResources`, each once (an id in both lists is refused: name it under
 * `write`).
 */
export interface LockSets {
  write?: readonly string[];
  read?: readonly string[];
  /** Semaphores, each with its limit and how many permits to take of it (see `acquirePermit`). */
  permits?: readonly PermitSet[];
}

/** One semaphore of a group (`LockSets.permits`): its id, its limit, and how many permits to take (default 1). */
export interface PermitSet {
  id: string;
  permits: number;
  count?: number;
}

/**
 * Business work run under a group of locks, inside the transaction they commit with. `grants` are
 * the group's grants sorted by resource id bytes (the order they were taken in), one per resource.
 */
export type LockedGroupWork<T> = (trx: Knex.Transaction, grants: readonly Grant[]) => Promise<T>;

/**
 * Locks on several resources held together, as `acquireMany` gives them: taken in one order (by
 * resource id bytes), all or none. Its methods keep working after the manager that made it is
 * closed.
 *
 * @example
 * ```ts
 * import type { LockManager } from 'mysql-rwlock';
 * declare const locks: LockManager;
 *
 * await using group = await locks.acquireMany({ write: ['loan:1', 'loan:2'] }, { waitMs: 5_000 });
 * console.log(group.grants.map((g) => `${g.resourceId}#${g.id}`)); // released when the scope ends
 * ```
 */
export interface LockGroup {
  /** One grant per resource, sorted by resource id bytes. */
  readonly grants: readonly Grant[];

  /** True once every grant of the group has ended. */
  readonly settled: boolean;

  /**
   * The fence of the whole group, as `Grant.fence` is for one grant: ONE statement, sent through
   * `execute` as the last statement before the caller's COMMIT, that checks every grant is live and
   * releases them all inside the transaction. If any grant is no longer live it throws
   * LockLostError and the caller must roll back, then call `release()`: that releases the grants
   * still held and aborts the `signal` of each grant found lost (its `grantId` is the group's
   * first grant; the lost one is the grant whose `signal` is aborted after `release()`). After a
   * commit, call `committed()` or `release()`.
   *
   * @example
   * ```ts
   * import type { LockGroup } from 'mysql-rwlock';
   * import type { Connection, ResultSetHeader } from 'mysql2/promise';
   * declare const conn: Connection;
   * declare const group: LockGroup;
   *
   * await conn.beginTransaction();
   * try {
   *   await conn.execute('UPDATE loan SET balance = balance - 10 WHERE id = 1');
   *   await conn.execute('UPDATE loan SET balance = balance + 10 WHERE id = 2');
   *   await group.fence(async (sql, params) => (await conn.execute<ResultSetHeader>(sql, params))[0].affectedRows);
   *   await conn.commit();
   *   group.committed();
   * } catch (err) {
   *   await conn.rollback();
   *   await group.release();
   *   throw err;
   * }
   * ```
   */
  fence(execute: FenceExecutor): Promise<void>;

  /** Records that the transaction that ran `fence()` committed: every grant is released. No round trip. */
  committed(): void;

  /**
   * Releases every grant of the group still held, each as `Grant.release` does (a lost reply is
   * settled the same way). True when this call released every grant; false when any had already
   * been released. Tries every grant even if one fails, then rejects with the first failure.
   */
  release(): Promise<boolean>;

  /** `await using group = await locks.acquireMany(...)` releases the group when the scope ends. */
  [Symbol.asyncDispose](): Promise<void>;
}
