// The fence on a Sequelize managed transaction (dialect mysql, which runs on mysql2).
import { QueryTypes, Sequelize, type Transaction } from 'sequelize';
import { parseMysqlUrl } from '../../harness/database.js';
import type { FenceExecutor, Grant } from '../../src/index.js';
import { useTestDatabase } from '../support/db.js';
import { fromSequelize } from '../../src/adapters/index.js';
import { fenceSuite } from './support/suite.js';

const db = useTestDatabase(import.meta.filename);

// docs/orms.md recipe: begin
/**
 * The fence's executor for a Sequelize transaction: an UPDATE query resolves to [undefined, affectedRows].
 * Replacements are escaped into the statement by Sequelize: safe here, the fence's values are numbers and hex digits.
 */
function sequelizeExecutor(sequelize: Sequelize, transaction: Transaction): FenceExecutor {
  return async (sql, params) =>
    (await sequelize.query(sql, { replacements: params, transaction, type: QueryTypes.UPDATE }))[1];
}

async function repay(sequelize: Sequelize, grant: Grant, loanId: string, amount: number): Promise<void> {
  try {
    await sequelize.transaction(async (transaction) => {
      await sequelize.query(
        'INSERT INTO loans (id, repaid) VALUES (?, ?) ON DUPLICATE KEY UPDATE repaid = repaid + ?',
        { replacements: [loanId, amount, amount], transaction },
      );
      await sequelize.query('INSERT INTO payments (loan_id, amount) VALUES (?, ?)', {
        replacements: [loanId, amount],
        transaction,
      });
      await grant.fence(sequelizeExecutor(sequelize, transaction)); // last statement: LockLostError (and a rollback) if the grant was lost
    });
    grant.committed(); // that commit released the grant
  } finally {
    await grant.release(); // no-op after committed(); releases the grant after a rollback
  }
}
// docs/orms.md recipe: end

fenceSuite({
  name: 'Sequelize',
  db,
  recipes: [import.meta.filename],
  packages: ['sequelize', 'mysql2'],
  async connect({ foundRows, url = db.url }) {
    const { host, port, user, password } = parseMysqlUrl(url);
    const sequelize = new Sequelize(db.name, user, password, {
      dialect: 'mysql',
      host,
      port,
      logging: false,
      pool: { max: 2 },
      // Sequelize's own default is -FOUND_ROWS: both are set explicitly here.
      dialectOptions: { flags: [foundRows ? 'FOUND_ROWS' : '-FOUND_ROWS'] },
    });
    return {
      repay: (grant, loanId, amount) => repay(sequelize, grant, loanId, amount),
      inTransaction: (body) => sequelize.transaction((transaction) => body(fromSequelize(sequelize, transaction))),
      adaptClient: () => fromSequelize(sequelize, undefined as unknown as Transaction),
      close: () => sequelize.close(),
    };
  },
});
