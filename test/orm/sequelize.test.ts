// The fence on a Sequelize managed transaction (dialect mysql, which runs on mysql2).
// covers: src/adapters/index.ts
import { Sequelize, type Transaction } from 'sequelize';
import { databaseUrl, parseMysqlUrl } from '../../harness/database.js';
import type { Grant } from '../../src/index.js';
import { useTestDatabase } from '../support/db.js';
import { fromSequelize } from '../../src/adapters/index.js';
import { fenceSuite } from './support/suite.js';

const db = useTestDatabase(import.meta.filename);

// docs/orms.md recipe: begin
/** Sequelize on the database at `url`, e.g. mysql://app:secret@db.internal:3306/app. */
function connect(url: string): Sequelize {
  return new Sequelize(url, { dialect: 'mysql', logging: false });
}

async function repay(sequelize: Sequelize, grant: Grant, loanId: string, amount: number): Promise<void> {
  await sequelize.transaction(async (transaction) => {
    await sequelize.query(
      'INSERT INTO loans (id, repaid_cents) VALUES (?, ?) ON DUPLICATE KEY UPDATE repaid_cents = repaid_cents + ?',
      {
        replacements: [loanId, amount, amount],
        transaction,
      },
    );
    await sequelize.query('INSERT INTO payments (loan_id, amount_cents) VALUES (?, ?)', {
      replacements: [loanId, amount],
      transaction,
    });
    await grant.fence(fromSequelize(sequelize, transaction)); // last statement: LockLostError (and a rollback) if the grant was lost
  });
}
// docs/orms.md recipe: end

fenceSuite({
  name: 'Sequelize',
  db,
  recipes: [import.meta.filename],
  packages: ['sequelize', 'mysql2'],
  async connect({ foundRows, url = db.url }) {
    // The recipe's Sequelize has its own default, -FOUND_ROWS; the test's own has it on.
    const { host, port, user, password } = parseMysqlUrl(url);
    const sequelize = foundRows
      ? new Sequelize(db.name, user, password, {
          dialect: 'mysql',
          host,
          port,
          logging: false,
          pool: { max: 2 },
          dialectOptions: { flags: ['FOUND_ROWS'] },
        })
      : connect(databaseUrl(url, db.name));
    return {
      repay: (grant, loanId, amount) => repay(sequelize, grant, loanId, amount),
      inTransaction: (body) => sequelize.transaction((transaction) => body(fromSequelize(sequelize, transaction))),
      adaptClient: () => fromSequelize(sequelize, undefined as unknown as Transaction),
      close: () => sequelize.close(),
    };
  },
});
