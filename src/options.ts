import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { InvalidOptionsError } from './errors.js';
import type { LockLostHandler } from './lock/api.js';
import type { LockMode } from './types.js';

/**
 * The default of every option of the library, in one place. At the top: `createLockManager`'s
 * options and the acquire calls' `waitMs`; then one group per call, keyed by its options' names.
 * Each option's documentation names the entry it defaults to.
 */
export const DEFAULTS = deepFreeze({
  staleAfterMs: 600_000,
  waitMs: 30_000,
  backoffMinMs: 2,
  backoffMaxMs: 100,
  writerIntentMs: 1_000,
  deadlockRetries: 5,
  resolveTimeoutMs: 30_000,
  procedures: 'auto' as ProceduresMode,
  sectionIdleTimeoutMs: 10_000,
  selfHeal: true,
  /** `maintenance: true` (its purge's `retentionMs` is `purge.retentionMs`) */
  maintenance: { intervalMs: 60_000 },
  /** `locks.list()` */
  list: { limit: 100 },
  /** `locks.history()` */
  history: { limit: 50 },
  /** `reapStaleGrants()` (its `staleAfterMs` is the top-level one) */
  reap: { batchSize: 500, lockWaitTimeoutSec: 1 },
  /** `purgeReleasedGrants()`; `retentionMs` is 7 days */
  purge: { retentionMs: 604_800_000, batchSize: 5_000 },
  /** `checkLockCounts()` and `repairLockCounts()` */
  checkLockCounts: { limit: 1_000 },
  /** `migrate()` */
  migrate: { waitMs: 60_000, procedures: true },
  /** `runExclusive()` and `@Exclusive`; their `leaseMs` is `lockAtMostFor` unless given */
  runExclusive: { lockAtLeastFor: 0 },
  /** `createRunCoordinator()` (`mysql-rwlock/cron`) */
  createRunCoordinator: { prefix: 'cron:', lockAtLeastFor: 0 },
  /** `acquirePermit()`, `tryAcquirePermit()`, `withPermit()`: how many permits a call takes */
  permit: { count: 1 },
});

function deepFreeze<T extends object>(
  value: T,
): Readonly<{ [K in keyof T]: T[K] extends object ? Readonly<T[K]> : T[K] }> {
  for (const inner of Object.values(value)) if (typeof inner === 'object' && inner !== null) Object.freeze(inner);
  return Object.freeze(value);
}

/**
 * How an acquire runs: 'auto' calls the `rwlock_acquire` procedure and, if the database has none
 * (migrated with `procedures: false`), uses plain statements from then on; `false` never calls a
 * procedure (TiDB, Vitess, PlanetScale, or a policy against stored routines); `true` requires it.
 */
export type ProceduresMode = 'auto' | boolean;

/** Bounds of what validation accepts, each for a reason given here once. */
export const LIMITS = Object.freeze({
  /** `t_read_write_lock.resource_id` is VARBINARY(255): a resource id is at most this many bytes in UTF-8. */
  maxResourceIdBytes: 255,
  /** Longest delay a Node timer can wait (2^31 - 1 ms); waits and leases are timers. */
  maxTimerMs: 2_147_483_647,
  /** A lease is extended every third of it: shorter than this would be mostly extensions. */
  minLeaseMs: 30,
  /** `t_lock_log.owner` is VARCHAR(255): characters (code points), not UTF-16 units. */
  maxOwnerChars: 255,
  /** `t_lock_release_note.reason` is VARCHAR(500): characters (code points). */
  maxReasonChars: 500,
  /** Rows one call of `list()`, `history()` or `checkLockCounts()` returns; a page is read and sent at once. */
  maxPageSize: 10_000,
  /** Grants reaped in one transaction; larger batches hold row locks that block holders too long. */
  maxReapBatch: 10_000,
  maxPurgeBatch: 100_000,
  /**
   * 100 years: far enough for any retention or stale cutoff (`staleAfterMs`), near enough that the
   * database clock minus it stays a valid DATETIME.
   */
  maxRetentionMs: 3_155_760_000_000,
  /**
   * One hour: a lost reply still unsettled after that is an outage, not a lost packet, and the
   * purge floor below must outlast every settle.
   */
  maxResolveTimeoutMs: 3_600_000,
  /**
   * One day: the purge never deletes a grant row released (or, for a withdrawal or a section, written)
   * less than this ago, whatever its retention, because settling a lost reply reads that row: a lost
   * commit's settle ends within `maxResolveTimeoutMs` of the loss (plus one probe's lock wait), and a
   * lost acquire's statement reaches the server within TCP's retransmission limit of being sent or
   * never. docs/design.md ("Lost replies") gives the reasoning.
   */
  purgeFloorMs: 86_400_000,
  maxBackoffMs: 60_000,
  maxWriterIntentMs: 3_600_000,
  maxRetries: 1_000,
  /** Resources one `withLocks` or `acquireMany` call locks: its fence is one statement with a term per grant. */
  maxGroupResources: 64,
  /**
   * A semaphore's limit (`permits`): holders are counted in `t_read_write_lock.r_count`, and a
   * million holders of one resource is far past any pool of connections that could hold them.
   */
  maxPermits: 1_000_000,
  /** A section's idle bound is whole seconds in a session variable: one day is far beyond "short work". */
  maxSectionIdleTimeoutMs: 86_400_000,
  /** Sweeps closer than this would be mostly look-ups of nothing. */
  minMaintenanceIntervalMs: 100,
});

