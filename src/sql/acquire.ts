import { firstRow, query, type RawConnection } from './connection.js';
import { LOCK_TYPE, STATUS, type LockMode } from '../types.js';
import { DB_NOW } from './clock.js';

/**
 * One acquire attempt: one round trip, one commit (procedure `rwlock_acquire`). The procedure
 * runs its own READ COMMITTED transaction: a conditional UPDATE of the resource row decides, the
 * row is inserted on first use, and the grant row is inserted only when the UPDATE changed a row.
 * A failed write attempt with `intentMs > 0` marks the row so new readers hold back for that long.
 * The owner travels as UTF-8 bytes and is converted on the server, whatever the connection's
 * character set and sql_mode. Returns the grant id, or null when the lock is held in a conflicting mode.
 */
export async function callAcquire(
  conn: RawConnection,
  resource: Buffer,
  mode: LockMode,
  owner: Buffer,
  token: Buffer,
  intentMs: number,
): Promise<number | null> {
  const result = await query(conn, 'CALL rwlock_acquire(?, ?, CONVERT(? USING utf8mb4), ?, ?)', [
    resource,
    LOCK_TYPE[mode],
    owner,
    token,
    intentMs,
  ]);
  const { id } = firstRow<{ id: number | string | null }>(result, 'rwlock_acquire');
  return id === null ? null : Number(id);
}

/*
 * The same decision as plain statements, for databases without stored routines. The procedure's
 * body lives in an applied migration and cannot change; these statements must decide exactly as it
 * does (test/procedures.test.ts runs the exclusion check on both paths).
 */
const GUARDED_UPDATE: Readonly<Record<LockMode, string>> = {
  write: `UPDATE t_read_write_lock SET w_count = 1, w_wait_until = NULL, version = version + 1
 WHERE resource_id = ? AND w_count = 0 AND r_count = 0`,
  read: `UPDATE t_read_write_lock SET r_count = r_count + 1, version = version + 1
 WHERE resource_id = ? AND w_count = 0 AND (w_wait_until IS NULL OR w_wait_until < ${DB_NOW})`,
};
/** First use of a resource: the row is created already holding the lock. IGNORE: 0 rows when it exists. */
const FIRST_USE = 'INSERT IGNORE INTO t_read_write_lock (resource_id, w_count, r_count, version) VALUES (?, ?, ?, 1)';
/** Marks a waiting writer: new readers hold back for `intentMs` (parameters: µs, resource, µs / 2). */
export const WRITER_INTENT = `UPDATE t_read_write_lock
   SET w_wait_until = ${DB_NOW} + INTERVAL ? MICROSECOND, version = version + 1
 WHERE resource_id = ? AND (w_wait_until IS NULL OR w_wait_until < ${DB_NOW} + INTERVAL ? MICROSECOND)`;
const LOG_GRANT = `INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token)
VALUES (?, ?, ${STATUS.live}, ${DB_NOW}, 0, CONVERT(? USING utf8mb4), ?)`;

/**
 * One acquire attempt as plain statements in one transaction: five round trips and one commit when
 * granted; a refused attempt also tries the first-use insert and decides again. The guarded UPDATE
 * is a locking read, so it decides on the latest committed row. Every changed row also changes
 * `version`, so the counts read the same with and without CLIENT_FOUND_ROWS.
 */
export async function acquireWithStatements(
  conn: RawConnection,
  resource: Buffer,
  mode: LockMode,
  owner: Buffer,
  token: Buffer,
  intentMs: number,
): Promise<number | null> {
  // READ COMMITTED, as in the procedure: the UPDATE of a resource not yet used would otherwise take
  // a gap lock, and first users of neighbouring new ids would deadlock on each other's inserts.
  await query(conn, 'SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
  await query(conn, 'START TRANSACTION');
  try {
    const guarded = async (): Promise<boolean> =>
      (await query<{ affectedRows: number }>(conn, GUARDED_UPDATE[mode], [resource])).affectedRows === 1;
    let granted = await guarded();
    if (!granted) {
      const write = mode === 'write' ? 1 : 0;
      granted =
        (await query<{ affectedRows: number }>(conn, FIRST_USE, [resource, write, 1 - write])).affectedRows === 1;
      // The row exists, and may have been committed by another first user only since the UPDATE
      // above looked: decide on it again, as the procedure does.
      if (!granted) granted = await guarded();
    }
    let id: number | null = null;
    if (granted) {
      id = Number(
        (await query<{ insertId: number | string }>(conn, LOG_GRANT, [resource, LOCK_TYPE[mode], owner, token]))
          .insertId,
      );
    } else if (mode === 'write' && intentMs > 0) {
      await query(conn, WRITER_INTENT, [intentMs * 1000, resource, intentMs * 500]);
    }
    await query(conn, 'COMMIT');
    return id;
  } catch (err) {
    // A dead connection rolls back on the server; on a live one, end the transaction before the
    // connection goes back to the pool.
    await query(conn, 'ROLLBACK').catch(() => undefined);
    throw err;
  }
}
