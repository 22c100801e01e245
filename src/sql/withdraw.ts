import { query, type RawConnection } from './connection.js';
import { commitIfLeftOpen } from './session.js';
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
 * The empty owner is a hex literal: MariaDB's `EMPTY_STRING_IS_NULL` reads `''` as NULL, which the
 * NOT NULL column refuses.
 */
export async function withdrawAcquire(
  conn: RawConnection,
  resource: Buffer,
  mode: LockMode,
  token: Buffer,
): Promise<void> {
  const reply = await query<{ serverStatus?: number }>(
    conn,
    `INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token, released_at, released_by)
     VALUES (?, ?, ${STATUS.released}, ${DB_NOW}, 1, CONVERT(X'' USING utf8mb4), ?, ${DB_NOW}, ${RELEASED_BY.withdrawn})`,
    [resource, LOCK_TYPE[mode], token],
  );
  // The withdrawal decides the attempt for good only once it is durable.
  await commitIfLeftOpen(conn, reply);
}
