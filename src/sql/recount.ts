import { query, type RawConnection } from './connection.js';
import { LOCK_TYPE, STATUS } from '../types.js';

/** A resource whose counts in `t_read_write_lock` are not the live grants of the log. */
export interface CountDisagreement {
  resourceId: string;
  /** The counts in the resource row; 0 when the row is missing. */
  wCount: number;
  rCount: number;
  /** Live grants of the resource in the grant log, by mode; `liveReads` counts a permit grant's permits. */
  liveWrites: number;
  liveReads: number;
  /** No resource row although grants are live: a first acquire would insert one and be granted beside them. */
  rowMissing: boolean;
}

/** Live grants by resource, read from the (status, create_time) index: the cost follows the live grants only. */
const liveByResource = (
  range: string,
): string => `SELECT resource_id, SUM(lock_type = ${LOCK_TYPE.write}) AS w, SUM(IF(lock_type = ${LOCK_TYPE.read}, COALESCE(permits, 1), 0)) AS r
       FROM t_lock_log WHERE status = ${STATUS.live}${range} GROUP BY resource_id`;

/** Resource rows read per statement: each statement is one short consistent read, never one of the whole table. */
export const PAGE_ROWS = 100_000;

/** The last resource id of the page after `?` (NULL past the end), from the primary key alone. */
const PAGE_END =
  'SELECT MAX(resource_id) AS last FROM (SELECT resource_id FROM t_read_write_lock WHERE resource_id > ? ORDER BY resource_id LIMIT ?) p';

/**
 * The disagreements among the resources of one page (ids in (?, ?]), in one statement: a
 * consistent read of those rows and their live grants. An acquire, release, reap or mode change
 * writes a resource row and its grant rows in one transaction, so a snapshot never shows one half of
 * it, and each resource is judged exactly.
 */
export const PAGE_DISAGREEMENTS = `SELECT r.resource_id, r.w_count, r.r_count, COALESCE(g.w, 0) AS live_w, COALESCE(g.r, 0) AS live_r, 0 AS row_missing
       FROM t_read_write_lock r LEFT JOIN (${liveByResource(' AND resource_id > ? AND resource_id <= ?')}) g ON g.resource_id = r.resource_id
      WHERE r.resource_id > ? AND r.resource_id <= ? AND (r.w_count <> COALESCE(g.w, 0) OR r.r_count <> COALESCE(g.r, 0))
      ORDER BY r.resource_id`;

/** Live grants whose resource row is missing, by resource id. */
export const MISSING_ROWS = `SELECT g.resource_id, 0 AS w_count, 0 AS r_count, g.w AS live_w, g.r AS live_r, 1 AS row_missing
       FROM (${liveByResource('')}) g LEFT JOIN t_read_write_lock r ON r.resource_id = g.resource_id
      WHERE r.resource_id IS NULL ORDER BY g.resource_id LIMIT ?`;

interface DisagreementRow {
  resource_id: Buffer;
  w_count: number | string;
  r_count: number | string;
  live_w: number | string;
  live_r: number | string;
  row_missing: number | string;
}

function disagreement(r: DisagreementRow): CountDisagreement {
  return {
    resourceId: r.resource_id.toString('utf8'),
    wCount: Number(r.w_count),
    rCount: Number(r.r_count),
    liveWrites: Number(r.live_w),
    liveReads: Number(r.live_r),
    rowMissing: Number(r.row_missing) === 1,
  };
}

/**
 * Up to `limit + 1` disagreements, by resource id (the extra one says there are more), each with
 * the resource's bytes as stored, which a repair must name (an id written by hand need not be UTF-8).
 * The resource table is read a page at a time, by primary key, until more than `limit` are found.
 */
export async function findDisagreements(
  conn: RawConnection,
  limit: number,
  pageRows = PAGE_ROWS,
): Promise<Array<{ resource: Buffer; found: CountDisagreement }>> {
  const rows = await query<DisagreementRow[]>(conn, MISSING_ROWS, [limit + 1]);
  let after: Buffer = Buffer.alloc(0);
  let exhausted = false;
  const inPages: DisagreementRow[] = [];
  while (inPages.length <= limit) {
    const [{ last } = { last: null }] = await query<Array<{ last: Buffer | null }>>(conn, PAGE_END, [after, pageRows]);
    if (last === null) {
      exhausted = true;
      break;
    }
    inPages.push(...(await query<DisagreementRow[]>(conn, PAGE_DISAGREEMENTS, [after, last, after, last])));
    after = last;
  }
  // A missing row past the pages read is left to the next call, which `more` announces.
  const merged = [...inPages, ...rows.filter((r) => exhausted || Buffer.compare(r.resource_id, after) <= 0)].sort(
    (a, b) => Buffer.compare(a.resource_id, b.resource_id),
  );
  return merged.slice(0, limit + 1).map((r) => ({ resource: r.resource_id, found: disagreement(r) }));
}

