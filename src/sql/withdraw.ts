import { query, type RawConnection } from './connection.js';
import { LOCK_TYPE, RELEASED_BY, STATUS, type LockMode } from '../types.js';
import { DB_NOW } from './clock.js';

/**
 * Settles an acquire whose reply was lost, without needing to see the server thread that ran it:
 * inserts a released row under the attempt's token (a UNIQUE key) in its place.
 * - The insert succeeds: the acquire had not written its grant row, and when it tries, its insert
 *   fails on the duplicate token and its whole transaction rolls back. It was not granted.
 * - The insert fails with a duplicate key (1062, thrown to the caller): the acquire's grant row
 *   exists and is committed, since the duplicate-key check waits for the transaction that wrote it.
 * - It waits on that row lock while the acquire is still running: a lock wait timeout (1205).
 */
export async function withdrawAcquire(
  conn: RawConnection,
  resource: Buffer,
  mode: LockMode,
  token: Buffer,
): Promise<void> {
  await query(
    conn,
    `INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token, released_at, released_by)
     VALUES (?, ?, ${STATUS.released}, ${DB_NOW}, 1, '', ?, ${DB_NOW}, ${RELEASED_BY.withdrawn})`,
    [resource, LOCK_TYPE[mode], token],
  );
}
