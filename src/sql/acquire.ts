import { firstRow, query, type RawConnection } from '../connection.js';
import { LOCK_TYPE, type LockMode } from '../types.js';

/**
 * One acquire attempt: one round trip, one commit (procedure `rwlock_acquire`). The procedure
 * runs its own READ COMMITTED transaction: a conditional UPDATE of the resource row decides, the
 * row is inserted on first use, and the grant row is inserted only when the UPDATE changed a row.
 * A failed write attempt with `intentMs > 0` marks the row so new readers hold back for that long.
 * The owner travels as UTF-8 bytes and is converted on the server, whatever the connection's
 * character set and sql_mode. Returns the grant id, or null when the lock is held in a conflicting mode.
 */
export async function callAcquire(
  conn: RawConnection, resource: Buffer, mode: LockMode, owner: Buffer, token: Buffer, intentMs: number,
): Promise<number | null> {
  const result = await query(conn, 'CALL rwlock_acquire(?, ?, CONVERT(? USING utf8mb4), ?, ?)', [resource, LOCK_TYPE[mode], owner, token, intentMs]);
  const { id } = firstRow<{ id: number | string | null }>(result, 'rwlock_acquire');
  return id === null ? null : Number(id);
}
