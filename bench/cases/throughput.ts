// The ceiling (the cheapest durable commit the server can do) and the bare lock cycle, against
// which the other cases are read; and the database CPU a cycle costs next to a ceiling commit.
import type { LockManager } from '../../src/index.js';
import type { Family, Op } from '../lib/family.js';
import type { Target } from '../lib/targets.js';

export const CEILING = 'ceiling.update';

const cycle =
  (locks: LockManager, mode: 'write' | 'read', resource: (w: number) => string): Op =>
  async (w) => {
    const g = mode === 'write' ? await locks.tryAcquireWrite(resource(w)) : await locks.tryAcquireRead(resource(w));
    if (!g) return false;
    await g.release();
  };

/** A permit cycle: one permit of a semaphore of `permits`, taken at once and given back. */
const permitCycle =
  (locks: LockManager, permits: number, resource: (w: number) => string): Op =>
  async (w) => {
    const g = await locks.tryAcquirePermit(resource(w), { permits });
    if (!g) return false;
    await g.release();
  };

const halfCeiling = [{ name: 'x ceiling/2', to: CEILING, factor: 0.5 }];

const targets: Target[] = [];
for (const c of [1, 16]) {
  // first round: a cycle is two commits, so half the ceiling is its limit
  for (const mode of ['write', 'read'] as const) {
    targets.push({
      id: `cycle/${mode} c=${c}`,
      label: `${mode} cycle (distinct) ÷ (ceiling ÷ 2)`,
      of: { case: `lib.${mode}.distinct`, c },
      per: { case: CEILING, c },
      factor: 0.5,
      atLeast: c === 1 ? 0.55 : 0.45,
    });
  }
  // A permit cycle beside the write cycle it is built like (one guarded UPDATE, one grant
  // row, one release); on one semaphore with a permit for every worker, beside the hot read cycle.
  targets.push(
    {
      id: `permit/distinct c=${c}`,
      label: 'permit cycle (distinct) ÷ write cycle (distinct)',
      of: { case: 'lib.permit.distinct', c },
      per: { case: 'lib.write.distinct', c },
    },
    {
      id: `permit/shared c=${c}`,
      label: 'permit cycle (one semaphore of 16) ÷ read cycle (one hot resource)',
      of: { case: 'lib.permit.shared', c },
      per: { case: 'lib.read.hot', c },
    },
  );
  // Server CPU of a lock cycle against that of one ceiling commit: a cycle is two durable commits,
  // so this is printed for information
  for (const mode of ['write', 'read'] as const) {
    targets.push({
      id: `cycle/${mode} server-cpu c=${c}`,
      label: `server CPU per ${mode} cycle (distinct) ÷ per ceiling commit (retired)`,
      of: { case: `lib.${mode}.distinct`, c, metric: 'serverCpuUsPerOp' },
      per: { case: CEILING, c, metric: 'serverCpuUsPerOp' },
    });
  }
}

export const throughput: Family = {
  groups: ['ceiling', 'lib'],
  roundCases: ({ raws, locks }) => [
    {
      id: CEILING,
      group: 'ceiling',
      label: 'ceiling: autocommit 1-row UPDATE by PK (raw mysql2)',
      op: async (w) => void (await raws[w]!.query('UPDATE bench_ceiling SET v = v + 1 WHERE id = ?', [w + 1])),
    },
    {
      id: 'lib.write.distinct',
      group: 'lib',
      label: 'lib: tryAcquireWrite+release, distinct resources',
      op: cycle(locks, 'write', (w) => `dw-${w}`),
      ratios: halfCeiling,
    },
    {
      id: 'lib.read.distinct',
      group: 'lib',
      label: 'lib: tryAcquireRead+release, distinct resources',
      op: cycle(locks, 'read', (w) => `dr-${w}`),
      ratios: halfCeiling,
    },
    {
      id: 'lib.permit.distinct',
      group: 'lib',
      label: 'lib: tryAcquirePermit+release, distinct semaphores',
      op: permitCycle(locks, 1, (w) => `dp-${w}`),
      ratios: halfCeiling,
    },
    {
      id: 'lib.permit.shared',
      group: 'lib',
      label: 'lib: tryAcquirePermit+release, one semaphore of 16',
      op: permitCycle(locks, 16, () => 'hot-p'),
      ratios: halfCeiling,
    },
    {
      id: 'lib.write.hot',
      group: 'lib',
      label: 'lib: tryAcquireWrite+release, one hot resource',
      op: cycle(locks, 'write', () => 'hot-w'),
      ratios: halfCeiling,
    },
    {
      id: 'lib.read.hot',
      group: 'lib',
      label: 'lib: tryAcquireRead+release, one hot resource',
      op: cycle(locks, 'read', () => 'hot-r'),
      ratios: halfCeiling,
    },
  ],
  targets,
};
