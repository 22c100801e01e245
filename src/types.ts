/**
 * A grant's mode: `write` (exclusive), `read` (shared with readers), or `permit` (one of at most a
 * semaphore's limit of holders, `acquirePermit`/`withPermit`).
 */
export type LockMode = 'write' | 'read' | 'permit';

/** What every report of a grant says about it (inspect's holders, list, the reaper's result). */
export interface GrantSummary {
  /** The grant id (fencing token). */
  id: number;
  mode: LockMode;
  owner: string;
  createTime: Date;
  /** Age on the database clock (when it was read, or reaped). */
  ageMs: number;
}

/**
 * `t_lock_log.lock_type`. A permit grant is a reader of its resource row (`r_count`) that also
 * records how many permits it holds in `t_lock_log.permits` (migration 010), which is NULL for
 * read and write grants: the log's CHECK on `lock_type` stays as version 1 wrote it.
 */
export const LOCK_TYPE = Object.freeze({ write: 0, read: 1, permit: 1 } as const);

/**
 * `t_lock_log.status`. A grant is live (0) until it is released (2). A one-commit section's row is
 * 1 from its take until just before its commit, which makes it released (2): status 1 is never
 * committed, and only a READ UNCOMMITTED reader (the operator's view of sections in progress) sees it.
 */
export const STATUS = Object.freeze({ live: 0, sectionInProgress: 1, released: 2 } as const);

/**
 * `t_lock_log.released_by`. `withdrawn` marks the row an acquirer writes in place of a grant whose
 * reply it lost: the acquire then cannot commit, and the row was never a live grant. `section` marks
 * the row of a one-commit section (`{ section: true }`), written granted and released in the
 * section's own commit: it was never live outside that transaction.
 */
export const RELEASED_BY = Object.freeze({ holder: 1, reaper: 2, operator: 3, withdrawn: 4, section: 5 } as const);

/**
 * How a grant ended, in every report of it: `history()`'s `releasedBy`, `onLockLost`'s info, the
 * `mysql-rwlock:lost` channel and the `released_by` label of the lost-grants metric. `holder`: its
 * own release or fenced commit; `reaper`; `operator`: `forceRelease`; `withdrawn`: an acquire whose
 * reply was lost, settled as never granted; `unknown`: the row could not be read (purged, or the
 * database unreachable) or holds a value this version does not know.
 */
export type ReleasedBy = keyof typeof RELEASED_BY | 'unknown';

/** How a grant ended, or null while it is live. */
export type EndedBy = ReleasedBy | null;

const RELEASED_BY_NAME = new Map<number, ReleasedBy>(
  Object.entries(RELEASED_BY).map(([name, value]) => [value, name as ReleasedBy]),
);

/** The name of a `released_by` value: null for NULL (still live), `unknown` for a value no release writes. */
export function endedBy(releasedBy: number | string | null): EndedBy {
  return releasedBy === null ? null : (RELEASED_BY_NAME.get(Number(releasedBy)) ?? 'unknown');
}

/** Who can have released a grant its holder lost: the `ReleasedBy` values a lost grant is reported with. */
export const LOST_BY = Object.freeze(['reaper', 'operator', 'unknown'] as const);
export type LostBy = (typeof LOST_BY)[number];

/** The `released_by` of a grant found lost: `unknown` for anything but the reaper or an operator. */
export function lostBy(releasedBy: number | null): LostBy {
  const by = releasedBy === null ? null : endedBy(releasedBy);
  return by === 'reaper' || by === 'operator' ? by : 'unknown';
}

/** How a grant was lost, as `onLockLost` and the `mysql-rwlock:lost` channel are told. */
export interface LockLostInfo {
  /** Who released it, from the log (see {@link ReleasedBy}): `unknown` when the row could not be read (or was purged). */
  releasedBy: LostBy;
  /** What found out: the fence at commit, a lease extension, a release, or a downgrade/upgrade. */
  detectedBy: 'fence' | 'extend' | 'release' | 'mode-change';
}

/** A grant `reapStaleGrants` released. */
export interface ReapedGrant extends GrantSummary {
  resourceId: string;
}

/** What `reapStaleGrants` returns. */
export interface ReapResult {
  reaped: number;
  /** Grants skipped this round because their business transaction held the row (1205) or a deadlock persisted. */
  skipped: number;
  /** Grants that could not be reaped for another reason (for example counts that disagree with the log); see `problems`. */
  failed: number;
  problems: string[];
  grants: ReapedGrant[];
  durationMs: number;
}

/** A grant's mode from its log row: `permits` is `t_lock_log.permits` (NULL but for a permit grant). */
export function modeOf(lockType: number, permits: number | string | null | undefined = null): LockMode {
  if (lockType === LOCK_TYPE.write) return 'write';
  return permits === null || permits === undefined ? 'read' : 'permit';
}
