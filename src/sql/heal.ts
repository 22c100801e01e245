import { query, type RawConnection } from './connection.js';
import { STATUS } from '../types.js';
import { DB_NOW } from './clock.js';
import { STALE_AT_SQL, STALE_SQL, type Candidate } from './reap.js';

/** A resource's live grants as a self-healing acquire sees them (src/lock/heal.ts). */
export interface ResourceStaleness {
  /** The grants stale now, by the reaper's own test (STALE_SQL), with the version read. */
  stale: Candidate[];
  /**
   * How long, in milliseconds on the database clock, until the first of the other live grants
   * turns stale (STALE_AT_SQL), unless extended first; null when there is none.
   */
  nextInMs: number | null;
}

/**
 * The live grants of one resource, read without locking (as the reaper's `selectStale` reads):
 * which are stale on the database clock, with the version a guarded reap then checks, and when the
 * next of the others can turn stale, at the earliest. `staleSql`: the tests' negative controls only.
 */
export async function resourceStaleness(
  conn: RawConnection,
  resource: Buffer,
  staleUs: number,
  staleSql = STALE_SQL,
): Promise<ResourceStaleness> {
  const rows = await query<Array<{ id: string; version: number; stale: number | string; until_us: number | string }>>(
    conn,
    `SELECT CAST(id AS CHAR) AS id, version, ${staleSql} AS stale,
            TIMESTAMPDIFF(MICROSECOND, ${DB_NOW}, ${STALE_AT_SQL}) AS until_us
       FROM t_lock_log WHERE status = ${STATUS.live} AND resource_id = ?`,
    [staleUs, staleUs, resource],
  );
  const stale: Candidate[] = [];
  let nextInMs: number | null = null;
  for (const r of rows) {
    if (Number(r.stale) === 1) stale.push({ id: BigInt(r.id), version: Number(r.version) });
    else nextInMs = Math.min(nextInMs ?? Infinity, Math.max(0, Number(r.until_us) / 1000));
  }
  return { stale, nextInMs };
}
