import { query, type RawConnection } from './connection.js';
import { LockInvariantError } from '../errors.js';
import { LOCK_TYPE, RELEASED_BY, STATUS, modeOf, type ReapedGrant } from '../types.js';
import { noteReleases } from './release-note.js';
import { DB_NOW, epochUs, utcDate } from './clock.js';
import { STALE_SQL } from './decision.js';
import { isLockedNowait } from './acquire.js';

/** A stale grant as first read. The id is exact (a bigint): an id past 2^53 is not a JS number. */
export interface Candidate {
  id: bigint;
  version: number;
}

/** The staleness test (its home is src/sql/decision.ts), re-exported for the reaper's readers. */
export { agedSql, STALE_AT_SQL, STALE_SQL } from './decision.js';

/**
 * Stale live grants, read without locking through the (status, create_time) index: its live part,
 * since a leased grant can be stale however young (the cost follows the number of live grants).
 */
export async function selectStale(
  conn: RawConnection,
  staleUs: number,
  limit: number,
  exclude: bigint[],
): Promise<Candidate[]> {
  const rows = await query<Array<{ id: string; version: number }>>(
    conn,
    `SELECT CAST(id AS CHAR) AS id, version FROM t_lock_log
      WHERE status = ${STATUS.live} AND ${STALE_SQL}
      ${exclude.length > 0 ? 'AND id NOT IN (?)' : ''}
      LIMIT ?`,
    exclude.length > 0 ? [staleUs, exclude, limit] : [staleUs, limit],
  );
  return rows.map((r) => ({ id: BigInt(r.id), version: Number(r.version) }));
}

interface LockedRow {
  id: string;
  resource_id: Buffer;
  lock_type: number;
  permits: number | string | null;
  version: number;
  owner: string;
  create_us: number | string;
  age_us: number | string;
}

/**
 * How a reap runs. The reaper waits for busy rows (up to its lock wait timeout) and notes its
 * releases with no releaser. A self-healing acquire (src/lock/heal.ts) takes every row NOWAIT, so
 * that it never waits on another transaction, and notes who healed and why.
 */
export interface ReapHow {
  /** A row another transaction holds ends the reap at once, nothing released: `busy`. */
  nowait?: boolean;
  /** The note's releaser (UTF-8) and reason (UTF-8). */
  note?: { releaser: Buffer; reason: Buffer };
  /** @internal The staleness test in place of STALE_SQL (one parameter, the cutoff): tests' negative controls only. */
  staleSql?: string;
}

/** What a reap taken NOWAIT answers when a row was held by another transaction: nothing was released. */
export const BUSY = 'busy';

/**
 * Reaps candidates in one READ COMMITTED transaction: locks their log rows in id order, keeps those
 * still live, stale and at the version the candidate read saw (optimistic check), moves them to
 * released and gives each resource its counts back in one statement. A row locked by a business
 * transaction that is committing makes this fail with 1205 after the session's lock wait timeout,
 * or, taken NOWAIT, answer BUSY at once.
 */
