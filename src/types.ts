export type LockMode = 'write' | 'read';

/** `t_lock_log.lock_type` */
export const LOCK_TYPE = Object.freeze({ write: 0, read: 1 } as const);

/** `t_lock_log.released_by` */
export const RELEASED_BY = Object.freeze({ holder: 1, reaper: 2, operator: 3 } as const);
export type ReleasedBy = keyof typeof RELEASED_BY;

/** `t_lock_log.status` */
export const STATUS = Object.freeze({ granted: 0, done: 1, released: 2 } as const);

export function modeOf(lockType: number): LockMode {
  return lockType === 0 ? 'write' : 'read';
}

export function releasedByName(code: number | null): ReleasedBy | null {
  if (code === 1) return 'holder';
  if (code === 2) return 'reaper';
  if (code === 3) return 'operator';
  return null;
}
