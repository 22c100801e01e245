// The fenced operation (acquire, then business write + release in one commit) against the same
// business write in a plain knex transaction with no lock.
import type { Knex } from 'knex';
import type { Family } from '../lib/family.js';
import type { Target } from '../lib/targets.js';
import { CEILING } from './throughput.js';

/** The business write of every fenced case: one row of bench_account by primary key. */
export const businessUpdate = (trx: Knex.Transaction, id: number): Promise<unknown> =>
  trx.raw('UPDATE bench_account SET balance = balance + 1 WHERE id = ?', [id]);

const targets: Target[] = [];
for (const c of [1, 16]) {
  const fencedOverPlain = { of: { case: 'fenced.write.distinct', c }, per: { case: 'plain.txn.distinct', c } };
  // Two durable commits against one: 0.5 is the limit. A floor against regressions, not a goal.
  targets.push({
    id: `fenced/floor c=${c}`,
    label: 'fenced withWriteLock ÷ plain txn (distinct), regression floor',
    ...fencedOverPlain,
    atLeast: 0.37,
  });
}

export const fenced: Family = {
  groups: ['fenced'],
  roundCases: ({ knex, locks }) => {
    const ratios = (plain: string) => [
      { name: 'x ceiling/2', to: CEILING, factor: 0.5 },
      { name: 'x plain tx', to: plain },
    ];
    return [
      {
        id: 'fenced.write.distinct',
        group: 'fenced',
        label: 'fenced withWriteLock + 1-row UPDATE, distinct',
        op: (w) => locks.withWriteLock(`fw-${w}`, (trx) => businessUpdate(trx, w + 1)).then(() => true),
        ratios: ratios('plain.txn.distinct'),
      },
      {
        id: 'plain.txn.distinct',
        group: 'fenced',
        label: 'plain knex transaction, same UPDATE, distinct',
        op: (w) => knex.transaction((trx) => businessUpdate(trx, w + 1)).then(() => true),
      },
      {
        id: 'fenced.write.hot',
        group: 'fenced',
        label: 'fenced withWriteLock + 1-row UPDATE, one hot',
        op: () => locks.withWriteLock('fw-hot', (trx) => businessUpdate(trx, 1000)).then(() => true),
        ratios: ratios('plain.txn.hot'),
      },
      {
        id: 'plain.txn.hot',
        group: 'fenced',
        label: 'plain knex transaction, same UPDATE, one hot',
        op: () => knex.transaction((trx) => businessUpdate(trx, 1000)).then(() => true),
      },
    ];
  },
  targets,
};
