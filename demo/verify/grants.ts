// The grant log as intervals on the database clock: [create_time, released_at), open-ended while live.
import type { Knex } from 'knex';
import { micros } from './db-time.js';

export interface GrantInterval {
  id: number;
  resource: string;
  mode: 'W' | 'R';
  status: number;
  releasedBy: number | null;
  owner: string;
  start: number;
  /** Infinity while the grant is live. */
  end: number;
}

export async function loadGrants(db: Knex): Promise<GrantInterval[]> {
  const [rows] = (await db.raw(
    `SELECT id, CAST(resource_id AS CHAR) AS resource, lock_type, status, released_by, owner,
            ${micros('create_time')} AS start_us, ${micros('released_at')} AS end_us
       FROM t_lock_log ORDER BY resource_id, create_time, id`,
  )) as [
    Array<{
      id: number;
      resource: string;
      lock_type: number;
      status: number;
      released_by: number | null;
      owner: string;
      start_us: number | string;
      end_us: number | string | null;
    }>,
    unknown,
  ];
  return rows.map((r) => ({
    id: Number(r.id),
    resource: r.resource,
    mode: r.lock_type === 0 ? 'W' : 'R',
    status: r.status,
    releasedBy: r.released_by,
    owner: r.owner,
    start: Number(r.start_us),
    end: r.end_us === null ? Number.POSITIVE_INFINITY : Number(r.end_us),
  }));
}

/** Half-open intervals: a grant released at t and one created at t do not overlap. */
export function overlaps(a: { start: number; end: number }, b: { start: number; end: number }): boolean {
  return a.start < b.end && b.start < a.end;
}

/**
 * Pairs of grants on one resource that held at the same time with at least one of them a writer.
 * `grants` must be sorted by resource, then start.
 */
export function conflictingPairs(grants: GrantInterval[]): Array<[GrantInterval, GrantInterval]> {
  const pairs: Array<[GrantInterval, GrantInterval]> = [];
  let active: GrantInterval[] = [];
  let resource: string | null = null;
  for (const g of grants) {
    if (g.resource !== resource) {
      resource = g.resource;
      active = [];
    }
    active = active.filter((a) => a.end > g.start);
    for (const a of active) if (a.mode === 'W' || g.mode === 'W') pairs.push([a, g]);
    active.push(g);
  }
  return pairs;
}
