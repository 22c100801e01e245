import { query, type RawConnection, type SqlValue } from './connection.js';
import { InvalidOptionsError } from '../errors.js';
import {
  endedBy,
  LOCK_TYPE,
  RELEASED_BY,
  STATUS,
  modeOf,
  type EndedBy,
  type GrantSummary,
  type LockMode,
} from '../types.js';
import { STALE_SQL } from './reap.js';
import { DB_NOW, epochUs, utcDate } from './clock.js';

/** A live grant as `list()` returns it; pass the last `id` of a page as `after` for the next. */
export interface ListedGrant extends GrantSummary {
  resourceId: string;
  /** Set by `extend()`/`leaseMs`: the reaper leaves the grant alone until then. */
  leaseUntil: Date | null;
  /** The reaper's own test (the lease rule, docs/healing.md) with the manager's `staleAfterMs` as the cutoff of a grant without a lease. */
  stale: boolean;
  /** A writer is waiting for this grant's resource (its writer-intent mark is current). */
  writerWaiting: boolean;
  /**
   * A one-commit section in progress (`{ section: true }`): its transaction holds the resource and
   * has not committed yet. Never stale (no reaper ends a section: its idle bound and its commit do).
   * Seen where the reading session can see uncommitted rows: see docs/admin.md.
   */
  section: boolean;
  /** How many permits a permit grant holds (as `Grant.permits`); absent for read and write grants. */
  permits?: number;
  /** A permit grant's semaphore limit, as its holders took it (see `inspect().permitLimit`); absent for read and write grants. */
  permitLimit?: number;
}

export interface ListFilter {
  mode: LockMode | undefined;
  owner: Buffer | undefined;
  staleOnly: boolean;
  resourcePrefix: Buffer | undefined;
  limit: number;
  after: number | undefined;
}

interface ListCursor {
  id: number;
  days: number;
  us: number;
}

/**
 * The statement `listLive` runs (exported so a test can EXPLAIN it): the live grants, or with
 * `sections` the sections in progress (status 1, read uncommitted; never stale).
 */
export function listQuery(
  f: ListFilter,
  staleAfterMs: number,
  cursor?: ListCursor,
  sections = false,
): { sql: string; params: SqlValue[] } {
  const where: string[] = [`l.status = ${sections ? STATUS.sectionInProgress : STATUS.live}`];
  const params: SqlValue[] = sections ? [] : [staleAfterMs * 1000];
  if (cursor !== undefined) {
    where.push(
      '(l.create_time > FROM_DAYS(?) + INTERVAL ? MICROSECOND OR (l.create_time = FROM_DAYS(?) + INTERVAL ? MICROSECOND AND l.id > ?))',
    );
    params.push(cursor.days, cursor.us, cursor.days, cursor.us, cursor.id);
  }
  if (f.mode !== undefined) {
    where.push(`l.lock_type = ? AND l.permits IS ${f.mode === 'permit' ? 'NOT NULL' : 'NULL'}`);
    params.push(LOCK_TYPE[f.mode]);
  }
  if (f.owner !== undefined) {
    // utf8mb4_bin is PAD SPACE (MariaDB, and MySQL's too): 'own' = 'own '. The collated test can
    // use an index on owner if one is added; the byte test makes the match exact.
    where.push('l.owner = CONVERT(? USING utf8mb4) COLLATE utf8mb4_bin AND CAST(l.owner AS BINARY) = ?');
    params.push(f.owner, f.owner);
  }
  if (f.resourcePrefix !== undefined) {
    where.push('LEFT(l.resource_id, ?) = ?');
    params.push(f.resourcePrefix.length, f.resourcePrefix);
  }
  if (f.staleOnly) {
    where.push(STALE_SQL);
    params.push(staleAfterMs * 1000);
  }
  params.push(f.limit + 1);
  const sql = `SELECT l.id, l.resource_id, l.lock_type, l.permits, l.owner, ${epochUs('l.create_time')} AS create_us,
            ${epochUs('l.lease_until')} AS lease_us,
            TIMESTAMPDIFF(MICROSECOND, l.create_time, ${DB_NOW}) AS age_us, ${sections ? '0' : STALE_SQL} AS stale,
            r.w_wait_until > ${DB_NOW} AS writer_waiting, r.permit_limit
       FROM t_lock_log l LEFT JOIN t_read_write_lock r ON r.resource_id = l.resource_id
      WHERE ${where.join(' AND ')}
      ORDER BY l.create_time, l.id LIMIT ?`;
  return { sql, params };
}

