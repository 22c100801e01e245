// After a run every grant must be released (status 2) and the lock counts must equal the live
// grants in the log, per resource: all zero. Shared by both scenarios.
import type { Knex } from 'knex';
import { check, count, type Check } from './check.js';

type Rows<T> = [T[], unknown];

export async function checkLocksClean(db: Knex): Promise<Check> {
  const [[totals]] = (await db.raw(
    `SELECT COUNT(*) AS grants, SUM(status IN (0, 1)) AS live, SUM(status = 2 AND released_by = 1) AS by_holder,
            SUM(status = 2 AND released_by = 2) AS by_reaper, SUM(status = 2 AND released_by = 3) AS by_operator
       FROM t_lock_log`,
  )) as Rows<Record<string, string | number | null>>;
  const [mismatches] = (await db.raw(
    `SELECT CAST(l.resource_id AS CHAR) AS resource, l.w_count, l.r_count,
            COALESCE(g.w, 0) AS live_w, COALESCE(g.r, 0) AS live_r
       FROM t_read_write_lock l
       LEFT JOIN (SELECT resource_id, SUM(lock_type = 0) AS w, SUM(lock_type = 1) AS r
                    FROM t_lock_log WHERE status IN (0, 1) GROUP BY resource_id) g ON g.resource_id = l.resource_id
      WHERE l.w_count <> COALESCE(g.w, 0) OR l.r_count <> COALESCE(g.r, 0)`,
  )) as Rows<{ resource: string; w_count: number; r_count: number; live_w: number | string; live_r: number | string }>;
  const [[held]] = (await db.raw(
    'SELECT COUNT(*) AS n FROM t_read_write_lock WHERE w_count <> 0 OR r_count <> 0',
  )) as Rows<{ n: number }>;
  const [liveRows] = (await db.raw(
    'SELECT id, CAST(resource_id AS CHAR) AS resource, lock_type, owner FROM t_lock_log WHERE status IN (0, 1) ORDER BY id LIMIT 10',
  )) as Rows<{ id: number; resource: string; lock_type: number; owner: string }>;
  const problems = [
    ...liveRows.map(
      (g) => `grant ${g.id} (${g.lock_type === 0 ? 'W' : 'R'} on ${g.resource}, ${g.owner}) is still live`,
    ),
    ...mismatches.map(
      (m) =>
        `${m.resource}: w_count=${m.w_count} r_count=${m.r_count} but the log has ${m.live_w} W / ${m.live_r} R live`,
    ),
    ...(Number(held?.n ?? 0) > 0 && mismatches.length === 0 ? [`${held?.n} resources still hold counts`] : []),
  ];
  const figures = {
    grants: Number(totals?.grants ?? 0),
    live: Number(totals?.live ?? 0),
    releasedByHolder: Number(totals?.by_holder ?? 0),
    releasedByReaper: Number(totals?.by_reaper ?? 0),
    releasedByOperator: Number(totals?.by_operator ?? 0),
    resourcesWithCounts: Number(held?.n ?? 0),
    countLogMismatches: mismatches.length,
  };
  const summary =
    `${count(figures.grants)} grants: ${count(figures.live)} live, ` +
    `released by holder ${count(figures.releasedByHolder)}, by reaper ${count(figures.releasedByReaper)}, ` +
    `by operator ${count(figures.releasedByOperator)}; ${count(figures.resourcesWithCounts)} resources with non-zero counts, ` +
    `${count(mismatches.length)} count/log mismatches`;
  return check('All grants released, lock counts match the log', figures, summary, problems);
}
