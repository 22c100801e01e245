// The fence on a Drizzle transaction (drizzle-orm/mysql2 on a mysql2 promise pool), through
// fromDrizzle: it hands Drizzle the fence as an already-compiled statement with bound values.
// covers: src/adapters/index.ts
import { sql } from 'drizzle-orm';
import { int, mysqlTable, varchar } from 'drizzle-orm/mysql-core';
import { drizzle, type MySql2Database } from 'drizzle-orm/mysql2';
import mysql, { type Pool } from 'mysql2/promise';
import { databaseUrl, parseMysqlUrl } from '../../harness/database.js';
import type { Grant } from '../../src/index.js';
import { useTestDatabase } from '../support/db.js';
import { fromDrizzle } from '../../src/adapters/index.js';
import { fenceSuite } from './support/suite.js';

const db = useTestDatabase(import.meta.filename);

// docs/orms.md recipe: begin
/** Drizzle on a mysql2 pool to the database at `url`, e.g. mysql://app:secret@db.internal:3306/app. */
function connect(url: string): MySql2Database & { $client: Pool } {
  return drizzle({ client: mysql.createPool(url) });
}

const loans = mysqlTable('loans', {
  id: varchar('id', { length: 32 }).primaryKey(),
  repaid: int('repaid_cents').notNull(),
});
const payments = mysqlTable('payments', {
  id: int('id').autoincrement().primaryKey(),
  loanId: varchar('loan_id', { length: 32 }).notNull(),
  amount: int('amount_cents').notNull(),
});

async function repay(orm: MySql2Database, grant: Grant, loanId: string, amount: number): Promise<void> {
  await orm.transaction(async (tx) => {
    await tx
      .insert(loans)
      .values({ id: loanId, repaid: amount })
      .onDuplicateKeyUpdate({ set: { repaid: sql`${loans.repaid} + ${amount}` } });
    await tx.insert(payments).values({ loanId, amount });
    await grant.fence(fromDrizzle(tx)); // last statement: LockLostError (and a rollback) if the grant was lost
  });
}
// docs/orms.md recipe: end

fenceSuite({
  name: 'Drizzle',
  db,
  recipes: [import.meta.filename],
  packages: ['drizzle-orm', 'mysql2'],
  async connect({ foundRows, url = db.url }) {
    // The recipe's pool has mysql2's default, CLIENT_FOUND_ROWS; the test's own has it off.
    const orm = foundRows
      ? connect(databaseUrl(url, db.name))
      : drizzle({
          client: mysql.createPool({
            ...parseMysqlUrl(url),
            database: db.name,
            connectionLimit: 2,
            flags: ['-FOUND_ROWS'],
          }),
        });
    const pool = orm.$client;
    return {
      repay: (grant, loanId, amount) => repay(orm, grant, loanId, amount),
      inTransaction: (body) => orm.transaction((tx) => body(fromDrizzle(tx))),
      adaptClient: () => fromDrizzle(orm as unknown as Parameters<typeof fromDrizzle>[0]),
      close: () => pool.end(),
    };
  },
});
