// The options each call takes, as the types an application writes them in, and the resolved forms
// the validators (`resolve.ts`) hand to the code. Defaults are named, not written: `defaults.ts`.
import type { Knex } from 'knex';
import type { LockLostHandler } from '../contract/api.js';
import type { LockMode } from '../types.js';

/**
 * How an acquire runs: 'auto' calls the `rwlock_acquire` procedure and, if the database has none
 * (migrated with `procedures: false`), uses plain statements from then on; `false` never calls a
 * procedure (TiDB, Vitess, PlanetScale, or a policy against stored routines); `true` requires it.
 * Under 'auto' and `true` a durable group of free resources is granted by one call of
 * `rwlock_acquire_group` (migration 011); a database without it takes groups one acquire per resource.
 */
export type ProceduresMode = 'auto' | boolean;

export interface LockManagerOptions {
  /** A knex instance using the `mysql2` client, on a database where `migrate()` has run. */
  knex: Knex;
  /** Recorded in `t_lock_log.owner` for every grant. @defaultValue `host/pid/random` */
  owner?: string;
  /**
   * Age after which a grant without a lease is stale (a leased one is stale when its lease runs out:
   * the lease rule, docs/healing.md): this manager's self-healing acquires and its `maintenance` sweep
   * release it then, and `inspect()`, `list()` and `stats()` call it stale. Keep it equal to the
   * reaper's. @defaultValue `DEFAULTS.staleAfterMs`
   */
  staleAfterMs?: number;
  /** First retry delay of a waiting acquire (full jitter, doubling). @defaultValue `DEFAULTS.backoffMinMs` */
  backoffMinMs?: number;
  /** Longest retry delay of a waiting acquire. @defaultValue `DEFAULTS.backoffMaxMs` */
  backoffMaxMs?: number;
  /**
   * How long a waiting writer keeps new readers out after its last attempt, so a stream of readers
   * cannot starve it. 0 turns writer preference off. @defaultValue `DEFAULTS.writerIntentMs`
   */
  writerIntentMs?: number;
  /** Retries of a lock transaction, or of a business transaction, that failed with a deadlock (1213). @defaultValue `DEFAULTS.deadlockRetries` */
  deadlockRetries?: number;
  /** How long to keep trying to learn the outcome of a commit whose connection was lost. @defaultValue `DEFAULTS.resolveTimeoutMs`, at most `LIMITS.maxResolveTimeoutMs` */
  resolveTimeoutMs?: number;
  /**
   * Whether acquire calls the `rwlock_acquire` procedure (one round trip) or runs plain statements
   * (five): 'auto' uses the procedure when the database has it. See {@link ProceduresMode}. @defaultValue `DEFAULTS.procedures`
   */
  procedures?: ProceduresMode;
  /**
   * Called once per grant this process learns it lost: released by the reaper (or a self-healing
   * acquire) or an operator while it still held it (the fence refused its commit, a lease extension
   * or a release found it gone). Errors it throws (or a promise it rejects) are reported as a
   * process warning, never to the lock.
   * @defaultValue none
   */
  onLockLost?: LockLostHandler;
  /**
   * How long the server keeps a one-commit section's connection in its transaction while it sends
   * nothing (a paused or partitioned holder): past it the server closes the connection, the
   * transaction rolls back and the resource is free again. Whole seconds on the server, rounded up:
   * MariaDB's `idle_transaction_timeout`, MySQL's `wait_timeout`, set for the section's
   * transaction and restored after it. Keep it above the longest pause between two statements of
   * a section's work. @defaultValue `DEFAULTS.sectionIdleTimeoutMs`
   */
  sectionIdleTimeoutMs?: number;
  /**
   * Whether this manager's sections write their history row (one `t_lock_log` row per resource,
   * released by `section`), when a call does not say (its `history` option). `false` runs them with
   * exclusion and the commit only: cheaper, but nothing in history or the in-progress view, and a
   * COMMIT whose reply was lost ends in LockOutcomeUnknownError. See docs/sections.md.
   * @defaultValue `DEFAULTS.sectionHistory`
   */
  sectionHistory?: boolean;
  /**
   * Whether an acquire that is refused releases the resource's stale grants as the reaper would
   * (the reaper's test with this manager's `staleAfterMs`, on the database clock; guarded,
   * versioned, recorded as `reaper` with a note naming this manager) and tries again in the same
   * call, so that a lock frees itself once its crashed holder's grant is stale, with no reaper
   * running. `false` leaves every stale grant to the reaper. See docs/healing.md.
   * @defaultValue `DEFAULTS.selfHeal`
   */
  selfHeal?: boolean;
  /**
   * Runs the reaper's sweep in this process (`reapStaleGrants` with this manager's `staleAfterMs`,
   * then `purgeReleasedGrants`), every `intervalMs`, one process at a time across every manager
   * with maintenance on: a sweep runs only under a write grant of the resource
   * `'mysql-rwlock:maintenance'`, taken with one attempt. Stopped by `close()`. A failed sweep is a
   * process warning. `true`, or `{ intervalMs, retentionMs }`: `intervalMs` from the end of one
   * sweep to the next attempt (`DEFAULTS.maintenance.intervalMs`, at least
   * `LIMITS.minMaintenanceIntervalMs`); `retentionMs`: released grants older than this are purged
   * at each sweep, never one released less than `LIMITS.purgeFloorMs` ago (`DEFAULTS.purge.retentionMs`;
   * 0 purges nothing, so the manager's user needs no DELETE grant). @defaultValue false
   */
  maintenance?: boolean | { intervalMs?: number; retentionMs?: number };
}

