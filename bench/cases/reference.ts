// The reference article's flow (bench/reference/flow.ts), the design this library replaces.
import type { Family, Op } from '../lib/family.js';
import type { Target } from '../lib/targets.js';
import { createReferenceTables, refAcquire, refFenced, refRelease } from '../reference/flow.js';
import { businessUpdate } from './fenced.js';
import { CEILING } from './throughput.js';

const targets: Target[] = [];
for (const c of [1, 16]) {
  targets.push({
    id: `vs-reference/write c=${c}`,
    label: 'write cycle ÷ reference write cycle',
    of: { case: 'lib.write.distinct', c },
    per: { case: 'ref.write.distinct', c },
    atLeast: 1.2,
  });
  targets.push({
    id: `vs-reference/read c=${c}`,
    label: 'read cycle ÷ reference read cycle',
    of: { case: 'lib.read.distinct', c },
    per: { case: 'ref.read.distinct', c },
    atLeast: 1.2,
  });
  targets.push({
    id: `vs-reference/fenced c=${c}`,
    label: 'fenced op ÷ reference fenced op',
    of: { case: 'fenced.write.distinct', c },
    per: { case: 'ref.fenced.distinct', c },
    atLeast: 1.4,
  });
}

export const reference: Family = {
  groups: ['ref'],
  roundCases: async ({ knex }) => {
    await createReferenceTables(knex);
    const refCycle =
      (mode: 'write' | 'read'): Op =>
      async (w) => {
        const id = await refAcquire(knex, `r${mode}-${w}`, mode);
        if (id === null) return false;
        await refRelease(knex, `r${mode}-${w}`, mode, id);
      };
    return [
      {
        id: 'ref.write.distinct',
        group: 'ref',
        label: 'reference flow: write acquire+release, distinct',
        op: refCycle('write'),
        ratios: [{ name: 'x ceiling/2', to: CEILING, factor: 0.5 }],
      },
      {
        id: 'ref.read.distinct',
        group: 'ref',
        label: 'reference flow: read acquire+release, distinct',
        op: refCycle('read'),
        ratios: [{ name: 'x ceiling/2', to: CEILING, factor: 0.5 }],
      },
      {
        id: 'ref.fenced.distinct',
        group: 'ref',
        label: 'reference fenced op (3 commits), distinct',
        op: (w) => refFenced(knex, `rf-${w}`, (trx) => businessUpdate(trx, w + 1)),
        ratios: [{ name: 'x ceiling/3', to: CEILING, factor: 1 / 3 }],
      },
    ];
  },
  targets,
};
