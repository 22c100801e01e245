import { query, type RawConnection } from './connection.js';
import { STATUS } from '../types.js';
import { LIMITS } from '../options.js';
import { DB_NOW } from './clock.js';
import { NO_HOLDER, NO_WRITER_INTENT } from './decision.js';

/**
 * Runs `work` in one READ COMMITTED transaction on `conn`: no gap locks on the ranges the purge
 * reads, so releases and acquires are never blocked by it beyond the rows it takes, and those it
 * takes `SKIP LOCKED` (see purgeBatch).
 */
async function inPurgeTransaction<T>(conn: RawConnection, work: () => Promise<T>): Promise<T> {
  await query(conn, 'SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
  await query(conn, 'START TRANSACTION');
  try {
    const result = await work();
    await query(conn, 'COMMIT');
    return result;
  } catch (err) {
    await query(conn, 'ROLLBACK').catch(() => undefined);
    throw err;
  }
}

/**
 * Deletes up to `limit` released grants created more than `retentionMs` ago, oldest first through
 * the (status, create_time) index, and only those released more than `floorMs` ago: settling a lost
 * reply reads the row (a lost commit's settle finds it released by its holder; a withdrawal's row
 * keeps a late acquire of its token from ever being granted), so no retention may delete it while a
 * settle can still need it (`LIMITS.purgeFloorMs`). `released_at` is never before `create_time`, so
 * the floor holds for the index range as well. Read first without locking, then each row taken
 * `FOR UPDATE SKIP LOCKED` and deleted by id: the purge never waits on a transaction in flight, and
 * a row one holds is left for a later purge. Returns how many rows it read (`selected`) and deleted,
 * and the resources of those it deleted.
 *
 * `floorMs` other than the limit exists for the test that shows what purging without it breaks.
 */
export async function purgeBatch(
  conn: RawConnection,
  retentionMs: number,
  limit: number,
  floorMs: number = LIMITS.purgeFloorMs,
): Promise<{ selected: number; deleted: number; resources: Buffer[] }> {
  const rows = await query<Array<{ id: string; resource_id: Buffer }>>(
    conn,
    `SELECT CAST(id AS CHAR) AS id, resource_id FROM t_lock_log
      WHERE status = ${STATUS.released} AND create_time < ${DB_NOW} - INTERVAL ? MICROSECOND
        AND released_at < ${DB_NOW} - INTERVAL ? MICROSECOND
      ORDER BY status, create_time LIMIT ?`,
    [retentionMs * 1000, floorMs * 1000, limit],
  );
  if (rows.length === 0) return { selected: 0, deleted: 0, resources: [] };
  const taken = await inPurgeTransaction(conn, async () => {
    const ids = await query<Array<{ id: string; resource_id: Buffer }>>(
      conn,
      `SELECT CAST(id AS CHAR) AS id, resource_id FROM t_lock_log
        WHERE id IN (?) AND status = ${STATUS.released} FOR UPDATE SKIP LOCKED`,
      [rows.map((r) => BigInt(r.id))],
    );
    if (ids.length > 0) await query(conn, 'DELETE FROM t_lock_log WHERE id IN (?)', [ids.map((r) => BigInt(r.id))]);
    return ids;
  });
  const resources = new Map(taken.map((r) => [r.resource_id.toString('hex'), r.resource_id]));
  return { selected: rows.length, deleted: taken.length, resources: [...resources.values()] };
}

/**
 * Deletes the rows of `resources` that nothing refers to any more: no grant held or waited for
 * (counts 0, no writer's intent running) and no grant left in the log, so that resources used once
 * (a node-cron fire's key, an id per request) do not grow `t_read_write_lock` without bound. The
 * idle rows are taken `FOR UPDATE SKIP LOCKED`: a row that a section, a group's or a fence's
 * transaction, a heal or a repair holds is left, never waited for, and goes with the purge of that
 * id's later grants. Safe beside acquires: one that locked the row first has raised its count (or
 * still holds the row, and it is skipped); one that comes after finds no row and creates it, as on
 * first use. Whether the log still has a grant of the id is a plain read (the rows of the log are
 * not locked). Returns how many rows it deleted.
 */
export async function purgeIdleResources(conn: RawConnection, resources: Buffer[]): Promise<number> {
  if (resources.length === 0) return 0;
  const deleted = await inPurgeTransaction(conn, async () => {
    const idle = await query<Array<{ resource_id: Buffer }>>(
      conn,
      `SELECT resource_id FROM t_read_write_lock
        WHERE resource_id IN (?) AND ${NO_HOLDER} AND ${NO_WRITER_INTENT}
        FOR UPDATE SKIP LOCKED`,
      [resources],
    );
    if (idle.length === 0) return 0;
    const logged = await query<Array<{ resource_id: Buffer }>>(
      conn,
      'SELECT DISTINCT resource_id FROM t_lock_log WHERE resource_id IN (?)',
      [idle.map((r) => r.resource_id)],
    );
    const inLog = new Set(logged.map((r) => r.resource_id.toString('hex')));
    const unused = idle.filter((r) => !inLog.has(r.resource_id.toString('hex'))).map((r) => r.resource_id);
    if (unused.length === 0) return 0;
    return (
      await query<{ affectedRows: number }>(conn, 'DELETE FROM t_read_write_lock WHERE resource_id IN (?)', [unused])
    ).affectedRows;
  });
  await purgeIdleGates(conn, resources);
  return deleted;
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
 * Deletes up to `limit` release notes older than `retentionMs` through their time index, each taken
 * `FOR UPDATE SKIP LOCKED` first (a note in a transaction in flight is left for a later purge).
 * Returns how many it read, which the caller compares with `limit`. A note outlives its grant's log
 * row by at most the grant's hold time (the log is purged by grant time).
 */
export async function purgeNotesBatch(conn: RawConnection, retentionMs: number, limit: number): Promise<number> {
  return inPurgeTransaction(conn, async () => {
    const notes = await query<Array<{ grant_id: string }>>(
      conn,
      `SELECT CAST(grant_id AS CHAR) AS grant_id FROM t_lock_release_note
        WHERE released_at < ${DB_NOW} - INTERVAL ? MICROSECOND ORDER BY released_at LIMIT ? FOR UPDATE SKIP LOCKED`,
      [retentionMs * 1000, limit],
    );
    if (notes.length > 0)
      await query(conn, 'DELETE FROM t_lock_release_note WHERE grant_id IN (?)', [
        notes.map((n) => BigInt(n.grant_id)),
      ]);
    return notes.length;
  });
}