export interface ResolvedManagerOptions {
  knex: Knex;
  owner: string;
  staleAfterMs: number;
  backoffMinMs: number;
  backoffMaxMs: number;
  writerIntentMs: number;
  deadlockRetries: number;
  resolveTimeoutMs: number;
  procedures: ProceduresMode;
  onLockLost: LockLostHandler | undefined;
  sectionIdleTimeoutMs: number;
  sectionHistory: boolean;
  selfHeal: boolean;
  /** null: no maintenance in this process. */
  maintenance: { intervalMs: number; retentionMs: number } | null;
}

export interface AcquireOptions {
  /** How long to keep trying before LockTimeoutError. 0 means one attempt. @defaultValue `DEFAULTS.waitMs` */
  waitMs?: number;
  /** Cancels the wait with an AbortError (LockAbortedError). */
  signal?: AbortSignal;
  /**
   * Keeps the grant's lease this far ahead (extended every third of it) until it is released (in a
   * scoped call: while `work` runs), so a live holder is not reaped however long it holds; a holder
   * that stops running (crashed, paused, partitioned) stops extending, and its grant is stale once
   * the lease runs out, by the lease rule (docs/healing.md), whatever `staleAfterMs`. `grant.signal`
   * aborts if an extension finds the grant lost. In `acquireMany`, every grant of the group.
   * @defaultValue off: the grant is stale `staleAfterMs` after it was granted
   */
  leaseMs?: number;
  /**
   * A cap on the kept-ahead lease (needs `leaseMs`): the lease is never extended past this long
   * after the grant; then the renewal stops, `grant.signal` aborts (a TimeoutError) and the grant
   * goes stale as any other once its lease has run out. @defaultValue none: kept ahead until released
   */
  maxHoldMs?: number;
}

export type IsolationLevel = 'read uncommitted' | 'read committed' | 'repeatable read' | 'serializable';

export interface WithLockOptions extends WithGrantOptions {
  /** Isolation level of the business transaction. @defaultValue the connection's default */
  isolationLevel?: IsolationLevel;
  /**
   * Runs the callback as a one-commit section: the business transaction takes the lock with its
   * first statement (a guarded update of the resource row, whose row lock it keeps until the
   * commit), logs the section in the history and commits once; no durable grant is written, so
   * nothing is left for the reaper if the process dies. For short work only: a section holds the
   * row lock (and a connection) throughout, and the server ends a section idle longer than the
   * manager's `sectionIdleTimeoutMs`. Waits on another section's row lock are bounded in whole
   * seconds (rounded up, at least 1 s). The grant passed to the callback cannot `fence`,
   * `release`, `extend`, `downgrade` or `tryUpgrade` (SectionError). Not with `leaseMs`. See
   * docs/sections.md. @defaultValue false
   */
  section?: boolean;
  /**
   * With `section`: whether the section writes its history row. `false` keeps the exclusion and the
   * commit and writes no row: the grant's `id` is 0, history and the operators' in-progress view do
   * not show the section, and a COMMIT whose reply was lost ends in LockOutcomeUnknownError (there is
   * no row to settle it by). Not `false` without `section` (a durable grant is its row).
   * See docs/sections.md. @defaultValue the manager's `sectionHistory`
   */
  history?: boolean;
}