export interface LockManagerOptions {
  /** A knex instance using the `mysql2` client, on a database where `migrate()` has run. */
  knex: Knex;
  /** Recorded in `t_lock_log.owner` for every grant. @defaultValue `host/pid/random` */
  owner?: string;
  /**
   * Age after which a grant not under a lease is stale: this manager's self-healing acquires and its
   * `maintenance` sweep release it then, and `inspect()`, `list()` and `stats()` call it stale. Keep
   * it equal to the reaper's. @defaultValue `DEFAULTS.staleAfterMs`
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

/** The resource whose write grant a maintenance sweep runs under (one sweep at a time, across processes). */
export const MAINTENANCE_RESOURCE = 'mysql-rwlock:maintenance';

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
   * scoped call: while `work` runs), so a long but live holder is not reaped; a holder that stops
   * running (paused, partitioned) stops extending and is reaped as usual. `grant.signal` aborts if
   * an extension finds the grant lost. In `acquireMany`, every grant of the group.
   * @defaultValue off: the grant is reaped `staleAfterMs` after it was granted
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

/** A semaphore's limit and a call's count, validated: typed errors before anything is written. */
export function permitOptions(what: string, input: unknown): { limit: number; count: number } {
  if (typeof input !== 'object' || input === null || Array.isArray(input))
    throw new InvalidOptionsError(`${what} needs options with permits (the semaphore's limit), e.g. { permits: 5 }`);
  const o = input as Record<string, unknown>;
  if (o.permits === undefined) throw new InvalidOptionsError(`permits: ${what} needs the semaphore's limit`);
  const limit = integerOption('permits', o.permits, 1, LIMITS.maxPermits);
  const count = integerOption('count', o.count ?? DEFAULTS.permit.count, 1, limit);
  return { limit, count };
}

/**
 * `keys`, checked when compiled to be exactly the keys of `T`: a list that leaves one out, or names
 * one `T` lacks, does not compile. So an options type and the run-time list of names its validator
 * accepts cannot part. Used as `keysOf<AcquireOptions>()(['waitMs', ...])`.
 */
export function keysOf<T>() {
  return <const K extends readonly (keyof T & string)[]>(
    keys: K & ([Exclude<keyof T, K[number]>] extends [never] ? unknown : { missing: Exclude<keyof T, K[number]> }),
  ): K => keys;
}

/**
 * The names of each call's options: the one list its validator accepts (an unknown name is refused),
 * and the list the decorators build theirs from. Each is checked against its type by `keysOf`.
 */
export const OPTION_KEYS = Object.freeze({
  /** `acquireWrite`, `acquireRead`, `acquireMany` */
  acquire: keysOf<AcquireOptions>()(['waitMs', 'signal', 'leaseMs', 'maxHoldMs']),
  /** `withWriteLock`, `withReadLock`, `withLocks` */
  scoped: keysOf<WithLockOptions>()(['waitMs', 'signal', 'isolationLevel', 'leaseMs', 'maxHoldMs', 'section']),
  /** `withWriteGrant`, `withReadGrant` */
  granted: keysOf<WithGrantOptions>()(['waitMs', 'signal', 'leaseMs', 'maxHoldMs']),
  /** `runExclusive` */
  exclusive: keysOf<ExclusiveOptions>()(['lockAtMostFor', 'lockAtLeastFor', 'leaseMs', 'grant']),
  /** `createLockManager` */
  manager: keysOf<LockManagerOptions>()([
    'knex',
    'owner',
    'staleAfterMs',
    'backoffMinMs',
    'backoffMaxMs',
    'writerIntentMs',
    'deadlockRetries',
    'resolveTimeoutMs',
    'procedures',
    'onLockLost',
    'sectionIdleTimeoutMs',
    'selfHeal',
    'maintenance',
  ]),
});

