import { query, type RawConnection } from './connection.js';
import { readUncommitted } from './operate.js';
import { STATUS, modeOf, type GrantSummary } from '../types.js';
import { DB_NOW, epochUs, utcDate } from './clock.js';
import { STALE_SQL } from './reap.js';

/** A live grant of a resource, as `inspect()` lists it. */
export interface Holder extends GrantSummary {
  /** The grant's lease (`leaseMs`, `lockAtMostFor`, `extend()`): it is stale once this and the grace have passed. */
  leaseUntil: Date | null;
  /**
   * Stale by the lease rule (docs/healing.md), with the manager's staleAfterMs as the cutoff of a
   * grant without a lease: the reaper, or the next acquire of the resource, will release it.
   */
  stale: boolean;
  /**
   * A one-commit section in progress (`{ section: true }`), not a durable grant: it holds the
   * resource by its transaction's row locks, not by the counts in `live`, and is never stale. Seen
   * where the reading session can see uncommitted rows (docs/admin.md).
   */
  section: boolean;
  /** How many permits a permit grant holds (as `Grant.permits`); absent for read and write grants. */
  permits?: number;
}

/** What `inspect()` returns. */
export interface LockState {
  resourceId: string;
  /** The resource's counts of live grants by mode, named as in `LockStats.live`. */
  live: { write: number; read: number };
  /** The limit of the semaphore whose permits hold the resource (`live.read` counts them), else null. */
  permitLimit: number | null;
  /** A waiting writer currently holds new readers back. */
  writerWaiting: boolean;
  holders: Holder[];
}

export async function inspectResource(
  conn: RawConnection,
  resourceId: string,
  resource: Buffer,
  staleAfterMs: number,
): Promise<LockState> {
  const counts = await query<
    Array<{ w_count: number; r_count: number; permit_limit: number | null; writer_waiting: number | null }>
  >(
    conn,
    `SELECT w_count, r_count, permit_limit, w_wait_until > ${DB_NOW} AS writer_waiting FROM t_read_write_lock WHERE resource_id = ?`,
    [resource],
  );
  type Row = {
    id: number | string;
    lock_type: number;
    permits: number | null;
    status: number;
    owner: string;
    create_us: number | string;
    lease_us: number | string | null;
    age_us: number | string;
    stale: number | null;
  };
  const holders = (status: number): string =>
    `SELECT id, lock_type, permits, status, owner, ${epochUs('create_time')} AS create_us, ${epochUs('lease_until')} AS lease_us,
            TIMESTAMPDIFF(MICROSECOND, create_time, ${DB_NOW}) AS age_us, ${STALE_SQL} AS stale
       FROM t_lock_log WHERE status = ${status} AND resource_id = ? ORDER BY id`; // scans live grants (or running sections) only, via (status, create_time)
  const params = [staleAfterMs * 1000, resource];
  const live = await query<Row[]>(conn, holders(STATUS.live), params);
  // The sections in progress, in their own uncommitted transactions.
  const sections = await readUncommitted<Row[]>(conn, holders(STATUS.sectionInProgress), params);
  const rows = [...live, ...sections].sort((a, b) => Number(a.id) - Number(b.id));
  const c = counts[0];
  return {
    resourceId,
    live: { write: c ? Number(c.w_count) : 0, read: c ? Number(c.r_count) : 0 },
    permitLimit: c && c.permit_limit !== null && Number(c.r_count) > 0 ? Number(c.permit_limit) : null,
    writerWaiting: c ? Number(c.writer_waiting) === 1 : false,
    holders: rows.map((r) => {
      const ageMs = Number(r.age_us) / 1000;
      return {
        id: Number(r.id),
        mode: modeOf(r.lock_type, r.permits),
        owner: r.owner,
        createTime: utcDate(r.create_us),
        leaseUntil: utcDate(r.lease_us),
        ageMs,
        stale: Number(r.status) === STATUS.live && Number(r.stale) === 1,
        section: Number(r.status) === STATUS.sectionInProgress,
        ...(r.permits === null ? {} : { permits: Number(r.permits) }),
      };
    }),
  };
}
