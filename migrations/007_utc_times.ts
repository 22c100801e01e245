import type { Knex } from 'knex';
import { PROCEDURES as V6 } from './006_invoker_routines.js';
import { replaceProcedures } from './procedures.js';

/**
 * The clock every statement of the library writes and compares grant times with: the server's
 * UTC, which no session's `time_zone` and no daylight-saving change moves. Statements and routines
 * are built from this one constant (src/sql/clock.ts re-exports it; test/utc-clock.test.ts checks
 * that no other clock is left in them).
 */
export const DB_NOW = 'UTC_TIMESTAMP(6)';

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
 * matter. docs/operating.md says the same for operators.
 */
export const PROCEDURES: Readonly<Record<string, string>> = {
  rwlock_acquire: V6.rwlock_acquire!.replaceAll('NOW(6)', DB_NOW),
};
if (PROCEDURES.rwlock_acquire === V6.rwlock_acquire || PROCEDURES.rwlock_acquire!.includes('NOW('))
  throw new Error('migration 007: the acquire procedure text did not match');

/** The column default, in place (instant on both servers: only the table's metadata changes). */
export const STATEMENTS: readonly string[] = [
  `ALTER TABLE t_lock_log ALTER COLUMN create_time SET DEFAULT (${DB_NOW})`,
];

const NAME = '007_utc_times';
const TO_UTC = (column: string): string => `${column} = CONVERT_TZ(${column}, @@session.time_zone, '+00:00')`;

/** Every time column the schema has, by table: what the conversion shifts. */
export const TIME_COLUMNS: Readonly<Record<string, readonly string[]>> = {
  t_lock_log: ['create_time', 'lease_until', 'released_at', 'mode_changed_at'],
  t_read_write_lock: ['w_wait_until'],
  t_lock_release_note: ['released_at'],
};

/**
 * The conversion, each statement guarded by the absence of this migration's record; run in one
 * transaction that also writes the record (sql/schema.sql carries them the same way).
 */
export function conversion(migrationTable: string): readonly string[] {
  const notYet = `NOT EXISTS (SELECT 1 FROM ${migrationTable} WHERE name = '${NAME}')`;
  return Object.entries(TIME_COLUMNS).map(
    ([table, columns]) =>
      `UPDATE ${table} SET ${columns.map(TO_UTC).join(', ')} WHERE ${notYet} AND (${columns.map((c) => `${c} IS NOT NULL`).join(' OR ')})`,
  );
}

async function exists(knex: Knex, name: string): Promise<boolean> {
  const [rows] = (await knex.raw(
    "SELECT COUNT(*) AS n FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_TYPE = 'PROCEDURE' AND ROUTINE_NAME = ?",
    [name],
  )) as unknown as [Array<{ n: number | string }>];
  return Number(rows[0]?.n) > 0;
}

/** migrations/index.ts's MigrationOptions (not imported: the index imports this file). */
interface UpOptions {
  procedures: boolean;
  record?: { table: string; batch: number };
}

export async function up(knex: Knex, options: UpOptions = { procedures: true }): Promise<void> {
  // With `procedures: false` a routine an earlier migration left is still replaced, so it cannot keep
  // writing local times; none is created.
  const wanted: Record<string, string> = {};
  for (const [name, ddl] of Object.entries(PROCEDURES))
    if (options.procedures || (await exists(knex, name))) wanted[name] = ddl;
  await replaceProcedures(knex, wanted);
  for (const sql of STATEMENTS) await knex.raw(sql);
  // Converted once: migrate() passes where it records migrations. Without it (a direct call of
  // `up`) there is no record to tell a second run by, and the rows are left as they are.
  const record = options.record;
  if (record === undefined) return;
  await knex.transaction(async (trx) => {
    const [recorded] = (await trx.raw(`SELECT COUNT(*) AS n FROM ${record.table} WHERE name = ? FOR UPDATE`, [
      NAME,
    ])) as unknown as [Array<{ n: number | string }>];
    if (Number(recorded[0]?.n) > 0) return;
    for (const sql of conversion(record.table)) await trx.raw(sql);
    // migrate() then finds it recorded and does not record it again.
    await trx.raw(`INSERT INTO ${record.table} (name, batch, migration_time) VALUES (?, ?, CURRENT_TIMESTAMP)`, [
      NAME,
      record.batch,
    ]);
  });
}

/** Back to version 6's acquire and the local default. Rows stay in UTC: a reverse shift is the operator's call. */
export async function down(knex: Knex): Promise<void> {
  await replaceProcedures(knex, { rwlock_acquire: V6.rwlock_acquire! });
  await knex.raw('ALTER TABLE t_lock_log ALTER COLUMN create_time SET DEFAULT (CURRENT_TIMESTAMP(6))');
}
