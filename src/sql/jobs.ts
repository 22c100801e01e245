// The jobs view of the operator tools (`mysql-rwlock jobs`, the page's Jobs section): scheduled jobs
// found in the grant log by the resource ids their helpers take, with how each one's last run ended.
// The log holds grants, not jobs: what it cannot say is said where the view is documented
// (docs/cli.md#jobs-mysql-rwlock-jobs).
import { query, type RawConnection } from './connection.js';
import { DB_NOW, epochUs, utcDate } from './clock.js';
import { endedBy, RELEASED_BY, STATUS, type EndedBy } from '../types.js';

/**
 * node-cron's key for a fire is the task's name, `:` and the fire time as `Date.toISOString()`
 * gives it (`2026-12-03T03:00:00.000Z`); the run coordinator puts its prefix before it. A LIKE
 * pattern (not REGEXP, which MySQL refuses on binary strings) of that tail, and its length.
 */
export const CRON_FIRE_LIKE = '%:____-__-__T__:__:__.___Z';
export const CRON_FIRE_CHARS = 25;
/**
 * Before version 0.2, `runExclusive` with `lockAtLeastFor` fenced its run on a second grant, the job's
 * name and this suffix; such rows stay in a log's history, so the view still reads them as the job's.
 */
export const EXCLUSIVE_RUN_SUFFIX = '#run';

/**
 * A grant's lane: the node-cron task of a fire's key, the job of a `#run` grant, else its resource
 * id. SQL over `t_lock_log l`, so that the operator page folds a task's fires into one lane.
 */
export const LANE_SQL = `CASE WHEN l.resource_id LIKE '${CRON_FIRE_LIKE}' THEN LEFT(l.resource_id, LENGTH(l.resource_id) - ${CRON_FIRE_CHARS})
  WHEN l.resource_id LIKE '%${EXCLUSIVE_RUN_SUFFIX}' THEN LEFT(l.resource_id, LENGTH(l.resource_id) - ${EXCLUSIVE_RUN_SUFFIX.length})
  ELSE l.resource_id END`;

/** A grant that was a grant: live, or released by anyone but a withdrawal (an acquire never granted). */
const GRANTED = `(l.status = ${STATUS.live} OR (l.status = ${STATUS.released} AND l.released_by <> ${RELEASED_BY.withdrawn}))`;

/** The jobs view's window (how far back jobs are looked for) and how many jobs it shows. */
export const JOBS_VIEW_DEFAULTS = Object.freeze({ windowMs: 86_400_000, maxJobs: 100 });

/** How a job's last run ended, as the log says it. */
export type RunOutcome =
  /** its grant is live: the run is in progress (or, for a node-cron fire, its grant is kept for `lockAtLeastFor`) */
  | 'running'
  /** its holder released it: the run finished (committed, or failed and rolled back: the log does not say which) */
  | 'finished'
  /** the reaper released it: the holder was presumed dead, and its commit is refused */
  | 'reaped'
  /** an operator released it */
  | 'operator'
  /** a release the log names otherwise */
  | 'unknown';

/** A job's last run. */
export interface JobRun {
  /** The grant of the run: the fire's first grant (node-cron), the job's grant (exclusive). */
  grantId: number;
  resourceId: string;
  /** node-cron: the fire's scheduled time, from its key; null for an exclusive job. */
  fireTime: Date | null;
  /** Who ran it: the grant's owner (the manager's `owner`). */
  holder: string;
  startedAt: Date;
  /** When the run's fence grant was released; null while running. */
  endedAt: Date | null;
  outcome: RunOutcome;
  /** An operator's reason, or the reaper's note. */
  reason: string | null;
  /** An exclusive job with `lockAtLeastFor`: its grant is still held after the run ended. */
  heldAfterRun: boolean;
}

export interface JobSummary {
  kind: 'node-cron' | 'exclusive';
  /** node-cron: the fire keys' common part (the coordinator's prefix and the task's name); exclusive: the job's name. */
  name: string;
  /** Fires claimed (node-cron) or runs granted (exclusive) in the window. */
  runs: number;
  /** Of those, how many the reaper released. */
  reaped: number;
  last: JobRun | null;
  /**
   * node-cron: the fire after the last, when the last three fires claimed are evenly spaced (their
   * spacing is `periodMs`); null otherwise, and for exclusive jobs. The schedule lives in the
   * processes, not in the database: an estimate, exact for a schedule of fixed period.
   */
  nextFire: Date | null;
  periodMs: number | null;
}

