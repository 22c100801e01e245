// The acquire without stored procedures (plain statements, five round trips) against the
// procedure (one round trip), on the same database in the same rounds: the cost of
// `procedures: false`, for the bare cycle and for the fenced operation. Under 10 % would make plain
// statements the only path (one path is simpler); over it, they stay an option.
import { createLockManager } from '../../src/index.js';
import type { Family } from '../lib/family.js';
import type { Target } from '../lib/targets.js';
import { businessUpdate } from './fenced.js';

const targets: Target[] = [];
for (const c of [1, 16]) {
  targets.push({
    id: `statements/cycle c=${c}`,
    label: 'write cycle, plain statements ÷ procedure',
    atLeast: 0.9,
    of: { case: 'plain-sql.write.distinct', c },
    per: { case: 'lib.write.distinct', c },
  });
  targets.push({
    id: `statements/fenced c=${c}`,
    label: 'fenced withWriteLock, plain statements ÷ procedure',
    atLeast: 0.9,
    of: { case: 'plain-sql.fenced.distinct', c },
    per: { case: 'fenced.write.distinct', c },
  });
}

export const procedures: Family = {
  groups: ['procedures'],
  roundCases: ({ knex }) => {
    const plain = createLockManager({ knex, procedures: false });
    return [
      {
        id: 'plain-sql.write.distinct',
        group: 'procedures',
        label: 'procedures: false, tryAcquireWrite+release, distinct',
        op: async (w) => {
          const g = await plain.tryAcquireWrite(`pw-${w}`);
          if (!g) return false;
          await g.release();
        },
        ratios: [{ name: 'x procedure', to: 'lib.write.distinct' }],
      },
      {
        id: 'plain-sql.fenced.distinct',
        group: 'procedures',
        label: 'procedures: false, fenced withWriteLock + 1-row UPDATE, distinct',
        op: (w) => plain.withWriteLock(`pf-${w}`, (trx) => businessUpdate(trx, w + 1)).then(() => true),
        ratios: [{ name: 'x procedure', to: 'fenced.write.distinct' }],
      },
    ];
  },
  targets,
};
