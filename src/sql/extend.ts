import { hex, query, type RawConnection } from './connection.js';
import { STATUS } from '../types.js';
import { DB_NOW } from './clock.js';

/**
 * Extends a live grant's lease to `ms` from now on the database clock. Bumping `version` also
 * makes a reaper that read the grant before the extension skip it (its optimistic check fails).
 * Returns false when the grant is no longer live. Named by id and token, as every statement on a grant.
 */
export async function extendLease(conn: RawConnection, grantId: number, token: Buffer, ms: number): Promise<boolean> {
  const result = await query<{ affectedRows: number }>(
    conn,
    `UPDATE t_lock_log SET lease_until = ${DB_NOW} + INTERVAL ? MICROSECOND, version = version + 1
      WHERE id = ? AND status = ${STATUS.live} AND token = UNHEX(?)`,
    [ms * 1000, grantId, hex(token)],
  );
  return result.affectedRows === 1;
}