const ISOLATION_LEVELS: readonly string[] = ['read uncommitted', 'read committed', 'repeatable read', 'serializable'];

/**
 * The options argument of `what`: undefined becomes {}, anything but a plain object is refused,
 * and so is any key not in `known` (a misspelt option would otherwise be ignored silently). The
 * library's one rule for absent options: an option left out, or set to `undefined`, takes its
 * default; `null` is refused for every option, so that it never means "default" for one option and
 * an error for another.
 */
export function optionsObject(what: string, input: unknown, known: readonly string[]): Record<string, unknown> {
  if (input === undefined) return {};
  if (typeof input !== 'object' || input === null || Array.isArray(input))
    throw new InvalidOptionsError(`options of ${what} must be an object`);
  for (const [key, value] of Object.entries(input)) {
    if (!known.includes(key)) {
      throw new InvalidOptionsError(`${key}: unknown option of ${what} (known: ${known.join(', ')})`);
    }
    if (value === null)
      throw new InvalidOptionsError(`${key} must not be null, got null: leave it out (or undefined) for its default`);
  }
  return input as Record<string, unknown>;
}

export function integerOption(name: string, value: unknown, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidOptionsError(`${name} must be an integer from ${min} to ${max}, got ${describe(value)}`);
  }
  return value;
}

function describe(value: unknown): string {
  if (typeof value === 'number') return String(value);
  if (typeof value === 'string')
    return value.length > 40
      ? `${JSON.stringify(value.slice(0, 40))}… (${value.length} UTF-16 units)`
      : JSON.stringify(value);
  return value === null ? 'null' : typeof value;
}

/**
 * The knex instance a function was given, checked: a knex instance whose client is mysql2. `name`
 * is how the caller passed it (`knex` in options, `db` as an argument).
 */
export function knexOption(name: string, value: unknown): Knex {
  const isKnex =
    typeof value === 'function' &&
    typeof (value as Partial<Knex>).client === 'object' &&
    (value as Partial<Knex>).client !== null;
  if (!isKnex) throw new InvalidOptionsError(`${name} must be a knex instance, got ${describe(value)}`);
  const driver = ((value as Knex).client as { config?: { client?: unknown } }).config?.client;
  if (driver !== 'mysql2')
    throw new InvalidOptionsError(`${name} must be a knex instance using the 'mysql2' client, got ${describe(driver)}`);
  return value as Knex;
}

function ownerOption(value: unknown): string {
  const owner = value ?? `${hostname()}/${process.pid}/${randomBytes(3).toString('hex')}`;
  const chars = typeof owner === 'string' ? [...owner].length : 0;
  if (typeof owner !== 'string' || chars === 0 || chars > LIMITS.maxOwnerChars || !owner.isWellFormed()) {
    throw new InvalidOptionsError(
      `owner must be well-formed text of 1 to ${LIMITS.maxOwnerChars} characters, got ${describe(owner)}`,
    );
  }
  return owner;
}

