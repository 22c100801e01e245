// The library's constants: every option's default (`DEFAULTS`) and every bound validation holds
// to (`LIMITS`), each with its reason. An option's TSDoc names the entry it defaults to.
import type { ProceduresMode } from './option-types.js';

/**
 * The default of every option of the library, in one place. At the top: `createLockManager`'s
 * options and the acquire calls' `waitMs`; then one group per call, keyed by its options' names.
 * Each option's documentation names the entry it defaults to.
 */
export const DEFAULTS = deepFreeze({
  staleAfterMs: 600_000,
  /**
   * How long past the end of its lease a leased grant turns stale (src/sql/decision.ts, STALE_AT_SQL):
   * room for a renewal sent near the end to land. Not an option: the reaper, every manager's heal
   * and sweep, and every holder's renewals must agree on it, in every process.
   */
  leaseGraceMs: 1_000,
  waitMs: 30_000,
  backoffMinMs: 2,
  backoffMaxMs: 100,
  writerIntentMs: 1_000,
  deadlockRetries: 5,
  resolveTimeoutMs: 30_000,
  procedures: 'auto' as ProceduresMode,
  sectionIdleTimeoutMs: 10_000,
  sectionHistory: true,
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
  /**
   * `campaign()`: the term's lease (renewed every third of it unless `renewEveryMs` says otherwise),
   * and how long `close()` waits for a leader callback whose term ended
   */
  campaign: { leaseMs: 15_000, stopTimeoutMs: 10_000 },
});

function deepFreeze<T extends object>(
  value: T,
): Readonly<{ [K in keyof T]: T[K] extends object ? Readonly<T[K]> : T[K] }> {
  for (const inner of Object.values(value)) if (typeof inner === 'object' && inner !== null) Object.freeze(inner);
  return Object.freeze(value);
}

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
   * never. docs/lost-replies.md gives the reasoning.
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

/** The resource whose write grant a maintenance sweep runs under (one sweep at a time, across processes). */
export const MAINTENANCE_RESOURCE = 'mysql-rwlock:maintenance';
