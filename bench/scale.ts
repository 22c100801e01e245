// Scale case (--scale): lock cycle throughput with 1,000,000 resources and 10,000,000 log rows
// against 1,000 resources, and reapStaleGrants on 100,000 stale grants with the acquire p99 while
// it runs. Data is bulk-loaded with INSERT ... SELECT over a digits table, not through the API.
import { connectKnex, createDatabase, dropDatabase } from '../harness/database.js';
import { createLockManager, migrate, reapStaleGrants, type LockManager } from '../src/index.js';
import { percentile, runFor, sortedCopy, stats } from './lib/run.js';
import type { Knex } from 'knex';

export interface ScaleReport {
  loadSeconds: number;
  cycleOpsAt1k: number;
  cycleOpsAt1M: number;
  cycleRatio: number;
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

const DIGITS = 'SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9';

async function numbers(db: Knex): Promise<void> {
  await db.raw('CREATE TABLE bench_nums (n INT NOT NULL PRIMARY KEY) ENGINE=InnoDB');
  await db.raw(`INSERT INTO bench_nums (n) SELECT a.d + 10*b.d + 100*c.d + 1000*e.d + 10000*f.d + 100000*g.d
    FROM (${DIGITS}) a, (${DIGITS}) b, (${DIGITS}) c, (${DIGITS}) e, (${DIGITS}) f, (${DIGITS}) g`);
}

async function resources(db: Knex, count: number): Promise<void> {
  await db.raw(`INSERT INTO t_read_write_lock (resource_id, w_count, r_count, version)
    SELECT CONVERT(CONCAT('res-', n) USING binary), 0, 0, 0 FROM bench_nums WHERE n < ?`, [count]);
}

async function cycleOps(locks: LockManager, count: number, seconds: number): Promise<number> {
  const pick = (): string => `res-${Math.floor(Math.random() * count)}`;
  const s = stats(await runFor(seconds * 1000, 16, async () => {
    const g = await locks.tryAcquireWrite(pick());
    if (!g) return false;
    await g.release();
  }));
  return s.opsPerSec;
}

export async function runScale(url: string, { seconds, log }: { seconds: number; log: (l: string) => void }): Promise<ScaleReport> {
  const small = `bench_scale_small_${process.pid}`;
  const big = `bench_scale_big_${process.pid}`;
  await createDatabase(url, small);
  await createDatabase(url, big);
  const ks = connectKnex(url, small, { poolMax: 20 });
  const kb = connectKnex(url, big, { poolMax: 30 });
  try {
    await migrate(ks);
    await migrate(kb);
    await numbers(ks);
    await resources(ks, 1000);
    log('[scale] loading 1,000,000 resources and 10,000,000 log rows');
    const t0 = performance.now();
    await numbers(kb);
    await resources(kb, 1_000_000);
    for (let chunk = 0; chunk < 10; chunk++) {
      await kb.raw(`INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token, released_at, released_by)
        SELECT CONVERT(CONCAT('res-', n) USING binary), n % 2, 2, NOW(6) - INTERVAL (10000000 - ? * 1000000 - n) SECOND, 1, 'bulk',
               UNHEX(LPAD(HEX(? * 1000000 + n), 32, '0')), NOW(6), 1
          FROM bench_nums`, [chunk, chunk]);
      log(`[scale] log rows ${(chunk + 1) * 1_000_000} (${((performance.now() - t0) / 1000).toFixed(0)} s)`);
    }
    const loadSeconds = (performance.now() - t0) / 1000;
    const ls = createLockManager({ knex: ks });
    const lb = createLockManager({ knex: kb });
    log('[scale] cycles');
    // interleaved, 3 times each, mean of each
    const small1k: number[] = [];
    const big1M: number[] = [];
    for (let i = 0; i < 3; i++) {
      small1k.push(await cycleOps(ls, 1000, seconds));
      big1M.push(await cycleOps(lb, 1_000_000, seconds));
    }
    const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
    const cycleOpsAt1k = mean(small1k);
    const at1M = mean(big1M);

    // 100,000 stale grants (backdated), their counts taken: set `from` .. `from + 99,999`
    const stale = async (from: number): Promise<void> => {
      log(`[scale] 100,000 stale grants on res-${from}..`);
      await kb.raw(`INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token)
        SELECT CONVERT(CONCAT('res-', n + ?) USING binary), 0, 0, NOW(6) - INTERVAL 1 HOUR, 0, 'stale', UNHEX(LPAD(HEX(20000000 + n + ?), 32, '0'))
          FROM bench_nums WHERE n < 100000`, [from, from]);
      // The same ids as the grants just inserted, looked up by primary key.
      await kb.raw(`UPDATE t_read_write_lock AS l JOIN bench_nums AS b ON l.resource_id = CONVERT(CONCAT('res-', b.n + ?) USING binary)
          SET l.w_count = 1, l.version = l.version + 1
        WHERE b.n < 100000`, [from]);
    };
    // 1) the reaper alone
    await stale(0);
    const alone = await reapStaleGrants(kb, { staleAfterMs: 600_000 });
    // 2) acquire latency on other resources, without and then during a second reap
    await stale(100_000);
    const other = (): string => `res-${200_000 + Math.floor(Math.random() * 800_000)}`;
    const acquireLat: number[] = [];
    const acquireOnce = async (into: number[]): Promise<void> => {
      const t = performance.now();
      const g = await lb.tryAcquireWrite(other());
      into.push(performance.now() - t);
      await g?.release();
    };
    await runFor(seconds * 1000 * 2, 8, () => acquireOnce(acquireLat));
    const p99Without = percentile(sortedCopy(acquireLat), 99);
    const during: number[] = [];
    let reapDone = false;
    const reap = reapStaleGrants(kb, { staleAfterMs: 600_000 }).finally(() => (reapDone = true));
    await Promise.all(Array.from({ length: 8 }, async () => {
      while (!reapDone) await acquireOnce(during);
    }));
    const result = await reap;
    const p99During = percentile(sortedCopy(during), 99);
    return {
      loadSeconds,
      cycleOpsAt1k,
      cycleOpsAt1M: at1M,
      cycleRatio: at1M / cycleOpsAt1k,
      reaped: alone.reaped,
      reapSeconds: alone.durationMs / 1000,
      reapedUnderLoad: result.reaped,
      reapSecondsUnderLoad: result.durationMs / 1000,
      acquireP99Without: p99Without,
      acquireP99During: p99During,
      p99Ratio: p99During / p99Without,
      acquiresDuringReap: during.length,
    };
  } finally {
    await ks.destroy();
    await kb.destroy();
    await dropDatabase(url, small).catch(() => undefined);
    await dropDatabase(url, big).catch(() => undefined);
  }
}
