/**
 * The database clock every statement and routine of the library writes and compares grant times
 * with: the server's UTC, which no session's `time_zone` and no daylight-saving change moves
 * (migration 007 moved every routine and statement to it; test/utc-clock.test.ts checks that no
 * other clock is left in them).
 */
export const DB_NOW = 'UTC_TIMESTAMP(6)';

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
