// 32 waiters in this process on one resource, each holding the lock 1 ms, against one holder alone.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Family } from '../lib/family.js';
import { fmt } from '../lib/format.js';
import { pooled, percentile, runFor, sortedCopy, stats, type Sample } from '../lib/run.js';

export const contention: Family = {
  groups: ['contention'],
  async run({ locks, seconds, rounds, log }, results) {
    /** [granted at, waited ms] */
    type Wait = [number, number];
    const hold = async (res: string, waits: Wait[]): Promise<void> => {
      const t0 = performance.now();
      const g = await locks.acquireWrite(res, { waitMs: 60_000 });
      const t1 = performance.now();
      waits.push([t1, t1 - t0]);
      await sleep(1);
      await g.release();
    };
    const oneWaits: Wait[] = [];
    const manyWaits: Wait[] = [];
    const oneSamples: Sample[] = [];
    const manySamples: Sample[] = [];
    for (let r = 0; r < rounds; r++) {
      // interleaved so that both see the same machine
      log(`[bench] contention round ${r + 1}/${rounds}: 1 holder, then 32 waiters, 1 ms hold`);
      oneSamples.push(await runFor(seconds * 1000, 1, () => hold('cont-1', oneWaits), 150));
      manySamples.push(await runFor(seconds * 1000, 32, () => hold('cont-32', manyWaits), 300));
    }
    const one = stats(pooled(oneSamples));
    const many = stats(pooled(manySamples));
    const inWindow = ([at]: Wait): boolean => manySamples.some((m) => at >= (m.from ?? 0) && at <= (m.to ?? 0));
    const waits = sortedCopy(manyWaits.filter(inWindow).map(([, waited]) => waited));
    results.set('contention.1', { ...one });
    results.set('contention.32', {
      ...many,
      waitP50: percentile(waits, 50),
      waitP99: percentile(waits, 99),
      waitMax: waits[waits.length - 1],
      // strict FIFO: a waiter that re-queues waits for the 31 others' full cycles
      fifoIdealWaitMs: (31 * 1000) / many.opsPerSec,
    });
  },
  summary(results) {
    const one = results.get('contention.1');
    const many = results.get('contention.32');
    if (!one || !many) return [];
    const hot = results.value('lib.write.hot', 'opsPerSec', 1);
    return [
      `contention: uncontended 1-ms-hold cycle ${fmt(one.opsPerSec)}/s, 32 waiters ${fmt(many.opsPerSec)}/s` +
        ` (${fmt(many.opsPerSec! / one.opsPerSec!, 2)}x; ${fmt(hot && many.opsPerSec! / hot, 2)}x the no-hold hot cycle); waits p50 ${fmt(many.waitP50, 1)} ms,` +
        ` p99 ${fmt(many.waitP99, 1)} ms, max ${fmt(many.waitMax, 1)} ms (bound 64 ms; FIFO ideal ${fmt(many.fifoIdealWaitMs, 1)} ms)`,
    ];
  },
  targets: [
    {
      id: 'contention/throughput',
      label: '32 waiters ÷ uncontended (1 ms hold), ops/s',
      of: { case: 'contention.32' },
      per: { case: 'contention.1' },
      atLeast: 0.5,
    },
    {
      id: 'contention/max-wait',
      label: 'max wait ÷ (2 × 32 × 1 ms)',
      of: { case: 'contention.32', metric: 'waitMax' },
      factor: 64,
      atMost: 1,
    },
    {
      id: 'contention/fifo',
      label: 'max wait ÷ FIFO ideal (31 × measured cycle)',
      of: { case: 'contention.32', metric: 'waitMax' },
      per: { case: 'contention.32', metric: 'fifoIdealWaitMs' },
      atMost: 2,
    },
  ],
};
