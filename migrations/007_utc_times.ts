import { frozen, ROW_CONVERSIONS } from './index.js';

/**
 * Version 7: grant times in UTC.
 *
 * Until version 6 every time was `NOW(6)`, the session's local time, so a pool whose sessions ran
 * at another `time_zone` than the reaper's, or a server whose zone observes daylight saving time
 * (the default `time_zone=SYSTEM`), moved every grant's age by hours: fresh grants reaped, a
 * crashed holder's grant kept, writer intent left in the readers' future, and at spring-forward
 * every live grant reaped. From this version every time the library writes or compares is
 * `UTC_TIMESTAMP(6)`.
 *
 * - `rwlock_acquire` keeps version 6's body, parameters and `SQL SECURITY INVOKER`, with every
 *   `NOW(6)` read as `UTC_TIMESTAMP(6)`. With `procedures: false` an `rwlock_acquire` that an
 *   earlier migrate() created is replaced too (where it exists): left as it was, it would go on
 *   writing local times for any manager that finds it.
 * - `t_lock_log.create_time` defaults to `UTC_TIMESTAMP(6)` (no statement of the library relies on
 *   the default; an application's own insert then writes the same clock).
 * - Existing rows are converted once, from the migrating session's `time_zone` to UTC, in one
 *   transaction with this migration's record in `rwlock_migrations` (so a repeated `up`, which
 *   migrate() runs to rebuild dropped objects, never shifts them twice): every time column, of live
 *   grants and of history alike — `t_lock_log.create_time`, `lease_until`, `released_at`,
 *   `mode_changed_at`, `t_read_write_lock.w_wait_until` and `t_lock_release_note.released_at` — as
 *   `CONVERT_TZ(t, @@session.time_zone, '+00:00')`. Each row is converted with the offset its zone
 *   had at that row's own local time, so on a server whose zone observes DST, rows written before
 *   a change are converted with the offset then in force, not today's. A local time in the hour
 *   that repeats when clocks go back is ambiguous: the server takes one of its two readings, so a
 *   row written in that hour may come out an hour off (a live grant then an hour older or younger;
 *   migrating outside that hour avoids it for live grants). A value that `CONVERT_TZ` cannot convert
 *   (outside the TIMESTAMP range, e.g. a lease planted to 2099) is left as it is. On a server whose
 *   sessions already run at UTC (`+00:00`, or SYSTEM on a UTC host) nothing changes.
 *
 * The rows must be written in the zone the migrating session runs at: run migrate() with the
 * `time_zone` the applications' sessions had (the server's default, unless they set their own).
 * During a rolling deploy, processes of an earlier release write and compare local times while
 * this release writes UTC: for as long as both run, ages are off by the zone's offset (an earlier
 * release's reaper on a zone ahead of UTC reaps fresh grants). Stop every process of an earlier
 * release (reapers first), migrate, then start this release; on a UTC server the order does not
 * matter. docs/clock.md says the same for operators.
 *
 * Its DDL is frozen in migrations/sql/007_utc_times.ts; this module gives it the names it had.
 */
/** The database clock, as this module exported it before its home moved to src/sql/clock.ts. */
export { DB_NOW } from '../src/sql/clock.js';

const m = frozen('007_utc_times');
export const { PROCEDURES, STATEMENTS, up, down } = m;

/** Every time column the schema has, by table: what the conversion shifts. */
export const TIME_COLUMNS: Readonly<Record<string, readonly string[]>> = {
  t_lock_log: ['create_time', 'lease_until', 'released_at', 'mode_changed_at'],
  t_read_write_lock: ['w_wait_until'],
  t_lock_release_note: ['released_at'],
};

/** The conversion, each statement guarded by the absence of this migration's record in `migrationTable`. */
export function conversion(migrationTable: string): readonly string[] {
  return ROW_CONVERSIONS(migrationTable).find((c) => c.name === m.name)!.statements;
}
