// Scale (--scale): lock cycle throughput with 1,000,000 resources and 10,000,000 log rows against
// 1,000 resources, and the reaper case (reaper.ts) on that database. Slow to set up, so opt-in.
import { connectKnex, createDatabase, dropDatabase } from '../../harness/database.js';
import { createLockManager, type LockManager } from '../../src/index.js';
import { migrate } from '../../src/admin/index.js';
import type { Family } from '../lib/family.js';
import { runFor, stats } from '../lib/run.js';
import { loadNumbers, loadResources, measureReap } from './reaper.js';

async function cycleOps(locks: LockManager, count: number, seconds: number): Promise<number> {
  const pick = (): string => `res-${Math.floor(Math.random() * count)}`;
  const s = stats(
    await runFor(seconds * 1000, 16, async () => {
      const g = await locks.tryAcquireWrite(pick());
      if (!g) return false;
      await g.release();
    }),
  );
  return s.opsPerSec;
}

export const scale: Family = {
  groups: ['scale'],
  optIn: true,
  async run({ server, seconds, log }, results) {
    const url = server.url;
    const small = `bench_scale_small_${process.pid}`;
    const big = `bench_scale_big_${process.pid}`;
    await createDatabase(url, small);
    await createDatabase(url, big);
    const ks = connectKnex(url, small, { poolMax: 20 });
    const kb = connectKnex(url, big, { poolMax: 30 });
    try {
      await migrate(ks);
      await migrate(kb);
      await loadNumbers(ks, 1_000_000);
      await loadResources(ks, 1000);
      log('[scale] loading 1,000,000 resources and 10,000,000 log rows');
      const t0 = performance.now();
      await loadNumbers(kb, 1_000_000);
      await loadResources(kb, 1_000_000);
      for (let chunk = 0; chunk < 10; chunk++) {
        await kb.raw(
          `INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token, released_at, released_by)
          SELECT CONVERT(CONCAT('res-', n) USING binary), n % 2, 2, UTC_TIMESTAMP(6) - INTERVAL (10000000 - ? * 1000000 - n) SECOND, 1, 'bulk',
                 UNHEX(LPAD(HEX(? * 1000000 + n), 32, '0')), UTC_TIMESTAMP(6), 1
            FROM bench_nums`,
          [chunk, chunk],
        );
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
      const reap = await measureReap(kb, lb, { count: 100_000, total: 1_000_000, seconds, log });
      results.set('scale', {
        loadSeconds,
        cycleOpsAt1k: mean(small1k),
        cycleOpsAt1M: mean(big1M),
        cycleRatio: mean(big1M) / mean(small1k),
        ...reap,
      });
    } finally {
      await ks.destroy();
      await kb.destroy();
      await dropDatabase(url, small).catch(() => undefined);
      await dropDatabase(url, big).catch(() => undefined);
    }
  },
  summary: (results) => (results.get('scale') ? [`scale: ${JSON.stringify(results.get('scale'))}`] : []),
  targets: [
    {
      id: 'scale/cycle',
      label: 'cycle @1M resources ÷ @1k resources',
      of: { case: 'scale', metric: 'cycleRatio' },
      atLeast: 0.8,
    },
    {
      id: 'scale/reap',
      label: 'reap 100k stale grants among 1M resources, seconds',
      of: { case: 'scale', metric: 'reapSeconds' },
      atMost: 10,
    },
    {
      id: 'scale/reap-under-load',
      label: 'reap 100k while 8 workers acquire, seconds',
      of: { case: 'scale', metric: 'reapSecondsUnderLoad' },
    },
    {
      id: 'scale/p99',
      label: 'acquire p99 during reap ÷ without',
      of: { case: 'scale', metric: 'p99Ratio' },
      atMost: 1.5,
    },
  ],
};