export function resolveManagerOptions(input: unknown): ResolvedManagerOptions {
  if (typeof input !== 'object' || input === null)
    throw new InvalidOptionsError('options must be an object with a knex instance');
  const o = optionsObject('createLockManager', input, OPTION_KEYS.manager);
  if (o.onLockLost !== undefined && typeof o.onLockLost !== 'function') {
    throw new InvalidOptionsError(
      `onLockLost must be a function (grant, { releasedBy, detectedBy }) => void, got ${describe(o.onLockLost)}`,
    );
  }
  const resolved: ResolvedManagerOptions = {
    knex: knexOption('knex', o.knex),
    owner: ownerOption(o.owner),
    staleAfterMs: staleAfterOption(o.staleAfterMs),
    backoffMinMs: integerOption('backoffMinMs', o.backoffMinMs ?? DEFAULTS.backoffMinMs, 1, LIMITS.maxBackoffMs),
    backoffMaxMs: integerOption('backoffMaxMs', o.backoffMaxMs ?? DEFAULTS.backoffMaxMs, 1, LIMITS.maxBackoffMs),
    writerIntentMs: integerOption(
      'writerIntentMs',
      o.writerIntentMs ?? DEFAULTS.writerIntentMs,
      0,
      LIMITS.maxWriterIntentMs,
    ),
    deadlockRetries: integerOption(
      'deadlockRetries',
      o.deadlockRetries ?? DEFAULTS.deadlockRetries,
      0,
      LIMITS.maxRetries,
    ),
    resolveTimeoutMs: integerOption(
      'resolveTimeoutMs',
      o.resolveTimeoutMs ?? DEFAULTS.resolveTimeoutMs,
      0,
      LIMITS.maxResolveTimeoutMs,
    ),
    procedures: proceduresOption(o.procedures),
    onLockLost: o.onLockLost as LockLostHandler | undefined,
    sectionIdleTimeoutMs: integerOption(
      'sectionIdleTimeoutMs',
      o.sectionIdleTimeoutMs ?? DEFAULTS.sectionIdleTimeoutMs,
      1,
      LIMITS.maxSectionIdleTimeoutMs,
    ),
    selfHeal: booleanOption('selfHeal', o.selfHeal, DEFAULTS.selfHeal),
    maintenance: maintenanceOption(o.maintenance),
  };
  if (resolved.backoffMinMs > resolved.backoffMaxMs) {
    throw new InvalidOptionsError(
      `backoffMinMs (${resolved.backoffMinMs}) must not exceed backoffMaxMs (${resolved.backoffMaxMs})`,
    );
  }
  return resolved;
}

function maintenanceOption(value: unknown): ResolvedManagerOptions['maintenance'] {
  if (value === undefined || value === false) return null;
  const o = value === true ? {} : optionsObject('maintenance', value, ['intervalMs', 'retentionMs']);
  return {
    intervalMs: integerOption(
      'maintenance.intervalMs',
      o.intervalMs ?? DEFAULTS.maintenance.intervalMs,
      LIMITS.minMaintenanceIntervalMs,
      LIMITS.maxTimerMs,
    ),
    retentionMs: integerOption(
      'maintenance.retentionMs',
      o.retentionMs ?? DEFAULTS.purge.retentionMs,
      0,
      LIMITS.maxRetentionMs,
    ),
  };
}

/**
 * A stale cutoff, wherever one is given (`createLockManager`, `reapStaleGrants`, the metrics, the
 * operator page, `STALE_AFTER_MS` of the reaper job and the CLI): `DEFAULTS.staleAfterMs` when
 * absent, 1 ms to `LIMITS.maxRetentionMs`. `name` is how the caller gave it.
 */
export function staleAfterOption(value: unknown, name = 'staleAfterMs'): number {
  return integerOption(name, value ?? DEFAULTS.staleAfterMs, 1, LIMITS.maxRetentionMs);
}

/** `reapStaleGrants`' `batchSize` and the reaper job's `REAPER_BATCH_SIZE`: 1 to `LIMITS.maxReapBatch`. */
export function reapBatchOption(value: unknown, name = 'batchSize'): number {
  return integerOption(name, value ?? DEFAULTS.reap.batchSize, 1, LIMITS.maxReapBatch);
}

/**
 * `purgeReleasedGrants`' `retentionMs` (from 1 ms) and the reaper job's `RETENTION_MS` (from 0: no purge):
 * at most `LIMITS.maxRetentionMs`, `DEFAULTS.purge.retentionMs` when absent.
 */
export function retentionOption(value: unknown, name = 'retentionMs', zeroTurnsOff = false): number {
  return integerOption(name, value ?? DEFAULTS.purge.retentionMs, zeroTurnsOff ? 0 : 1, LIMITS.maxRetentionMs);
}

/**
 * A whole number from the environment, for a validator: undefined when unset or empty, the number
 * when it is digits, else the text as it is (which the validator refuses, quoting it).
 */
export function envNumber(env: NodeJS.ProcessEnv, name: string): unknown {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  return /^\d+$/.test(raw) ? Number(raw) : raw;
}

export function proceduresOption(value: unknown): ProceduresMode {
  if (value === undefined) return DEFAULTS.procedures;
  if (value === 'auto' || value === true || value === false) return value;
  throw new InvalidOptionsError(`procedures must be 'auto', true or false, got ${describe(value)}`);
}

