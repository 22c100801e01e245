// The fence on a TypeORM transaction (mysql driver, which runs on mysql2). No entities: the fence
// and these business writes are plain SQL through the transaction's EntityManager.
// covers: src/adapters/index.ts
import { DataSource } from 'typeorm';
import { databaseUrl, parseMysqlUrl } from '../../harness/database.js';
import type { Grant } from '../../src/index.js';
import { useTestDatabase } from '../support/db.js';
import { fromTypeORM } from '../../src/adapters/index.js';
import { fenceSuite } from './support/suite.js';

const db = useTestDatabase(import.meta.filename);

// docs/orms.md recipe: begin
/** A DataSource on the database at `url`, e.g. mysql://app:secret@db.internal:3306/app. */
function connect(url: string): Promise<DataSource> {
  return new DataSource({ type: 'mysql', url }).initialize();
}

async function repay(dataSource: DataSource, grant: Grant, loanId: string, amount: number): Promise<void> {
  await dataSource.transaction(async (manager) => {
    await manager.query(
      'INSERT INTO loans (id, repaid_cents) VALUES (?, ?) ON DUPLICATE KEY UPDATE repaid_cents = repaid_cents + ?',
      [loanId, amount, amount],
    );
    await manager.query('INSERT INTO payments (loan_id, amount_cents) VALUES (?, ?)', [loanId, amount]);
    await grant.fence(fromTypeORM(manager)); // last statement: LockLostError (and a rollback) if the grant was lost
  });
}
// docs/orms.md recipe: end

fenceSuite({
  name: 'TypeORM',
  db,
  recipes: [import.meta.filename],
  packages: ['typeorm', 'mysql2'],
  async connect({ foundRows, url = db.url }) {
    // The recipe's DataSource has mysql2's default, CLIENT_FOUND_ROWS; the test's own has it off.
    const { host, port, user, password } = parseMysqlUrl(url);
    const dataSource = foundRows
      ? await connect(databaseUrl(url, db.name))
      : await new DataSource({
          type: 'mysql',
          host,
          port,
          username: user,
          password,
          database: db.name,
          poolSize: 2,
          flags: ['-FOUND_ROWS'],
        }).initialize();
    return {
      repay: (grant, loanId, amount) => repay(dataSource, grant, loanId, amount),
      inTransaction: (body) => dataSource.transaction((manager) => body(fromTypeORM(manager))),
      adaptClient: () => fromTypeORM(dataSource.manager),
      close: () => dataSource.destroy(),
    };
  },
});
