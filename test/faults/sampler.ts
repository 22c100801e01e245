// Counts and live grants read in one consistent snapshot every ~250 ms while a run goes on, for
// the checker's invariant check during the run (not only at its end).
import { setTimeout as sleep } from 'node:timers/promises';
import mysql from 'mysql2/promise';
import { parseMysqlUrl } from '../../harness/database.js';
import type { Sample } from './checker.js';
import { now } from './history.js';

export interface Sampler {
  samples: Sample[];
  /** Stops sampling and resolves once the last sample is in. */
  stop(): Promise<void>;
}

export function startSampler(adminUrl: string, database: string): Sampler {
  const samples: Sample[] = [];
  let sampling = true;
  const loop = (async () => {
    let conn: mysql.Connection | undefined;
    while (sampling) {
      try {
        conn ??= await mysql.createConnection({ ...parseMysqlUrl(adminUrl), database, connectTimeout: 3000 });
        await conn.query('START TRANSACTION WITH CONSISTENT SNAPSHOT');
        const [locks] = await conn.query(
          'SELECT CAST(resource_id AS CHAR) AS resource, w_count AS w, r_count AS r FROM t_read_write_lock',
        );
        const [live] = await conn.query(
          // A permit grant counts its permits, as r_count does.
          'SELECT CAST(resource_id AS CHAR) AS resource, lock_type AS type, SUM(COALESCE(permits, 1)) AS n FROM t_lock_log WHERE status IN (0, 1) GROUP BY resource_id, lock_type',
        );
        await conn.query('COMMIT');
        samples.push({
          t: now(),
          locks: (locks as Array<{ resource: string; w: number; r: number }>).map((l) => ({
            resource: l.resource,
            w: Number(l.w),
            r: Number(l.r),
          })),
          live: (live as Array<{ resource: string; type: number; n: number }>).map((l) => ({
            resource: l.resource,
            type: Number(l.type) as 0 | 1,
            n: Number(l.n),
          })),
        });
      } catch {
        await conn?.destroy();
        conn = undefined;
      }
      await sleep(250);
    }
    await conn?.end().catch(() => undefined);
  })();
  return {
    samples,
    async stop() {
      sampling = false;
      await loop;
    },
  };
}
