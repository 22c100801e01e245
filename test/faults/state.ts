// What the orchestrator reads from the database: the grant log, whether a grant is live, whether
// every resource is free, and the final state the checker judges.
import { setTimeout as sleep } from 'node:timers/promises';
import { RELEASED_BY } from '../../src/types.js';
import { retrying, type Query, type Target } from './admin.js';
import type { DbState } from './checker.js';
import { now } from './history.js';

const ms = (v: unknown): number => Number(v) * 1000;

export async function loadGrants(q: Query, t: Target): Promise<DbState['grants']> {
  const rows = await q<{
    id: number;
    resource: string;
    t: number;
    status: number;
    c: string;
    r: string | null;
    m: string | null;
    by: number | null;
    owner: string;
    p: number | null;
    l: number;
  }>(
    t,
    `SELECT id, CAST(resource_id AS CHAR) AS resource, lock_type AS t, status, UNIX_TIMESTAMP(create_time) AS c,
            UNIX_TIMESTAMP(released_at) AS r, UNIX_TIMESTAMP(mode_changed_at) AS m, released_by AS \`by\`, owner, permits AS p,
            lease_until IS NOT NULL AS l FROM t_lock_log
      WHERE released_by IS NULL OR released_by <> ${RELEASED_BY.withdrawn}`, // a withdrawn acquire's row was never a grant
  );
  return rows.map((g) => ({
    id: Number(g.id),
    resource: g.resource,
    type: Number(g.t) as 0 | 1,
    status: Number(g.status),
    createdMs: ms(g.c),
    releasedMs: g.r === null ? null : ms(g.r),
    modeChangedMs: g.m === null ? null : ms(g.m),
    releasedBy: g.by === null ? null : Number(g.by),
    owner: g.owner,
    permits: g.p === null ? null : Number(g.p),
    leased: Number(g.l) === 1,
  }));
}

export async function grantStatus(
  q: Query,
  t: Target,
  grant: number,
): Promise<{ status: number; by: number | null } | undefined> {
  try {
    const rows = await q<{ status: number; released_by: number | null }>(
      t,
      'SELECT status, released_by FROM t_lock_log WHERE id = ?',
      [grant],
    );
    return rows[0] ? { status: Number(rows[0].status), by: rows[0].released_by } : undefined;
  } catch {
    return undefined;
  }
}

export async function isLive(q: Query, t: Target, grant: number): Promise<boolean> {
  const s = await grantStatus(q, t, grant);
  return s !== undefined && s.status !== 2;
}

/** Live grants on `t`'s server; -1 when it cannot be asked. */
export async function liveGrantCount(q: Query, t: Target): Promise<number> {
  try {
    const rows = await q<{ n: number }>(t, 'SELECT COUNT(*) AS n FROM t_lock_log WHERE status IN (0, 1)');
    return Number(rows[0]?.n ?? 0);
  } catch {
    return -1;
  }
}

/** When no count and no live grant was first seen on `t` (polled until `deadline`); null if never. */
export async function waitFree(q: Query, t: Target, deadline: number): Promise<number | null> {
  while (now() < deadline) {
    try {
      const rows = await q<{ busy: number }>(
        t,
        `SELECT (SELECT COUNT(*) FROM t_read_write_lock WHERE w_count <> 0 OR r_count <> 0)
              + (SELECT COUNT(*) FROM t_lock_log WHERE status IN (0, 1)) AS busy`,
      );
      if (Number(rows[0]?.busy) === 0) return now();
    } catch {
      // server still coming back
    }
    await sleep(50);
  }
  return null;
}

/** Grants, counts, business effects, reads and counters, as the checker takes them; the liveness probe's grants left out. */
export function readFinalState(q: Query, t: Target, probeOwner: string): Promise<DbState> {
  return retrying(async () => {
    const grants = await loadGrants(q, t);
    const locks = (
      await q<{ resource: string; w: number; r: number; l: number | null }>(
        t,
        'SELECT CAST(resource_id AS CHAR) AS resource, w_count AS w, r_count AS r, permit_limit AS l FROM t_read_write_lock',
      )
    ).map((row) => ({ resource: row.resource, w: row.w, r: row.r, limit: row.l === null ? null : Number(row.l) }));
    const effects = await q<{
      op: string;
      resource: string;
      grant_id: number;
      prev: number;
      next: number;
      section: number;
      from_at: string;
      at: string;
    }>(
      t,
      'SELECT op_id AS op, resource_id AS resource, grant_id, prev, next, section, UNIX_TIMESTAMP(from_at) AS from_at, UNIX_TIMESTAMP(at) AS at FROM f_effect',
    );
    const reads = await q<{
      op: string;
      resource: string;
      grant_id: number;
      seen: number;
      seen_again: number;
      fenced: number;
      section: number;
      from_at: string;
      at: string;
    }>(
      t,
      'SELECT op_id AS op, resource_id AS resource, grant_id, seen, seen_again, fenced, section, UNIX_TIMESTAMP(from_at) AS from_at, UNIX_TIMESTAMP(at) AS at FROM f_read',
    );
    const counters = await q<{ resource: string; value: number }>(
      t,
      'SELECT resource_id AS resource, value FROM f_counter',
    );
    return {
      grants: grants.filter((g) => g.owner !== probeOwner),
      locks: locks.map((l) => ({ resource: l.resource, w: Number(l.w), r: Number(l.r), limit: l.limit })),
      effects: effects.map((e) => ({
        op: e.op,
        resource: e.resource,
        grant: Number(e.grant_id),
        prev: Number(e.prev),
        next: Number(e.next),
        section: Number(e.section) === 1,
        fromMs: ms(e.from_at),
        atMs: ms(e.at),
      })),
      reads: reads.map((e) => ({
        op: e.op,
        resource: e.resource,
        grant: Number(e.grant_id),
        seen: Number(e.seen),
        seenAgain: Number(e.seen_again),
        fenced: Number(e.fenced) === 1,
        section: Number(e.section) === 1,
        fromMs: ms(e.from_at),
        atMs: ms(e.at),
      })),
      counters: counters.map((c) => ({ resource: c.resource, value: Number(c.value) })),
    };
  }, 30_000);
}
