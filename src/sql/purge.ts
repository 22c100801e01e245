import { query, type RawConnection } from './connection.js';
import { STATUS } from '../types.js';
import { LIMITS } from '../options.js';

/**
 * Deletes up to `limit` released grants created more than `retentionMs` ago, oldest first through
 * the (status, create_time) index, and only those released more than `floorMs` ago: settling a lost
 * reply reads the row (a lost commit's settle finds it released by its holder; a withdrawal's row
 * keeps a late acquire of its token from ever being granted), so no retention may delete it while a
 * settle can still need it (`LIMITS.purgeFloorMs`). `released_at` is never before `create_time`, so
 * the floor holds for the index range as well. READ COMMITTED: no gap locks on the index range, so
 * releases and acquires are never blocked by a purge. Returns how many rows it deleted.
 *
 * `floorMs` other than the limit exists for the test that shows what purging without it breaks.
 */
export async function purgeBatch(
  conn: RawConnection,
  retentionMs: number,
  limit: number,
  floorMs: number = LIMITS.purgeFloorMs,
): Promise<number> {
  await query(conn, 'SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
  const result = await query<{ affectedRows: number }>(
    conn,
    `DELETE FROM t_lock_log WHERE status = ${STATUS.released} AND create_time < NOW(6) - INTERVAL ? MICROSECOND
      AND released_at < NOW(6) - INTERVAL ? MICROSECOND
      ORDER BY status, create_time LIMIT ?`,
    [retentionMs * 1000, floorMs * 1000, limit],
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
    'DELETE FROM t_lock_release_note WHERE released_at < NOW(6) - INTERVAL ? MICROSECOND ORDER BY released_at LIMIT ?',
    [retentionMs * 1000, limit],
  );
  return result.affectedRows;
}
