import { frozen } from './index.js';

/**
 * Version 4: `t_lock_release_note`, one row per grant released by someone other than its holder
 * (the reaper, an operator): when, by whom (the releasing manager's owner) and why (an operator's
 * reason). It is a table of its own, indexed by release time, rather than columns of `t_lock_log`,
 * so that ordinary grants pay nothing for it (no wider row, no extra index entry per grant) while
 * `stats()` can count the last hour's reaper and operator releases through an index: the log has
 * no index on release time, and a reaped grant's create_time says nothing about when it was reaped.
 * Written in the same transaction as the release it describes.
 *
 * Its DDL is frozen in migrations/sql/004_release_notes.ts; this module gives it the names it had.
 */
export const { TABLES, INDEXES, up, down } = frozen('004_release_notes');
