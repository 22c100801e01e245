import { query, type RawConnection } from '../connection.js';
import { LOCK_TYPE, STATUS } from '../types.js';

export interface LockGauges {
  live: { write: number; read: number };
  /** Live grants the reaper would release now: older than staleAfterMs and not under an extended lease. */
  stale: number;
  /** Held resources that a writer is waiting for (its intent holds new readers back). */
  waitingWriters: number;
  /** Age of the oldest live grant on the database clock; 0 when none is live. */
  oldestAgeMs: number;
}

/**
 * Counts over the live grants only, through the (status, create_time) index: cost grows with the
 * grants held, not with the resources ever locked or the log's history. A writer waits only while
 * the resource is held, so waiting writers are counted among held resources.
 */
export async function readLockGauges(conn: RawConnection, staleAfterMs: number): Promise<LockGauges> {
  const rows = await query<Array<{ lock_type: number; live: number | string; stale: number | string | null; oldest_us: number | string | null }>>(
    conn,
    `SELECT lock_type, COUNT(*) AS live,
            SUM(create_time < NOW(6) - INTERVAL ? MICROSECOND AND (lease_until IS NULL OR lease_until < NOW(6))) AS stale,
            MAX(TIMESTAMPDIFF(MICROSECOND, create_time, NOW(6))) AS oldest_us
       FROM t_lock_log WHERE status = ${STATUS.live} GROUP BY lock_type`,
    [staleAfterMs * 1000],
  );
  const [waiting] = await query<Array<{ n: number | string }>>(
    conn,
    `SELECT COUNT(*) AS n FROM t_read_write_lock
      WHERE resource_id IN (SELECT resource_id FROM t_lock_log WHERE status = ${STATUS.live}) AND w_wait_until > NOW(6)`,
  );
  const gauges: LockGauges = { live: { write: 0, read: 0 }, stale: 0, waitingWriters: Number(waiting?.n ?? 0), oldestAgeMs: 0 };
  for (const r of rows) {
    gauges.live[Number(r.lock_type) === LOCK_TYPE.write ? 'write' : 'read'] = Number(r.live);
    gauges.stale += Number(r.stale ?? 0);
    gauges.oldestAgeMs = Math.max(gauges.oldestAgeMs, Number(r.oldest_us ?? 0) / 1000);
  }
  return gauges;
}
