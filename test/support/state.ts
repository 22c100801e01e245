// Reads of the lock tables that tests assert on.
import type { Knex } from 'knex';

export interface ResourceRow {
  resource: string;
  wCount: number;
  rCount: number;
  version: number;
}

export async function resourceRows(db: Knex): Promise<ResourceRow[]> {
  const [rows] = (await db.raw(
    'SELECT resource_id, w_count, r_count, version FROM t_read_write_lock ORDER BY resource_id',
  )) as unknown as [Array<{ resource_id: Buffer; w_count: number; r_count: number; version: number }>];
  return rows.map((r) => ({
    resource: r.resource_id.toString('utf8'),
    wCount: r.w_count,
    rCount: r.r_count,
    version: Number(r.version),
  }));
}

/** Everything in both tables, for "nothing changed" assertions. */
export async function snapshot(db: Knex): Promise<string> {
  const [a] = (await db.raw('SELECT * FROM t_read_write_lock ORDER BY resource_id')) as unknown as [unknown[]];
  const [b] = (await db.raw('SELECT * FROM t_lock_log ORDER BY id')) as unknown as [unknown[]];
  return JSON.stringify({ a, b });
}

/**
 * Violations of the table invariant: w_count in 0..1, writer excludes readers, a semaphore's permits
 * within its limit, and per resource the counts equal the live grants (status 0/1) of each type in
 * the log (a permit grant counts its permits).
 */
export async function invariantViolations(db: Knex): Promise<string[]> {
  const [rows] = (await db.raw(`
    SELECT l.resource_id, l.w_count, l.r_count,
           (SELECT COUNT(*) FROM t_lock_log g WHERE g.resource_id = l.resource_id AND g.status IN (0, 1) AND g.lock_type = 0) AS live_w,
           (SELECT COALESCE(SUM(COALESCE(g.permits, 1)), 0) FROM t_lock_log g WHERE g.resource_id = l.resource_id AND g.status IN (0, 1) AND g.lock_type = 1) AS live_r,
           l.permit_limit
      FROM t_read_write_lock l`)) as unknown as [
    Array<{
      resource_id: Buffer;
      w_count: number;
      r_count: number;
      live_w: number;
      live_r: number;
      permit_limit: number | null;
    }>,
  ];
  const problems: string[] = [];
  for (const r of rows) {
    const id = r.resource_id.toString('utf8');
    if (r.w_count > 1) problems.push(`${id}: w_count=${r.w_count}`);
    if (r.w_count === 1 && r.r_count > 0) problems.push(`${id}: writer with ${r.r_count} readers`);
    if (r.permit_limit !== null && r.r_count > r.permit_limit)
      problems.push(`${id}: ${r.r_count} permits held of a semaphore of ${r.permit_limit}`);
    if (Number(r.live_w) !== r.w_count || Number(r.live_r) !== r.r_count) {
      problems.push(`${id}: counts w=${r.w_count} r=${r.r_count} but live grants w=${r.live_w} r=${r.live_r}`);
    }
  }
  return problems;
}

/** Moves a grant's create_time back on the database clock, standing in for a long pause. */
export async function backdate(db: Knex, grantId: number, ms: number): Promise<void> {
  await db.raw('UPDATE t_lock_log SET create_time = create_time - INTERVAL ? MICROSECOND WHERE id = ?', [
    ms * 1000,
    grantId,
  ]);
}

/** Moves a released grant's released_at back: released that long ago (the purge keeps younger releases). */
export async function backdateRelease(db: Knex, grantId: number, ms: number): Promise<void> {
  await db.raw('UPDATE t_lock_log SET released_at = released_at - INTERVAL ? MICROSECOND WHERE id = ?', [
    ms * 1000,
    grantId,
  ]);
}

export async function grantRow(
  db: Knex,
  id: number,
): Promise<{ status: number; released_by: number | null; version: number }> {
  const [rows] = (await db.raw('SELECT status, released_by, version FROM t_lock_log WHERE id = ?', [
    id,
  ])) as unknown as [Array<{ status: number; released_by: number | null; version: number }>];
  if (!rows[0]) throw new Error(`no grant ${id}`);
  return rows[0];
}
