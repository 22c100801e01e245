export type LockMode = 'write' | 'read';

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

/** `t_lock_log.lock_type` */
export const LOCK_TYPE = Object.freeze({ write: 0, read: 1 } as const);

/**
 * `t_lock_log.status`. A grant is live (0) until it is released (2). Status 1 is reserved by the
 * schema's CHECK constraint from its first version and never written.
 */
export const STATUS = Object.freeze({ live: 0, released: 2 } as const);

/**
 * `t_lock_log.released_by`. `withdrawn` marks the row an acquirer writes in place of a grant whose
 * reply it lost: the acquire then cannot commit, and the row was never a live grant.
 */
export const RELEASED_BY = Object.freeze({ holder: 1, reaper: 2, operator: 3, withdrawn: 4 } as const);
export type ReleasedBy = keyof typeof RELEASED_BY;

/** How a grant ended, or null while it is live. */
export type EndedBy = ReleasedBy | null;

const RELEASED_BY_NAME = new Map<number, ReleasedBy>(Object.entries(RELEASED_BY).map(([name, value]) => [value, name as ReleasedBy]));

/** The name of a `released_by` value: null for NULL (still live) or a value no release writes. */
export function endedBy(releasedBy: number | string | null): EndedBy {
  return releasedBy === null ? null : (RELEASED_BY_NAME.get(Number(releasedBy)) ?? null);
}

export function modeOf(lockType: number): LockMode {
  return lockType === LOCK_TYPE.write ? 'write' : 'read';
}
