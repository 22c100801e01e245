// DATETIME(6) as integer microseconds: mysql2 turns DATETIME into a JS Date, which keeps only
// milliseconds, and two grants a few microseconds apart must still be told apart.
export function micros(column: string): string {
  return `CAST(UNIX_TIMESTAMP(${column}) * 1000000 AS SIGNED)`;
}

/** Microseconds since the epoch, as an ISO-like string with all six digits, for messages. */
export function showMicros(us: number): string {
  const iso = new Date(Math.floor(us / 1000)).toISOString();
  return `${iso.slice(11, 23)}${String(us % 1000).padStart(3, '0')}`;
}
