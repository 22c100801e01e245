import { query, type RawConnection } from './connection.js';
import { STATUS } from '../types.js';
import { DB_NOW } from './clock.js';

/**
 * Deletes up to `limit` released grants created more than `retentionMs` ago, oldest first through
 * the (status, create_time) index. READ COMMITTED: no gap locks on the index range, so releases and
 * acquires are never blocked by a purge. Returns how many rows it deleted.
 */
export async function purgeBatch(conn: RawConnection, retentionMs: number, limit: number): Promise<number> {
  await query(conn, 'SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
  const result = await query<{ affectedRows: number }>(
    conn,
    `DELETE FROM t_lock_log WHERE status = ${STATUS.released} AND create_time < ${DB_NOW} - INTERVAL ? MICROSECOND
      ORDER BY status, create_time LIMIT ?`,
    [retentionMs * 1000, limit],
  );
  return result.affectedRows;
}

/**
 * Deletes up to `limit` release notes older than `retentionMs` through their time index. A note
 * outlives its grant's log row by at most the grant's hold time (the log is purged by grant time).
 */
export async function purgeNotesBatch(conn: RawConnection, retentionMs: number, limit: number): Promise<number> {
  const result = await query<{ affectedRows: number }>(
    conn,
    `DELETE FROM t_lock_release_note WHERE released_at < ${DB_NOW} - INTERVAL ? MICROSECOND ORDER BY released_at LIMIT ?`,
    [retentionMs * 1000, limit],
  );
  return result.affectedRows;
}
