// Issue 14, target 5, measured before it is built: what a one-commit fenced operation for short
// sections would cost. The business transaction takes the lock itself: a guarded UPDATE of the
// resource row as its first statement (it changes a row only when nobody holds the lock, and then
// holds the row's InnoDB lock until the commit), the business write, and a grant row logged already
// released, all in one commit. A held lock is reported as not done here (a library would fall back
// to a durable grant). This is a prototype in the benchmark only, not an API: docs/design.md says
// which guarantees it keeps and which it does not yet, and why it is not built.
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { RELEASED_BY, STATUS } from '../../src/types.js';
import type { Family } from '../lib/family.js';
import type { Target } from '../lib/targets.js';
import { businessUpdate } from './fenced.js';

/** Takes a free write lock for the rest of the transaction: 1 row changed when taken. */
const TAKE_WRITE = `UPDATE t_read_write_lock SET version = version + 1
 WHERE resource_id = ? AND w_count = 0 AND r_count = 0 AND (w_wait_until IS NULL OR w_wait_until < NOW(6))`;
/** The section's grant, logged as granted and released in the same commit. */
const LOG_SECTION = `INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token, released_at, released_by)
VALUES (?, 0, ${STATUS.released}, NOW(6), 1, 'bench', ?, NOW(6), ${RELEASED_BY.holder})`;

/**
 * Runs `work` as a one-commit section on `resource` (whose row must exist): false, with nothing
 * done, when a durable grant holds the lock. A section that finds another section holding the row
 * waits on its InnoDB lock and decides when that commits.
 */
export const section = (
  knex: Knex,
  resource: string,
  work: (trx: Knex.Transaction) => Promise<unknown>,
): Promise<boolean> =>
  knex.transaction(async (trx) => {
    const [taken] = (await trx.raw(TAKE_WRITE, [Buffer.from(resource)])) as unknown as [{ affectedRows: number }];
    if (taken.affectedRows !== 1) return false;
    await work(trx);
    await trx.raw(LOG_SECTION, [Buffer.from(resource), randomBytes(16)]);
    return true;
  });

/** A free resource row for each id, as after first use. */
export async function resourceRows(knex: Knex, ids: string[]): Promise<void> {
  await knex.raw(
    `INSERT IGNORE INTO t_read_write_lock (resource_id) VALUES ${ids.map(() => '(?)').join(', ')}`,
    ids.map((id) => Buffer.from(id)),
  );
}

const targets: Target[] = [1, 16].map((c) => ({
  id: `14.5 c=${c}`,
  label: 'one-commit section (prototype, not built) ÷ plain txn (distinct)',
  of: { case: 'onecommit.write.distinct', c },
  per: { case: 'plain.txn.distinct', c },
  atLeast: 0.7,
}));

export const oneCommit: Family = {
  groups: ['fenced'],
  roundCases: async ({ knex }) => {
    await resourceRows(knex, [...Array.from({ length: 16 }, (_, w) => `oc-${w}`), 'oc-hot']);
    const ratios = (plain: string) => [{ name: 'x plain tx', to: plain }];
    return [
      {
        id: 'onecommit.write.distinct',
        group: 'fenced',
        label: 'one-commit section prototype + 1-row UPDATE, distinct',
        op: (w) => section(knex, `oc-${w}`, (trx) => businessUpdate(trx, w + 1)),
        ratios: ratios('plain.txn.distinct'),
      },
      {
        id: 'onecommit.write.hot',
        group: 'fenced',
        label: 'one-commit section prototype + 1-row UPDATE, one hot',
        op: () => section(knex, 'oc-hot', (trx) => businessUpdate(trx, 1000)),
        ratios: ratios('plain.txn.hot'),
      },
    ];
  },
  targets,
};