/**
 * Runs one autocommit statement at READ UNCOMMITTED: it sees the rows of transactions still open,
 * the sections in progress among them. No privilege is needed beyond SELECT; it locks nothing.
 */
export async function readUncommitted<T>(conn: RawConnection, sql: string, params: readonly SqlValue[]): Promise<T> {
  await query(conn, 'SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED');
  return query<T>(conn, sql, params);
}

/**
 * Live grants and sections in progress, oldest first (grant time, then id), read through the
 * (status, create_time) index: the cost follows the number of live grants and running sections
 * read, never the size of the log or the number of resources. Filters apply to the rows the index
 * yields (`staleOnly` leaves sections out: none is ever stale). Keyset paging: `after` names the
 * last grant of the previous page, whose grant time is read first, so a page never repeats or skips
 * a grant that stayed live. `limit + 1` rows of each kind are read to know whether another page
 * follows. The sections are read uncommitted (see `readUncommitted`); a section that ended between
 * the two reads may be listed though it has committed, or missing though it began before the read.
 */
export async function listLive(
  conn: RawConnection,
  f: ListFilter,
  staleAfterMs: number,
): Promise<{ grants: ListedGrant[]; next: number | null }> {
  let cursor: ListCursor | undefined;
  if (f.after !== undefined) {
    // The cursor's grant time as whole days and microseconds of the day: exact, with no time zone
    // or string conversion between here and the server.
    // Uncommitted too: the last grant of the previous page may be a section still in progress.
    const [row] = await readUncommitted<Array<{ d: number; us: number | string }>>(
      conn,
      'SELECT TO_DAYS(create_time) AS d, TIMESTAMPDIFF(MICROSECOND, DATE(create_time), create_time) AS us FROM t_lock_log WHERE id = ?',
      [f.after],
    );
    if (!row)
      throw new InvalidOptionsError(
        `after: there is no grant ${f.after} (a cursor is the id of the last grant of a page)`,
      );
    cursor = { id: f.after, days: Number(row.d), us: Number(row.us) };
  }
  type Row = {
    id: number | string;
    resource_id: Buffer;
    lock_type: number;
    permits: number | null;
    owner: string;
    create_us: number | string;
    lease_us: number | string | null;
    age_us: number | string;
    stale: number;
    writer_waiting: number | null;
    permit_limit: number | null;
    section?: boolean;
  };
  const { sql, params } = listQuery(f, staleAfterMs, cursor);
  const live = await query<Row[]>(conn, sql, params);
  const sections = f.staleOnly ? [] : await readUncommitted<Row[]>(conn, ...sectionsQuery(f, staleAfterMs, cursor));
  const rows = [...live, ...sections.map((r) => ({ ...r, section: true }))].sort(
    (a, b) => Number(a.create_us) - Number(b.create_us) || Number(a.id) - Number(b.id),
  );
  const grants = rows.slice(0, f.limit).map((r) => ({
    id: Number(r.id),
    resourceId: r.resource_id.toString('utf8'),
    mode: modeOf(r.lock_type, r.permits),
    owner: r.owner,
    createTime: utcDate(r.create_us),
    ageMs: Number(r.age_us) / 1000,
    leaseUntil: utcDate(r.lease_us),
    stale: Number(r.stale) === 1,
    writerWaiting: Number(r.writer_waiting) === 1,
    section: r.section === true,
    ...(r.permits === null ? {} : { permits: Number(r.permits) }),
    ...(r.permits === null || r.permit_limit === null ? {} : { permitLimit: Number(r.permit_limit) }),
  }));
  return { grants, next: rows.length > f.limit ? grants.at(-1)!.id : null };
}

