// The operator page's reads beyond the operator API (stats, list): recent releases by the reaper
// and operators, and the grants of a time window for the timeline.
import { query, type RawConnection } from '../sql/connection.js';
import type { GrantHistoryEntry } from '../sql/operate.js';
import { endedBy, RELEASED_BY, STATUS, modeOf, type EndedBy, type LockMode } from '../types.js';
import { DB_NOW, epochUs, utcDate } from '../sql/clock.js';
import { LANE_SQL } from '../sql/jobs.js';

export interface RecentRelease {
  grantId: number;
  /** Null when the grant's log row has been purged since. */
  resourceId: string | null;
  mode: LockMode | null;
  owner: string | null;
  createTime: Date | null;
  releasedAt: Date;
  releasedBy: EndedBy;
  releaser: string | null;
  reason: string | null;
}

/** The latest releases by the reaper and by operators, newest first, through the notes' time index. */
export async function recentReleases(conn: RawConnection, limit: number): Promise<RecentRelease[]> {
  const rows = await query<
    Array<{
      grant_id: number | string;
      released_us: number | string;
      released_by: number;
      releaser: string;
      reason: string | null;
      resource_id: Buffer | null;
      lock_type: number | null;
      permits: number | null;
      owner: string | null;
      create_us: number | string | null;
    }>
  >(
    conn,
    `SELECT n.grant_id, ${epochUs('n.released_at')} AS released_us, n.released_by, n.releaser, n.reason, l.resource_id, l.lock_type, l.permits, l.owner,
            ${epochUs('l.create_time')} AS create_us
       FROM t_lock_release_note n LEFT JOIN t_lock_log l ON l.id = n.grant_id
      ORDER BY n.released_at DESC LIMIT ?`,
    [limit],
  );
  return rows.map((r) => ({
    grantId: Number(r.grant_id),
    resourceId: r.resource_id === null ? null : r.resource_id.toString('utf8'),
    mode: r.lock_type === null ? null : modeOf(r.lock_type, r.permits),
    owner: r.owner,
    createTime: utcDate(r.create_us),
    releasedAt: utcDate(r.released_us),
    releasedBy: endedBy(r.released_by),
    releaser: r.releaser === '' ? null : r.releaser,
    reason: r.reason,
  }));
}

export type TimelineGrant = Pick<
  GrantHistoryEntry,
  'id' | 'mode' | 'owner' | 'createTime' | 'releasedAt' | 'releasedBy' | 'reason'
> & {
  /** The grant's own resource: a lane of folded grants (see `TimelineLane`) holds several. */
  resourceId: string;
  /** How many permits a permit grant holds; absent for read and write grants. */
  permits?: number;
};

export interface TimelineLane {
  /**
   * The lane's name: a resource id, or the grants folded into one lane: the fires of a node-cron
   * task (their keys without the fire time) and an exclusive job's `#run` grants (under the job's name).
   */
  resourceId: string;
  /** `cron`: a node-cron task's fires; `job`: a resource and its `#run` grants; null: one resource. */
  fold: 'cron' | 'job' | null;
  grants: TimelineGrant[];
}

export interface Timeline {
  /** The database clock when read: every time on the page is placed against it. */
  now: Date;
  windowMs: number;
  lanes: TimelineLane[];
  /** True when a lane's grants were cut at `maxGrants`. */
  truncated: boolean;
}

/** Grants in the window: every live grant, and released ones granted in it (withdrawn acquires are not grants). */
const IN_WINDOW = `(l.status = ${STATUS.live} OR (l.status = ${STATUS.released} AND l.create_time >= ${DB_NOW} - INTERVAL ? MICROSECOND AND l.released_by <> ${RELEASED_BY.withdrawn}))`;

/**
 * The grants of `resource` (a resource id or a lane's name), or of the `maxResources` lanes with the
 * most grants in the window (held lanes first), for the last `windowMs`. A lane is a resource, or
 * the grants `LANE_SQL` folds into one: a node-cron task's fires, a job and its `#run` grants. Read
 * through the (status, create_time) index: the cost follows the grants of the window, not the log's
 * size. A grant released in the window but granted before it is not shown.
 */
export async function timeline(
  conn: RawConnection,
  options: { resource?: Buffer; windowMs: number; maxResources: number; maxGrants: number },
): Promise<Timeline> {
  const windowUs = options.windowMs * 1000;
  const [row] = await query<Array<{ now_us: number | string }>>(conn, `SELECT ${epochUs(DB_NOW)} AS now_us`);
  const now = utcDate(row!.now_us);
  let resources: Buffer[];
  if (options.resource !== undefined) {
    resources = [options.resource];
  } else {
    const busiest = await query<Array<{ lane: Buffer }>>(
      conn,
      `SELECT ${LANE_SQL} AS lane FROM t_lock_log l WHERE ${IN_WINDOW}
        GROUP BY lane ORDER BY SUM(l.status = ${STATUS.live}) > 0 DESC, COUNT(*) DESC, lane LIMIT ?`,
      [windowUs, options.maxResources],
    );
    resources = busiest.map((r) => r.lane);
  }
  if (resources.length === 0) return { now, windowMs: options.windowMs, lanes: [], truncated: false };
  const rows = await query<
    Array<{
      id: number | string;
      resource_id: Buffer;
      lane: Buffer;
      lock_type: number;
      permits: number | null;
      owner: string;
      create_us: number | string;
      released_us: number | string | null;
      released_by: number | null;
      reason: string | null;
    }>
  >(
    conn,
    `SELECT l.id, l.resource_id, ${LANE_SQL} AS lane, l.lock_type, l.permits, l.owner, ${epochUs('l.create_time')} AS create_us,
            ${epochUs('l.released_at')} AS released_us, l.released_by, n.reason
       FROM t_lock_log l LEFT JOIN t_lock_release_note n ON n.grant_id = l.id
      WHERE ${IN_WINDOW} AND (${LANE_SQL} IN (?)${options.resource === undefined ? '' : ' OR l.resource_id = ?'})
      ORDER BY l.id DESC LIMIT ?`,
    [windowUs, resources, ...(options.resource === undefined ? [] : [options.resource]), options.maxGrants + 1],
  );
  const lanes = new Map<string, TimelineLane>(
    resources.map((r) => [r.toString('hex'), { resourceId: r.toString('utf8'), fold: null, grants: [] }]),
  );
  for (const r of rows.slice(0, options.maxGrants).reverse()) {
    // A fire or `#run` grant asked for by its own id: shown in its task's or job's lane.
    const key = r.lane.toString('hex');
    if (!lanes.has(key)) lanes.set(key, { resourceId: r.lane.toString('utf8'), fold: null, grants: [] });
    const lane = lanes.get(key)!;
    if (!r.lane.equals(r.resource_id)) lane.fold = r.resource_id.toString('utf8').endsWith('#run') ? 'job' : 'cron';
    lane.grants.push({
      id: Number(r.id),
      resourceId: r.resource_id.toString('utf8'),
      ...(r.permits === null ? {} : { permits: Number(r.permits) }),
      mode: modeOf(r.lock_type, r.permits),
      owner: r.owner,
      createTime: utcDate(r.create_us),
      releasedAt: utcDate(r.released_us),
      releasedBy: endedBy(r.released_by),
      reason: r.reason,
    });
  }
  return {
    now,
    windowMs: options.windowMs,
    lanes: [...lanes.values()].filter((l) => l.grants.length > 0 || options.resource === undefined),
    truncated: rows.length > options.maxGrants,
  };
}