export interface JobsView {
  /** The database clock when read. */
  now: Date;
  windowMs: number;
  jobs: JobSummary[];
  /** More jobs than `maxJobs` were found; the first by name are shown. */
  truncated: boolean;
}

type Row = {
  id: number | string;
  resource_id: Buffer;
  owner: string;
  create_us: number | string;
  released_us: number | string | null;
  released_by: number | null;
  reason: string | null;
};

const ROW = `l.id, l.resource_id, l.owner, ${epochUs('l.create_time')} AS create_us, ${epochUs('l.released_at')} AS released_us,
  l.released_by, n.reason`;

function outcomeOf(r: Row): RunOutcome {
  const by: EndedBy = endedBy(r.released_by);
  if (by === null) return 'running';
  if (by === 'holder') return 'finished';
  if (by === 'reaper') return 'reaped';
  if (by === 'operator') return 'operator';
  return 'unknown';
}

/**
 * The jobs of the last `windowMs`: node-cron tasks by their fires' keys, exclusive jobs by their
 * `#run` grants (`lockAtLeastFor`) and by the names given. Found through the (status, create_time)
 * index, so the cost follows the grants of the window; each job's last run is then read through
 * the resource index, whenever it was.
 */
export async function jobsView(
  conn: RawConnection,
  options: { windowMs: number; names: readonly string[]; maxJobs: number },
): Promise<JobsView> {
  const windowUs = options.windowMs * 1000;
  const IN_WINDOW = `(l.status = ${STATUS.live} OR (l.status = ${STATUS.released} AND l.create_time >= ${DB_NOW} - INTERVAL ? MICROSECOND AND l.released_by <> ${RELEASED_BY.withdrawn}))`;
  const [clock] = await query<Array<{ now_us: number | string }>>(conn, `SELECT ${epochUs(DB_NOW)} AS now_us`);
  const now = utcDate(clock!.now_us);
  const tasks = await query<Array<{ task: Buffer; fires: number | string; reaped: number | string; last_key: Buffer }>>(
    conn,
    `SELECT LEFT(l.resource_id, LENGTH(l.resource_id) - ${CRON_FIRE_CHARS}) AS task, COUNT(DISTINCT l.resource_id) AS fires,
            COALESCE(SUM(l.released_by = ${RELEASED_BY.reaper}), 0) AS reaped, MAX(l.resource_id) AS last_key
       FROM t_lock_log l WHERE ${IN_WINDOW} AND l.resource_id LIKE '${CRON_FIRE_LIKE}'
      GROUP BY task ORDER BY task LIMIT ?`,
    [windowUs, options.maxJobs + 1],
  );
  const runNames = await query<Array<{ job: Buffer }>>(
    conn,
    `SELECT DISTINCT LEFT(l.resource_id, LENGTH(l.resource_id) - ${EXCLUSIVE_RUN_SUFFIX.length}) AS job
       FROM t_lock_log l WHERE ${IN_WINDOW} AND l.resource_id LIKE '%${EXCLUSIVE_RUN_SUFFIX}' ORDER BY job LIMIT ?`,
    [windowUs, options.maxJobs + 1],
  );
  const exclusive = [
    ...new Set([...runNames.map((r) => r.job.toString('utf8')), ...options.names.map((n) => n.replace(/#run$/, ''))]),
  ].sort();
  const jobs: JobSummary[] = [];
  for (const t of tasks.slice(0, options.maxJobs)) jobs.push(await cronTask(conn, t, now));
  for (const name of exclusive.slice(0, Math.max(0, options.maxJobs - jobs.length)))
    jobs.push(await exclusiveJob(conn, name, windowUs));
  return {
    now,
    windowMs: options.windowMs,
    jobs,
    truncated: tasks.length > options.maxJobs || jobs.length < tasks.length + exclusive.length,
  };
}

async function cronTask(
  conn: RawConnection,
  t: { task: Buffer; fires: number | string; reaped: number | string; last_key: Buffer },
  now: Date,
): Promise<JobSummary> {
  // The task's last three fires: node-cron's ISO times sort as text. The length excludes a task
  // whose name continues this one's (`report` and `report:eu`).
  const keys = await query<Array<{ resource_id: Buffer }>>(
    conn,
    `SELECT DISTINCT l.resource_id FROM t_lock_log l
      WHERE l.resource_id >= ? AND l.resource_id < ? AND LENGTH(l.resource_id) = ? AND ${GRANTED}
      ORDER BY l.resource_id DESC LIMIT 3`,
    // A range of the resource index: every key of the task starts with its name and ':', and ';' follows ':'.
    [
      Buffer.concat([t.task, Buffer.from(':')]),
      Buffer.concat([t.task, Buffer.from(';')]),
      t.task.length + CRON_FIRE_CHARS,
    ],
  );
  const fireTime = (key: Buffer): Date => new Date(key.subarray(key.length - CRON_FIRE_CHARS + 1).toString('latin1'));
  const slots = keys.map((k) => fireTime(k.resource_id).getTime());
  let periodMs: number | null = null;
  if (slots.length === 3 && slots[0]! - slots[1]! === slots[1]! - slots[2]! && slots[0]! > slots[1]!)
    periodMs = slots[0]! - slots[1]!;
  // The fire's first grant ran it: a later one was an instance that found the fire claimed.
  const [first] = await query<Row[]>(
    conn,
    `SELECT ${ROW} FROM t_lock_log l LEFT JOIN t_lock_release_note n ON n.grant_id = l.id
      WHERE l.resource_id = ? AND ${GRANTED} ORDER BY l.id LIMIT 1`,
    [t.last_key],
  );
  let nextFire: Date | null = null;
  if (periodMs !== null) {
    nextFire = new Date(slots[0]! + periodMs);
    // Fires no one claimed are not in the log; the next one to come is after now.
    if (nextFire.getTime() < now.getTime() - periodMs)
      nextFire = new Date(slots[0]! + Math.ceil((now.getTime() - slots[0]!) / periodMs) * periodMs);
  }
  return {
    kind: 'node-cron',
    name: t.task.toString('utf8'),
    runs: Number(t.fires),
    reaped: Number(t.reaped),
    last: first === undefined ? null : run(first, first, fireTime(t.last_key), false),
    nextFire,
    periodMs,
  };
}

async function exclusiveJob(conn: RawConnection, name: string, windowUs: number): Promise<JobSummary> {
  const job = Buffer.from(name, 'utf8');
  const fence = Buffer.concat([job, Buffer.from(EXCLUSIVE_RUN_SUFFIX)]);
  const [counts] = await query<Array<{ runs: number | string; reaped: number | string }>>(
    conn,
    `SELECT COUNT(DISTINCT CASE WHEN l.resource_id = ? THEN l.create_time END) AS runs, COALESCE(SUM(l.released_by = ${RELEASED_BY.reaper}), 0) AS reaped
       FROM t_lock_log l
      WHERE l.resource_id IN (?, ?) AND ${GRANTED} AND (l.status = ${STATUS.live} OR l.create_time >= ${DB_NOW} - INTERVAL ? MICROSECOND)`,
    [job, job, fence, windowUs],
  );
  const last = async (resource: Buffer): Promise<Row | undefined> =>
    (
      await query<Row[]>(
        conn,
        `SELECT ${ROW} FROM t_lock_log l LEFT JOIN t_lock_release_note n ON n.grant_id = l.id
          WHERE l.resource_id = ? AND ${GRANTED} ORDER BY l.id DESC LIMIT 1`,
        [resource],
      )
    )[0];
  const [jobGrant, fenceGrant] = [await last(job), await last(fence)];
  // With lockAtLeastFor the run is fenced by its `#run` grant, taken after the job's: that one says how it ended.
  const ran = fenceGrant !== undefined && jobGrant !== undefined && Number(fenceGrant.id) > Number(jobGrant.id);
  return {
    kind: 'exclusive',
    name,
    runs: Number(counts!.runs),
    reaped: Number(counts!.reaped),
    last:
      jobGrant === undefined
        ? null
        : run(
            jobGrant,
            ran ? fenceGrant : jobGrant,
            null,
            ran && jobGrant.released_by === null && fenceGrant.released_by !== null,
          ),
    nextFire: null,
    periodMs: null,
  };
}

function run(started: Row, fence: Row, fireTime: Date | null, heldAfterRun: boolean): JobRun {
  return {
    grantId: Number(started.id),
    resourceId: started.resource_id.toString('utf8'),
    fireTime,
    holder: started.owner,
    startedAt: utcDate(started.create_us),
    endedAt: utcDate(fence.released_us),
    outcome: outcomeOf(fence),
    reason: fence.reason ?? started.reason,
    heldAfterRun,
  };
}
