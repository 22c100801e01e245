// The fence on one mysql2 promise connection (the pool recipe is the README's, tested in
// test/fence-mysql2.test.ts).
// covers: src/adapters/index.ts
import mysql, { type Connection } from 'mysql2/promise';
import { databaseUrl, parseMysqlUrl } from '../../harness/database.js';
import type { Grant } from '../../src/index.js';
import { useTestDatabase } from '../support/db.js';
import { fromMysql2 } from '../../src/adapters/index.js';
import { fenceSuite } from './support/suite.js';

const db = useTestDatabase(import.meta.filename);

// docs/orms.md recipe: begin
/** One connection to the database at `url`, e.g. mysql://app:secret@db.internal:3306/app. */
function connect(url: string): Promise<Connection> {
  return mysql.createConnection(url);
}

async function repay(conn: Connection, grant: Grant, loanId: string, amount: number): Promise<void> {
  await conn.beginTransaction();
  try {
    await conn.execute(
      'INSERT INTO loans (id, repaid_cents) VALUES (?, ?) ON DUPLICATE KEY UPDATE repaid_cents = repaid_cents + ?',
      [loanId, amount, amount],
    );
    await conn.execute('INSERT INTO payments (loan_id, amount_cents) VALUES (?, ?)', [loanId, amount]);
    await grant.fence(fromMysql2(conn)); // last statement: LockLostError if the grant was lost
    await conn.commit();
  } catch (err) {
    await conn.rollback();
    throw err;
  }
}
// docs/orms.md recipe: end

fenceSuite({
  name: 'mysql2 (one connection)',
  db,
  recipes: [import.meta.filename],
  packages: ['mysql2'],
  async connect({ foundRows, url = db.url }) {
    // The recipe's connection has mysql2's default, CLIENT_FOUND_ROWS; the test's own has it off.
    const conn = foundRows
      ? await connect(databaseUrl(url, db.name))
      : await mysql.createConnection({ ...parseMysqlUrl(url), database: db.name, flags: ['-FOUND_ROWS'] });
    return {
      repay: (grant, loanId, amount) => repay(conn, grant, loanId, amount),
      async inTransaction(body) {
        await conn.beginTransaction();
        try {
          await body(fromMysql2(conn));
          await conn.commit();
        } catch (err) {
          await conn.rollback();
          throw err;
        }
      },
      adaptClient() {
        const pool = mysql.createPool({ ...parseMysqlUrl(db.url), database: db.name });
        try {
          return fromMysql2(pool);
        } finally {
          void pool.end();
        }
      },
      close: () => conn.end(),
    };
  },
});
