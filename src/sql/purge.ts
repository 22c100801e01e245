import { query, type RawConnection } from './connection.js';
import { STATUS } from '../types.js';
import { LIMITS } from '../options.js';
import { DB_NOW } from './clock.js';

/**
 * Deletes up to `limit` released grants created more than `retentionMs` ago, oldest first through
 * the (status, create_time) index, and only those released more than `floorMs` ago: settling a lost
 * reply reads the row (a lost commit's settle finds it released by its holder; a withdrawal's row
 * keeps a late acquire of its token from ever being granted), so no retention may delete it while a
 * settle can still need it (`LIMITS.purgeFloorMs`). `released_at` is never before `create_time`, so
 * the floor holds for the index range as well. Read first without locking, then deleted by id (a
 * released row never changes again). READ COMMITTED: no gap locks on the index range, so releases
 * and acquires are never blocked by a purge. Returns how many rows it deleted, and their resources.
 *
 * `floorMs` other than the limit exists for the test that shows what purging without it breaks.
 */
export async function purgeBatch(
  conn: RawConnection,
  retentionMs: number,
  limit: number,
  floorMs: number = LIMITS.purgeFloorMs,
): Promise<{ deleted: number; resources: Buffer[] }> {
  const rows = await query<Array<{ id: string; resource_id: Buffer }>>(
    conn,
    `SELECT CAST(id AS CHAR) AS id, resource_id FROM t_lock_log
      WHERE status = ${STATUS.released} AND create_time < ${DB_NOW} - INTERVAL ? MICROSECOND
        AND released_at < ${DB_NOW} - INTERVAL ? MICROSECOND
      ORDER BY status, create_time LIMIT ?`,
    [retentionMs * 1000, floorMs * 1000, limit],
  );
  if (rows.length === 0) return { deleted: 0, resources: [] };
  await query(conn, 'SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
  const result = await query<{ affectedRows: number }>(
    conn,
    `DELETE FROM t_lock_log WHERE id IN (?) AND status = ${STATUS.released}`,
    [rows.map((r) => BigInt(r.id))],
  );
  const resources = new Map(rows.map((r) => [r.resource_id.toString('hex'), r.resource_id]));
  return { deleted: result.affectedRows, resources: [...resources.values()] };
}

/**
 * Deletes the rows of `resources` that nothing refers to any more: no grant held or waited for
 * (counts 0, no writer's intent running) and no grant left in the log, so that resources used once
 * (a node-cron fire's key, an id per request) do not grow `t_read_write_lock` without bound. Safe
 * beside acquires: an acquire that locked the row first has raised its count, which the delete
 * re-reads after waiting for the row; one that comes after finds no row and creates it, as on first
 * use. READ COMMITTED, as the purge of the log. Returns how many rows it deleted.
 */
export async function purgeIdleResources(conn: RawConnection, resources: Buffer[]): Promise<number> {
  if (resources.length === 0) return 0;
  await query(conn, 'SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
  const result = await query<{ affectedRows: number }>(
    conn,
    `DELETE FROM t_read_write_lock
      WHERE resource_id IN (?) AND w_count = 0 AND r_count = 0 AND (w_wait_until IS NULL OR w_wait_until < ${DB_NOW})
        AND NOT EXISTS (SELECT 1 FROM t_lock_log l WHERE l.resource_id = t_read_write_lock.resource_id)`,
    [resources],
  );
  await purgeIdleGates(conn, resources);
  return result.affectedRows;
}

/**
 * Deletes the gates (`t_lock_gate`) of `resources` that have no lock row any more, so one-use ids
 * leave no gate row behind either. A gate row that no transaction holds means what a missing one
 * means: the next acquire or section creates it and holds it exclusively until its commit, as on
 * first use. The gates are taken `FOR UPDATE SKIP LOCKED` first, so the purge never waits on a
 * section: one that a section or an acquire holds stays, and goes with the purge of that id's later
 * grants. Between that take and the commit, a `NOWAIT` acquire of the same id is refused as if the
 * gate were held (api.md, rule 1). `skipLocked: false` exists for the test that shows the wait.
 */
export async function purgeIdleGates(conn: RawConnection, resources: Buffer[], skipLocked = true): Promise<number> {
  const idle = await query<Array<{ resource_id: Buffer }>>(
    conn,
    `SELECT g.resource_id FROM t_lock_gate g LEFT JOIN t_read_write_lock r ON r.resource_id = g.resource_id
      WHERE g.resource_id IN (?) AND r.resource_id IS NULL`,
    [resources],
  );
  if (idle.length === 0) return 0;
  await query(conn, 'SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
  await query(conn, 'START TRANSACTION');
  try {
    const taken = await query<Array<{ resource_id: Buffer }>>(
      conn,
      `SELECT resource_id FROM t_lock_gate WHERE resource_id IN (?) FOR UPDATE${skipLocked ? ' SKIP LOCKED' : ''}`,
      [idle.map((r) => r.resource_id)],
    );
    let deleted = 0;
    if (taken.length > 0) {
      const ids = taken.map((r) => r.resource_id);
      deleted = (await query<{ affectedRows: number }>(conn, 'DELETE FROM t_lock_gate WHERE resource_id IN (?)', [ids]))
        .affectedRows;
    }
    await query(conn, 'COMMIT');
    return deleted;
  } catch (err) {
    await query(conn, 'ROLLBACK').catch(() => undefined);
    throw err;
  }
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