export async function reapCandidates(
  conn: RawConnection,
  candidates: Candidate[],
  staleUs: number,
): Promise<ReapedGrant[]>;
export async function reapCandidates(
  conn: RawConnection,
  candidates: Candidate[],
  staleUs: number,
  how: ReapHow,
): Promise<ReapedGrant[] | typeof BUSY>;
export async function reapCandidates(
  conn: RawConnection,
  candidates: Candidate[],
  staleUs: number,
  how: ReapHow = {},
): Promise<ReapedGrant[] | typeof BUSY> {
  const expected = new Map(candidates.map((c) => [c.id, c.version]));
  const nowait = how.nowait === true ? ' NOWAIT' : '';
  await query(conn, 'SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
  await query(conn, 'START TRANSACTION');
  try {
    const rows = await query<LockedRow[]>(
      conn,
      `SELECT CAST(id AS CHAR) AS id, resource_id, lock_type, permits, version, owner, ${epochUs('create_time')} AS create_us,
              TIMESTAMPDIFF(MICROSECOND, create_time, ${DB_NOW}) AS age_us
         FROM t_lock_log
        WHERE id IN (?) AND status = ${STATUS.live} AND ${how.staleSql ?? STALE_SQL}
        ORDER BY id FOR UPDATE${nowait}`,
      [[...expected.keys()], staleUs],
    );
    const live = rows.filter((r) => expected.get(BigInt(r.id)) === Number(r.version));
    if (live.length > 0) {
      const marked = await query<{ affectedRows: number }>(
        conn,
        `UPDATE t_lock_log SET status = ${STATUS.released}, version = version + 1, released_at = ${DB_NOW}, released_by = ${RELEASED_BY.reaper}
          WHERE id IN (?) AND status = ${STATUS.live}`,
        [live.map((r) => BigInt(r.id))],
      );
      if (marked.affectedRows !== live.length)
        throw new LockInvariantError(`reaper marked ${marked.affectedRows} of ${live.length} locked grants`);
      await noteReleases(
        conn,
        live.map((r) => BigInt(r.id)),
        how.note,
      );
      if (nowait !== '')
        // The lock rows too, before the counts' UPDATE would wait for them.
        await query(conn, `SELECT 1 FROM t_read_write_lock WHERE resource_id IN (?) FOR UPDATE NOWAIT`, [
          [...new Map(live.map((r) => [r.resource_id.toString('hex'), r.resource_id])).values()],
        ]);
      await giveCountsBack(conn, live);
    }
    await query(conn, 'COMMIT');
    // The report's id is a number, as everywhere in the API: past 2^53 it is the nearest one
    // (acquire refuses such a grant; one is live only if that refusal could not release it).
    return live.map((r) => ({
      id: Number(r.id),
      resourceId: r.resource_id.toString('utf8'),
      mode: modeOf(r.lock_type, r.permits),
      owner: r.owner,
      createTime: utcDate(r.create_us),
      ageMs: Number(r.age_us) / 1000,
    }));
  } catch (err) {
    await query(conn, 'ROLLBACK').catch(() => undefined);
    if (nowait !== '' && isLockedNowait(err)) return BUSY;
    throw err;
  }
}

/**
 * Gives each resource its counts back: one primary-key IN-list UPDATE per (w, r) decrement that
 * occurs in the batch — in practice one or two statements, since a resource rarely has more than
 * one stale grant — rather than a join against a derived table, which costs the server far more to
 * parse and plan for a batch of hundreds.
 */
async function giveCountsBack(conn: RawConnection, live: LockedRow[]): Promise<void> {
  const perResource = new Map<string, { resource: Buffer; w: number; r: number }>();
  for (const row of live) {
    const key = row.resource_id.toString('hex');
    const entry = perResource.get(key) ?? { resource: row.resource_id, w: 0, r: 0 };
    if (row.lock_type === LOCK_TYPE.write) entry.w += 1;
    else entry.r += row.permits === null ? 1 : Number(row.permits); // a permit grant holds `permits`
    perResource.set(key, entry);
  }
  const byDecrement = new Map<string, { w: number; r: number; resources: Buffer[] }>();
  for (const e of perResource.values()) {
    const key = `${e.w}/${e.r}`;
    const group = byDecrement.get(key) ?? { w: e.w, r: e.r, resources: [] };
    group.resources.push(e.resource);
    byDecrement.set(key, group);
  }
  for (const g of byDecrement.values()) {
    const result = await query<{ affectedRows: number }>(
      conn,
      `UPDATE t_read_write_lock SET w_count = w_count - ?, r_count = r_count - ?, version = version + 1
        WHERE resource_id IN (?)`,
      [g.w, g.r, g.resources],
    );
    if (result.affectedRows !== g.resources.length) {
      throw new LockInvariantError(`reaper updated ${result.affectedRows} of ${g.resources.length} resource rows`);
    }
  }
}
