import { query, type RawConnection } from './connection.js';
import { RELEASED_BY, STATUS } from '../types.js';
import { RELEASE_SQL, RELEASED_ROWS, releaseParams, type GrantRef } from './release.js';

/**
 * Records, in the transaction that just released them, that the reaper released these grants
 * (`t_lock_release_note`, one row per grant, copied from the log rows it marked), and, for a
 * self-healing acquire, who healed them (`releaser`, UTF-8) and why (`reason`, UTF-8).
 */
export async function noteReleases(
  conn: RawConnection,
  ids: readonly bigint[],
  note?: { releaser: Buffer; reason: Buffer },
): Promise<void> {
  await query(
    conn,
    `INSERT INTO t_lock_release_note (grant_id, released_at, released_by, releaser, reason)
     SELECT id, released_at, released_by, CONVERT(? USING utf8mb4), CONVERT(? USING utf8mb4)
       FROM t_lock_log WHERE id IN (?) AND released_by = ${RELEASED_BY.reaper}`,
    [note?.releaser ?? Buffer.alloc(0), note?.reason ?? null, ids],
  );
}

/**
 * An operator's release: the guarded release statement and, only if it released the grant, a note
 * of who (`releaser`, UTF-8) and why (`reason`, UTF-8 or null), in one READ COMMITTED transaction.
 * True when this call released it; false (nothing written) when it was not live.
 */
export async function operatorRelease(
  conn: RawConnection,
  grant: GrantRef,
  releaser: Buffer,
  reason: Buffer | null,
): Promise<boolean> {
  await query(conn, 'SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
  await query(conn, 'START TRANSACTION');
  try {
    const result = await query<{ affectedRows: number }>(conn, RELEASE_SQL, releaseParams(grant, 'operator'));
    const released = result.affectedRows === RELEASED_ROWS;
    if (released) {
      await query(
        conn,
        `INSERT INTO t_lock_release_note (grant_id, released_at, released_by, releaser, reason)
         SELECT id, released_at, released_by, CONVERT(? USING utf8mb4), CONVERT(? USING utf8mb4)
           FROM t_lock_log WHERE id = ? AND status = ${STATUS.released}`,
        [releaser, reason, grant.id],
      );
    }
    await query(conn, 'COMMIT');
    return released;
  } catch (err) {
    await query(conn, 'ROLLBACK').catch(() => undefined);
    throw err;
  }
}