function sectionsQuery(f: ListFilter, staleAfterMs: number, cursor: ListCursor | undefined): [string, SqlValue[]] {
  const { sql, params } = listQuery(f, staleAfterMs, cursor, true);
  return [sql, params];
}

/** One grant of a resource's history, as `history()` returns it. */
export interface GrantHistoryEntry {
  id: number;
  /** The mode it has now (or had when it ended); `modeChangedAt` says when it was down- or upgraded. */
  mode: LockMode;
  owner: string;
  createTime: Date;
  /** When it ended; null while live. */
  releasedAt: Date | null;
  /**
   * Who ended it: `holder`, `reaper`, `operator`, `withdrawn` (an acquire whose reply was lost,
   * settled as never granted), or null: still live.
   */
  releasedBy: EndedBy;
  /** From grant to release, or to now while live (database clock). */
  heldMs: number;
  modeChangedAt: Date | null;
  /** Who released it, for an operator release or a self-healing acquire: the releasing manager's owner. */
  releaser: string | null;
  /** An operator's reason, or a self-healing acquire's. */
  reason: string | null;
}

/**
 * The statement `resourceHistory` runs (exported so a test can EXPLAIN it): one page of the
 * resource's grants, newest first, read through `ix_lock_log_resource`, plus one row to tell
 * whether another page follows.
 */
export function historyQuery(
  resource: Buffer,
  limit: number,
  before: number | undefined,
): { sql: string; params: SqlValue[] } {
  return {
    sql: `SELECT l.id, l.lock_type, l.permits, l.owner, ${epochUs('l.create_time')} AS create_us,
            ${epochUs('l.released_at')} AS released_us, l.released_by, ${epochUs('l.mode_changed_at')} AS mode_changed_us,
            TIMESTAMPDIFF(MICROSECOND, l.create_time, COALESCE(l.released_at, ${DB_NOW})) AS held_us, n.releaser, n.reason
       FROM t_lock_log l LEFT JOIN t_lock_release_note n ON n.grant_id = l.id
      WHERE l.resource_id = ? ${before === undefined ? '' : 'AND l.id < ?'}
      ORDER BY l.id DESC LIMIT ?`,
    params: before === undefined ? [resource, limit + 1] : [resource, before, limit + 1],
  };
}

/** A resource's grants, newest first, a page at a time (`next` is the `before` of the next page). */
export async function resourceHistory(
  conn: RawConnection,
  resource: Buffer,
  limit: number,
  before: number | undefined,
): Promise<{ grants: GrantHistoryEntry[]; next: number | null }> {
  const q = historyQuery(resource, limit, before);
  const rows = await query<
    Array<{
      id: number | string;
      lock_type: number;
      permits: number | null;
      owner: string;
      create_us: number | string;
      released_us: number | string | null;
      released_by: number | null;
      held_us: number | string;
      mode_changed_us: number | string | null;
      releaser: string | null;
      reason: string | null;
    }>
  >(conn, q.sql, q.params);
  const grants = rows.slice(0, limit).map((r) => ({
    id: Number(r.id),
    mode: modeOf(r.lock_type, r.permits),
    owner: r.owner,
    createTime: utcDate(r.create_us),
    releasedAt: utcDate(r.released_us),
    releasedBy: endedBy(r.released_by),
    heldMs: Number(r.held_us) / 1000,
    modeChangedAt: utcDate(r.mode_changed_us),
    releaser: r.releaser === null || r.releaser === '' ? null : r.releaser,
    reason: r.reason,
  }));
  return { grants, next: rows.length > limit ? grants.at(-1)!.id : null };
}

