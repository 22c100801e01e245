import { hex, query, type RawConnection } from './connection.js';
import { LOCK_TYPE, STATUS } from '../types.js';
import type { GrantRef } from './release.js';
import { DB_ROW_NOW } from './clock.js';
import { gateNowait, isMariadb, takeNowait } from './acquire.js';

// mode_changed_at is DB_ROW_NOW, the time the row is changed, not DB_NOW, the time the statement
// began: the statement may first wait for the resource row's lock (a one-commit section holds it
// until its commit), and the history must not date a write phase before the lock was had.

/**
 * Turns a live write grant into a read grant in place, in one statement: the grant row changes
 * its type and the resource gives up its writer for one reader, both or neither, so no writer can
 * get in between. True when the grant was a live write grant and now is a read grant.
 * It clears `permit_limit`, as the read guard does: the write guard leaves the limit a resource's
 * last semaphore wrote, and a reader on a row with a limit would count as a permit of it (a permit
 * granted beside the reader, a reader refused as of another kind; the model's DOWNGRADE_KEEPS_LIMIT).
 */
export async function downgradeGrant(conn: RawConnection, grant: GrantRef): Promise<boolean> {
  const result = await query<{ affectedRows: number }>(
    conn,
    `UPDATE t_lock_log l JOIN t_read_write_lock r ON r.resource_id = l.resource_id
        SET l.lock_type = ${LOCK_TYPE.read}, l.mode_changed_at = ${DB_ROW_NOW}, l.version = l.version + 1,
            r.w_count = r.w_count - 1, r.r_count = r.r_count + 1, r.permit_limit = NULL,
            r.version = r.version + 1
      WHERE l.id = ? AND l.resource_id = UNHEX(?) AND l.lock_type = ${LOCK_TYPE.write} AND l.status = ${STATUS.live} AND l.token = UNHEX(?)`,
    [grant.id, hex(grant.resource), hex(grant.token)],
  );
  return result.affectedRows === 2;
}

/**
 * Turns a live read grant into a write grant in place, only while it is the resource's one
 * holder (no writer, one reader: this one) and no reading section runs. A reading section holds the
 * resource's gate shared and never counts itself in `r_count`, so the counts alone would let the
 * one durable reader become a writer beside it (the model's UPGRADE_NO_GATE control): the upgrade
 * takes the gate exclusively, without waiting, as a durable writer's acquire does, and a gate held by
 * anyone refuses it at once. True when it did; false at once otherwise.
 */
export async function upgradeGrant(conn: RawConnection, grant: GrantRef): Promise<boolean> {
  await query(conn, 'START TRANSACTION');
  try {
    const gate = await takeNowait(conn, gateNowait('write', await isMariadb(conn)), grant.resource);
    // A grant taken before migration 008 may have no gate row: no section can hold what does not exist.
    if (gate === 'busy') {
      await query(conn, 'ROLLBACK');
      return false;
    }
    const result = await query<{ affectedRows: number }>(
      conn,
      `UPDATE t_lock_log l JOIN t_read_write_lock r ON r.resource_id = l.resource_id
          SET l.lock_type = ${LOCK_TYPE.write}, l.mode_changed_at = ${DB_ROW_NOW}, l.version = l.version + 1,
              r.w_count = 1, r.r_count = 0, r.version = r.version + 1
        WHERE l.id = ? AND l.resource_id = UNHEX(?) AND l.lock_type = ${LOCK_TYPE.read} AND l.permits IS NULL AND l.status = ${STATUS.live} AND l.token = UNHEX(?)
          AND r.w_count = 0 AND r.r_count = 1`,
      [grant.id, hex(grant.resource), hex(grant.token)],
    );
    await query(conn, 'COMMIT');
    return result.affectedRows === 2;
  } catch (err) {
    await query(conn, 'ROLLBACK').catch(() => undefined);
    throw err;
  }
}
