import { DB_NOW } from '../../migrations/007_utc_times.js';

/**
 * The database clock every statement uses: the server's UTC (its home is migration 007, whose
 * routine is built from it). Times are written and compared in UTC, so neither a session's
 * `time_zone` nor a daylight-saving change moves a grant's age.
 */
export { DB_NOW };

/**
 * The time a row is changed, in UTC, rather than the time its statement began (DB_NOW): for a
 * statement that may first wait for a row lock. The server has no UTC form of SYSDATE(), so this
 * adds the statement's own elapsed time (SYSDATE − NOW, both local, one session) to its UTC start:
 * wrong only if the zone's offset changes while that one statement waits.
 */
export const DB_ROW_NOW = `(${DB_NOW} + INTERVAL TIMESTAMPDIFF(MICROSECOND, NOW(6), SYSDATE(6)) MICROSECOND)`;

/**
 * A UTC DATETIME read as microseconds since the epoch, computed on the server: no driver
 * (mysql2's `timezone`, `dateStrings`) and no session zone stands between it and a Date.
 */
export function epochUs(column: string): string {
  return `TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', ${column})`;
}

/** The Date for an `epochUs` value (a number, or a string under `bigNumberStrings`); null stays null. */
export function utcDate(us: number | string): Date;
export function utcDate(us: number | string | null): Date | null;
export function utcDate(us: number | string | null): Date | null {
  return us === null ? null : new Date(Math.floor(Number(us) / 1000));
}