/** What `stats()` returns; counts on the database clock. */
export interface LockStats {
  /** Live grants by mode (a permit grant counts once, whatever its permits). */
  live: { write: number; read: number; permit: number };
  /** Live grants the reaper would release now (the manager's `staleAfterMs`). */
  stale: number;
  /** Live grants kept from the reaper by an extended lease. */
  leased: number;
  /**
   * Held resources on which a writer is waiting. The schema records a waiting writer as a mark on
   * the resource (`w_wait_until`), not per writer: this counts resources, not writers.
   */
  waitingWriters: number;
  /** Age of the oldest live grant; null when none is live. */
  oldestAgeMs: number | null;
  /**
   * One-commit sections in progress, by mode, and the age of the oldest (null when none): read
   * uncommitted, where the reading session can see them (docs/admin.md). Not in `live`.
   */
  sections: { write: number; read: number; oldestAgeMs: number | null };
  /** Grants released in the last hour by the reaper and by operators (from `t_lock_release_note`). */
  lastHour: { reaped: number; operator: number };
  /** The cutoff `stale` was counted with. */
  staleAfterMs: number;
}

export async function lockStats(conn: RawConnection, staleAfterMs: number): Promise<LockStats> {
  const [live] = await query<
    Array<{
      w: number | string;
      r: number | string;
      p: number | string;
      stale: number | string;
      leased: number | string;
      oldest_us: number | string | null;
    }>
  >(
    conn,
    `SELECT COALESCE(SUM(lock_type = ${LOCK_TYPE.write}), 0) AS w,
            COALESCE(SUM(lock_type = ${LOCK_TYPE.read} AND permits IS NULL), 0) AS r, COALESCE(SUM(permits IS NOT NULL), 0) AS p,
            COALESCE(SUM(${STALE_SQL}), 0) AS stale, COALESCE(SUM(lease_until >= ${DB_NOW}), 0) AS leased,
            TIMESTAMPDIFF(MICROSECOND, MIN(create_time), ${DB_NOW}) AS oldest_us
       FROM t_lock_log WHERE status = ${STATUS.live}`,
    [staleAfterMs * 1000],
  );
  // A writer waits only on a held resource, so the marks worth counting are on resources that have
  // a live grant: found through the live grants, not by scanning every resource.
  const [waiting] = await query<Array<{ n: number | string }>>(
    conn,
    `SELECT COUNT(DISTINCT l.resource_id) AS n FROM t_lock_log l JOIN t_read_write_lock r ON r.resource_id = l.resource_id
      WHERE l.status = ${STATUS.live} AND r.w_wait_until > ${DB_NOW}`,
  );
  const [sections] = await readUncommitted<
    Array<{ w: number | string; r: number | string; oldest_us: number | string | null }>
  >(
    conn,
    `SELECT COALESCE(SUM(lock_type = ${LOCK_TYPE.write}), 0) AS w, COALESCE(SUM(lock_type = ${LOCK_TYPE.read}), 0) AS r,
            TIMESTAMPDIFF(MICROSECOND, MIN(create_time), ${DB_NOW}) AS oldest_us
       FROM t_lock_log WHERE status = ${STATUS.sectionInProgress}`,
    [],
  );
  const [hour] = await query<Array<{ reaped: number | string; operator: number | string }>>(
    conn,
    `SELECT COALESCE(SUM(released_by = ${RELEASED_BY.reaper}), 0) AS reaped, COALESCE(SUM(released_by = ${RELEASED_BY.operator}), 0) AS operator
       FROM t_lock_release_note WHERE released_at > ${DB_NOW} - INTERVAL 1 HOUR`,
  );
  return {
    live: { write: Number(live!.w), read: Number(live!.r), permit: Number(live!.p) },
    stale: Number(live!.stale),
    leased: Number(live!.leased),
    waitingWriters: Number(waiting!.n),
    oldestAgeMs: live!.oldest_us === null ? null : Number(live!.oldest_us) / 1000,
    sections: {
      write: Number(sections!.w),
      read: Number(sections!.r),
      oldestAgeMs: sections!.oldest_us === null ? null : Number(sections!.oldest_us) / 1000,
    },
    lastHour: { reaped: Number(hour!.reaped), operator: Number(hour!.operator) },
    staleAfterMs,
  };
}
