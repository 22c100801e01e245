import type { AddedInPlace } from './conditional-ddl.js';
import { frozen } from './index.js';

/**
 * Version 3: `t_lock_log.mode_changed_at`, when a grant was downgraded from write to read (or
 * upgraded from read to write) in place. `lock_type` holds the mode it has now, so a grant's
 * history reads: the other mode from `create_time`, this one from `mode_changed_at`.
 *
 * Written as plain statements that add the column only when it is missing, so `up` stays
 * idempotent on MySQL (which has no ADD COLUMN IF NOT EXISTS) and sql/schema.sql can carry them.
 *
 * Its DDL is frozen in migrations/sql/003_mode_changes.ts; this module gives it the names it had.
 */
const m = frozen('003_mode_changes');
export const ADDS: AddedInPlace = m.ADDS[0]!;
export const { STATEMENTS, up, down } = m;