export interface ResolvedAcquireOptions {
  waitMs: number;
  signal: AbortSignal | undefined;
  isolationLevel: IsolationLevel | undefined;
  leaseMs: number | undefined;
  maxHoldMs: number | undefined;
  section: boolean;
}

export function resolveCallOptions(
  what: string,
  input: unknown,
  form: 'acquire' | 'scoped' | 'granted',
): ResolvedAcquireOptions {
  const o = optionsObject(what, input, OPTION_KEYS[form]);
  const waitMs = integerOption('waitMs', o.waitMs ?? DEFAULTS.waitMs, 0, LIMITS.maxTimerMs);
  const signal = o.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal))
    throw new InvalidOptionsError('signal must be an AbortSignal');
  const isolationLevel = o.isolationLevel;
  if (
    isolationLevel !== undefined &&
    (typeof isolationLevel !== 'string' || !ISOLATION_LEVELS.includes(isolationLevel))
  ) {
    throw new InvalidOptionsError(
      `isolationLevel must be one of ${ISOLATION_LEVELS.join(', ')}, got ${describe(isolationLevel)}`,
    );
  }
  const leaseMs = leaseOption(o.leaseMs);
  const maxHoldMs = maxHoldOption(o.maxHoldMs, leaseMs);
  const section = booleanOption('section', o.section, false);
  if (section && leaseMs !== undefined)
    throw new InvalidOptionsError('leaseMs cannot be used with section: a section holds no durable grant to extend');
  return { waitMs, signal, isolationLevel: isolationLevel as IsolationLevel | undefined, leaseMs, maxHoldMs, section };
}

function leaseOption(value: unknown): number | undefined {
  return value === undefined ? undefined : integerOption('leaseMs', value, LIMITS.minLeaseMs, LIMITS.maxTimerMs);
}

/** A cap on a kept-ahead lease, meaningless without one. */
function maxHoldOption(value: unknown, leaseMs: number | undefined): number | undefined {
  if (value === undefined) return undefined;
  const maxHoldMs = integerOption('maxHoldMs', value, 1, LIMITS.maxTimerMs);
  if (leaseMs === undefined)
    throw new InvalidOptionsError('maxHoldMs needs leaseMs: it caps a lease that is kept ahead, and none is');
  return maxHoldMs;
}

/** The options of `runExclusive` and `@Exclusive`: how long a job's grant is held at most and at least. */
export interface ExclusiveOptions {
  /**
   * The most a run holds the job's grant: its lease is kept ahead (`leaseMs`) for at most this long
   * after the grant, then `grant.signal` aborts and the grant goes stale as any other once its
   * lease has run out; a run still going then commits nothing once the reaper has released it.
   * Required; at least `LIMITS.minLeaseMs`.
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

export function resolveExclusiveOptions(what: string, input: unknown): ResolvedExclusiveOptions {
  if (input === undefined) throw new InvalidOptionsError(`lockAtMostFor: ${what} needs { lockAtMostFor }`);
  const o = optionsObject(what, input, OPTION_KEYS.exclusive);
  if (o.lockAtMostFor === undefined) throw new InvalidOptionsError(`lockAtMostFor: ${what} needs it`);
  const lockAtMostFor = integerOption('lockAtMostFor', o.lockAtMostFor, LIMITS.minLeaseMs, LIMITS.maxTimerMs);
  const lockAtLeastFor = integerOption(
    'lockAtLeastFor',
    o.lockAtLeastFor ?? DEFAULTS.runExclusive.lockAtLeastFor,
    0,
    lockAtMostFor,
  );
  const leaseMs = leaseOption(o.leaseMs) ?? lockAtMostFor;
  return { lockAtMostFor, lockAtLeastFor, leaseMs, grant: booleanOption('grant', o.grant, false) };
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

/** Text an operator gives: well-formed, 1 to `max` characters (code points), as UTF-8. */
export function textOption(name: string, value: unknown, max: number): Buffer {
  const chars = typeof value === 'string' ? [...value].length : 0;
  if (typeof value !== 'string' || chars === 0 || chars > max || !value.isWellFormed()) {
    throw new InvalidOptionsError(`${name} must be well-formed text of 1 to ${max} characters, got ${describe(value)}`);
  }
  return Buffer.from(value, 'utf8');
}

export function booleanOption(name: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean')
    throw new InvalidOptionsError(`${name} must be true or false, got ${describe(value)}`);
  return value;
}
