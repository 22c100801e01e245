// The reaper without hurting traffic: reapStaleGrants on N stale grants alone, then on N more while
// 8 workers acquire and release other resources, with their acquire p99 against a window without
// the reaper. Data is bulk-loaded with INSERT ... SELECT over a numbers table, not through the API.
import type { Knex } from 'knex';
import { connectKnex, createDatabase, dropDatabase } from '../../harness/database.js';
import { createLockManager, type LockManager } from '../../src/index.js';
import { migrate, reapStaleGrants } from '../../src/admin/index.js';
import type { Family, Metrics } from '../lib/family.js';
import { fmt } from '../lib/format.js';
import { percentile, runFor, sortedCopy } from '../lib/run.js';

const DIGITS =
  'SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9';

/** bench_nums holds 0 .. upTo - 1 (upTo at most 1,000,000). */
export async function loadNumbers(db: Knex, upTo: number): Promise<void> {
  await db.raw('CREATE TABLE bench_nums (n INT NOT NULL PRIMARY KEY) ENGINE=InnoDB');
  await db.raw(
    `INSERT INTO bench_nums (n) SELECT * FROM (SELECT a.d + 10*b.d + 100*c.d + 1000*e.d + 10000*f.d + 100000*g.d AS n
    FROM (${DIGITS}) a, (${DIGITS}) b, (${DIGITS}) c, (${DIGITS}) e, (${DIGITS}) f, (${DIGITS}) g) s WHERE n < ?`,
    [upTo],
  );
}

/** Resource rows res-0 .. res-(count - 1), all free. */
export async function loadResources(db: Knex, count: number): Promise<void> {
  await db.raw(
    `INSERT INTO t_read_write_lock (resource_id, w_count, r_count, version)
    SELECT CONVERT(CONCAT('res-', n) USING binary), 0, 0, 0 FROM bench_nums WHERE n < ?`,
    [count],
  );
}

export interface ReapFigures extends Metrics {
  /** The reaper alone. */
  reaped: number;
  reapSeconds: number;
  /** A second reap of as many, while 8 workers acquire and release other resources. */
  reapedUnderLoad: number;
  reapSecondsUnderLoad: number;
  acquireP99Without: number;
  acquireP99During: number;
  p99Ratio: number;
  acquiresDuringReap: number;
}

/**
 * Needs bench_nums and resources res-0 .. res-(total - 1) with total > 2 × count: grants on
 * res-0 .. res-(2 × count - 1) are made stale and reaped; the workers use the rest.
 */
export async function measureReap(
  db: Knex,
  locks: LockManager,
  { count, total, seconds, log }: { count: number; total: number; seconds: number; log: (l: string) => void },
): Promise<ReapFigures> {
  // `count` stale grants (backdated) on res-from .. res-(from + count - 1), their counts taken
  const stale = async (from: number): Promise<void> => {
    log(`[reap] ${count} stale grants on res-${from}..`);
    await db.raw(
      `INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token)
      SELECT CONVERT(CONCAT('res-', n + ?) USING binary), 0, 0, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, 0, 'stale', UNHEX(LPAD(HEX(20000000 + n + ?), 32, '0'))
        FROM bench_nums WHERE n < ?`,
      [from, from, count],
    );
    // The same ids as the grants just inserted, looked up by primary key.
    await db.raw(
      `UPDATE t_read_write_lock AS l JOIN bench_nums AS b ON l.resource_id = CONVERT(CONCAT('res-', b.n + ?) USING binary)
        SET l.w_count = 1, l.version = l.version + 1
      WHERE b.n < ?`,
      [from, count],
    );
  };
  await stale(0);
  const alone = await reapStaleGrants(db, { staleAfterMs: 600_000 });
  await stale(count);
  const other = (): string => `res-${2 * count + Math.floor(Math.random() * (total - 2 * count))}`;
  const acquireOnce = async (into: number[]): Promise<void> => {
    const t = performance.now();
    const g = await locks.tryAcquireWrite(other());
    into.push(performance.now() - t);
    await g?.release();
  };
  // The baseline is taken both before and after the reap and pooled, so a machine that gets busier
  // or quieter during the run (it is shared) does not read as the reaper's effect.
  const without: number[] = [];
  await runFor(seconds * 1000, 8, () => acquireOnce(without));
  const during: number[] = [];
  let reapDone = false;
  const reap = reapStaleGrants(db, { staleAfterMs: 600_000 }).finally(() => (reapDone = true));
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (!reapDone) await acquireOnce(during);
    }),
  );
  const underLoad = await reap;
  await runFor(seconds * 1000, 8, () => acquireOnce(without));
  const p99Without = percentile(sortedCopy(without), 99);
  const p99During = percentile(sortedCopy(during), 99);
  return {
    reaped: alone.reaped,
    reapSeconds: alone.durationMs / 1000,
    reapedUnderLoad: underLoad.reaped,
    reapSecondsUnderLoad: underLoad.durationMs / 1000,
    acquireP99Without: p99Without,
    acquireP99During: p99During,
    p99Ratio: p99During / p99Without,
    acquiresDuringReap: during.length,
  };
}

export const reaper: Family = {
  groups: ['reaper'],
  async run({ server, seconds, quick, log }, results) {
    // 100,000 as the target asks; a smoke run only checks that the case works
    const count = quick ? 10_000 : 100_000;
    const total = 2 * count + 100_000;
    const db = `bench_reap_${process.pid}`;
    await createDatabase(server.url, db);
    const knex = connectKnex(server.url, db, { poolMax: 20 });
    try {
      await migrate(knex);
      await loadNumbers(knex, total);
      await loadResources(knex, total);
      results.set('reaper', await measureReap(knex, createLockManager({ knex }), { count, total, seconds, log }));
    } finally {
      await knex.destroy();
      await dropDatabase(server.url, db).catch(() => undefined);
    }
  },
  summary(results) {
    const r = results.get('reaper');
    if (!r) return [];
    return [
      `reaper (${fmt(r.reaped)} stale grants among ${fmt(r.reaped! * 2 + 100_000)} resources): ${fmt(r.reapSeconds, 1)} s alone, ${fmt(r.reapSecondsUnderLoad, 1)} s while 8 workers acquire;` +
        ` their acquire p99 ${fmt(r.acquireP99Without, 1)} ms without, ${fmt(r.acquireP99During, 1)} ms during (${fmt(r.acquiresDuringReap)} acquires)`,
    ];
  },
  targets: [
    {
      id: 'reaper/p99',
      label: 'acquire p99 while 100k stale grants are reaped ÷ without (retired on 2 cores)',
      of: { case: 'reaper', metric: 'p99Ratio' },
    },
    {
      id: 'reaper/time',
      label: 'seconds to reap those 100k while 8 workers acquire',
      of: { case: 'reaper', metric: 'reapSecondsUnderLoad' },
      atMost: 10,
    },
    {
      id: 'reaper/time-alone',
      label: 'seconds to reap 100k stale grants with no other traffic',
      of: { case: 'reaper', metric: 'reapSeconds' },
    },
  ],
};
