// The fence on a knex transaction the application opens itself (withWriteLock does this for you).
// covers: src/adapters/index.ts, src/lock/fence/fence-executor.ts
import knex, { type Knex } from 'knex';
import { connectKnex, databaseUrl } from '../../harness/database.js';
import type { Grant } from '../../src/index.js';
import { useTestDatabase } from '../support/db.js';
import { fromKnex } from '../../src/adapters/index.js';
import { fenceSuite } from './support/suite.js';

const db = useTestDatabase(import.meta.filename);

// docs/orms.md recipe: begin
/** The app's knex on the database at `url`, e.g. mysql://app:secret@db.internal:3306/app. */
function connect(url: string): Knex {
  return knex({ client: 'mysql2', connection: url });
}

async function repay(knex: Knex, grant: Grant, loanId: string, amount: number): Promise<void> {
  await knex.transaction(async (trx) => {
    await trx('loans')
      .insert({ id: loanId, repaid_cents: amount })
      .onConflict('id')
      .merge({ repaid_cents: trx.raw('repaid_cents + ?', [amount]) });
    await trx('payments').insert({ loan_id: loanId, amount_cents: amount });
    await grant.fence(fromKnex(trx)); // last statement: LockLostError (and a rollback) if the grant was lost
  });
}
// docs/orms.md recipe: end

fenceSuite({
  name: 'knex',
  db,
  recipes: [import.meta.filename],
  packages: ['knex', 'mysql2'],
  async connect({ foundRows, url = db.url }) {
    // The recipe's knex has mysql2's default, CLIENT_FOUND_ROWS; the test's own has it off.
    const knex = foundRows
      ? connect(databaseUrl(url, db.name))
      : connectKnex(url, db.name, { poolMax: 2, flags: ['-FOUND_ROWS'] });
    return {
      repay: (grant, loanId, amount) => repay(knex, grant, loanId, amount),
      inTransaction: (body) => knex.transaction((trx) => body(fromKnex(trx))),
      adaptClient: () => fromKnex(knex as unknown as Knex.Transaction),
      close: () => knex.destroy(),
    };
  },
});