/** The resource row, locked: every change to the resource's live grants writes it too, so holding it holds them still. */
export const LOCK_RESOURCE_ROW = 'SELECT w_count, r_count FROM t_read_write_lock WHERE resource_id = ? FOR UPDATE';
/** The live grants of one resource, by mode (a non-locking read: see `recountResource`). */
export const COUNT_LIVE = `SELECT COALESCE(SUM(lock_type = ${LOCK_TYPE.write}), 0) AS w, COALESCE(SUM(IF(lock_type = ${LOCK_TYPE.read}, COALESCE(permits, 1), 0)), 0) AS r,
          COALESCE(SUM(permits IS NOT NULL), 0) AS p
   FROM t_lock_log WHERE resource_id = ? AND status = ${STATUS.live}`;
export const SET_COUNTS =
  'UPDATE t_read_write_lock SET w_count = ?, r_count = ?, version = version + 1 WHERE resource_id = ?';
/**
 * A missing row inserted again. Its `permit_limit` is NULL, or, when live permit grants hold the
 * resource, their permits: the log does not keep a semaphore's limit, and this is the one limit that
 * admits no one beyond the holders and keeps readers from joining them; once they are gone the
 * semaphore takes its next holder's limit.
 */
const INSERT_ROW =
  'INSERT INTO t_read_write_lock (resource_id, w_count, r_count, permit_limit, version) VALUES (?, ?, ?, ?, 1)';

/** What a recount of one resource found: nothing to do, counts set from the log, or grants that exclude each other. */
export type RecountOutcome =
  | { kind: 'agreed' }
  | { kind: 'repaired'; found: CountDisagreement }
  | { kind: 'conflicting'; found: CountDisagreement };

/**
 * Sets one resource's counts to its live grants, in one READ COMMITTED transaction. The resource
 * row is locked first; acquire, release, reaper and mode changes all write that row in the
 * transaction that changes a grant, so none can commit until this one does, and the count read
 * after the lock (a fresh snapshot under READ COMMITTED) is the log as it stays. Live grants that
 * exclude each other (two writers, or a writer beside readers) cannot be counted into a valid row
 * (the table's CHECK refuses it): they are left as they are, for an operator's forceRelease.
 * A missing row is inserted; a first acquire inserting it meanwhile fails the insert (1062),
 * rolled back here for the caller to recount.
 */
export async function recountResource(conn: RawConnection, resource: Buffer): Promise<RecountOutcome> {
  await query(conn, 'SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
  await query(conn, 'START TRANSACTION');
  try {
    const [row] = await query<Array<{ w_count: number; r_count: number }>>(conn, LOCK_RESOURCE_ROW, [resource]);
    const [live] = await query<Array<{ w: number | string; r: number | string; p: number | string }>>(
      conn,
      COUNT_LIVE,
      [resource],
    );
    const found = disagreement({
      resource_id: resource,
      w_count: row?.w_count ?? 0,
      r_count: row?.r_count ?? 0,
      live_w: live?.w ?? 0,
      live_r: live?.r ?? 0,
      row_missing: row === undefined && Number(live?.w ?? 0) + Number(live?.r ?? 0) > 0 ? 1 : 0,
    });
    let outcome: RecountOutcome;
    if (!found.rowMissing && found.wCount === found.liveWrites && found.rCount === found.liveReads)
      outcome = { kind: 'agreed' };
    else if (found.liveWrites > 1 || (found.liveWrites === 1 && found.liveReads > 0))
      outcome = { kind: 'conflicting', found };
    else {
      const permitLimit = Number(live?.p ?? 0) > 0 ? found.liveReads : null;
      if (found.rowMissing) await query(conn, INSERT_ROW, [resource, found.liveWrites, found.liveReads, permitLimit]);
      else await query(conn, SET_COUNTS, [found.liveWrites, found.liveReads, resource]);
      outcome = { kind: 'repaired', found };
    }
    await query(conn, 'COMMIT');
    return outcome;
  } catch (err) {
    await query(conn, 'ROLLBACK').catch(() => undefined);
    throw err;
  }
}