/** The options of `withWriteGrant`/`withReadGrant`: the business transaction, and its isolation level, are the caller's. */
export type WithGrantOptions = AcquireOptions;

/**
 * The options of `acquirePermit`, `tryAcquirePermit` and `withPermit`: the semaphore's limit and how
 * many permits the call takes, beside the options of the matching read-write call.
 */
export interface PermitOptions {
  /**
   * The semaphore's limit: at most this many permits are held at once. Required, an integer from 1
   * to `LIMITS.maxPermits`. Stored with the resource's row while it has holders: a call with another
   * limit meanwhile is refused with PermitLimitError (see docs/semaphores.md).
   */
  permits: number;
  /** How many permits this call takes, all or none, at most `permits`. @defaultValue `DEFAULTS.permit.count` */
  count?: number;
}

export interface ResolvedAcquireOptions {
  waitMs: number;
  signal: AbortSignal | undefined;
  isolationLevel: IsolationLevel | undefined;
  leaseMs: number | undefined;
  maxHoldMs: number | undefined;
  section: boolean;
  /** Undefined: the manager's `sectionHistory`. */
  history: boolean | undefined;
}

/** The options of `runExclusive` and `@Exclusive`: how long a job's grant is held at most and at least. */
export interface ExclusiveOptions {
  /**
   * The most a run holds the job's grant, as ShedLock's: its lease is kept ahead (`leaseMs`) for at
   * most this long after the grant, then `grant.signal` aborts and, by the lease rule
   * (docs/healing.md), the grant is stale once the lease and the grace have passed, whatever
   * `staleAfterMs`: a dead node's job runs elsewhere then, and a run still going commits nothing once
   * its grant was released. Required; at least `LIMITS.minLeaseMs`.
   */
  lockAtMostFor: number;
  /**
   * The least the job's grant is held, from the grant, on the database clock: after a faster run
   * the grant is kept, and released once this has passed. At most `lockAtMostFor`.
   * @defaultValue `DEFAULTS.runExclusive.lockAtLeastFor`
   */
  lockAtLeastFor?: number;
  /** How far ahead the lease is kept while the job runs, every third of it. @defaultValue `lockAtMostFor`: one lease for the whole run */
  leaseMs?: number;
  /**
   * Run `work(grant)` as `withWriteGrant` does, for another ORM's transaction, instead of
   * `work(trx, grant)` in a knex transaction. @defaultValue false
   */
  grant?: boolean;
}

export interface ResolvedExclusiveOptions {
  lockAtMostFor: number;
  lockAtLeastFor: number;
  leaseMs: number;
  grant: boolean;
}

export interface ListOptions {
  /** Only grants of this mode. */
  mode?: LockMode;
  /** Only grants whose owner is exactly this. */
  owner?: string;
  /** Only grants the reaper would release now. @defaultValue false */
  staleOnly?: boolean;
  /** Only resources whose id starts with these bytes (UTF-8). */
  resourcePrefix?: string;
  /** Grants per page. @defaultValue `DEFAULTS.list.limit`, at most `LIMITS.maxPageSize` */
  limit?: number;
  /** The `next` of the previous page: the id of its last grant. */
  after?: number;
}

export interface HistoryOptions {
  /** Grants per page. @defaultValue `DEFAULTS.history.limit`, at most `LIMITS.maxPageSize` */
  limit?: number;
  /** The `next` of the previous page: only grants with a smaller id. */
  before?: number;
}

export interface ForceReleaseOptions {
  /** Why: kept in `t_lock_release_note` with who released it (this manager's owner). At most 500 characters. */
  reason?: string;
}
