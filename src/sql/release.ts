import { firstRow, query, type RawConnection } from '../connection.js';
import { LOCK_TYPE, RELEASED_BY, type LockMode, type ReleasedBy } from '../types.js';

export interface GrantRef {
  id: number;
  resource: Buffer;
  mode: LockMode;
}

/**
 * Releases a grant (procedure `rwlock_release`): first a guarded UPDATE moves the log row out of
 * status 0/1, and only if that changed the row is the count given back, in the same transaction.
 * So a late release after a reap changes nothing. With `inTx` the procedure joins the caller's
 * open transaction (the fenced business commit) instead of running its own.
 */
export async function callRelease(
  conn: RawConnection, grant: GrantRef, by: ReleasedBy, inTx: boolean,
): Promise<{ released: boolean; connectionId: number }> {
  const result = await query(conn, 'CALL rwlock_release(?, ?, ?, ?, ?)', [
    grant.id, grant.resource, LOCK_TYPE[grant.mode], RELEASED_BY[by], inTx ? 1 : 0,
  ]);
  const row = firstRow<{ released: number | string; connection_id: number | string }>(result);
  return { released: Number(row.released) === 1, connectionId: Number(row.connection_id) };
}
