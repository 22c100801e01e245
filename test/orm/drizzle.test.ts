// The fence on a Drizzle transaction (drizzle-orm/mysql2 on a mysql2 promise pool). sql.raw()
// takes no parameters for the fence's `?` placeholders: the executor cuts the statement at them and
// joins the pieces with sql.param() values, which Drizzle hands to mysql2 as the query's values.
import { sql } from 'drizzle-orm';
import { int, mysqlTable, varchar, type MySqlTransaction } from 'drizzle-orm/mysql-core';
import {
  drizzle,
  type MySql2Database,
  type MySql2PreparedQueryHKT,
  type MySql2QueryResultHKT,
} from 'drizzle-orm/mysql2';
import mysql from 'mysql2/promise';
import { parseMysqlUrl } from '../../harness/database.js';
import type { FenceExecutor, Grant } from '../../src/index.js';
import { useTestDatabase } from '../support/db.js';
import { fromDrizzle } from '../../src/adapters/index.js';
import { fenceSuite } from './support/suite.js';

const db = useTestDatabase(import.meta.filename);

// docs/orms.md recipe: begin
const loans = mysqlTable('loans', { id: varchar('id', { length: 32 }).primaryKey(), repaid: int('repaid').notNull() });
const payments = mysqlTable('payments', {
  id: int('id').autoincrement().primaryKey(),
  loanId: varchar('loan_id', { length: 32 }).notNull(),
  amount: int('amount').notNull(),
});

/** A Drizzle mysql2 transaction, whatever the schema. */
type DrizzleTransaction = MySqlTransaction<MySql2QueryResultHKT, MySql2PreparedQueryHKT, any, any>;

/** The fence's executor for a Drizzle mysql2 transaction: each `?` placeholder becomes an sql.param() value. */
function drizzleExecutor(tx: DrizzleTransaction): FenceExecutor {
  return async (text, params) => {
    const pieces = text.split('?');
    const statement = sql.join(
      pieces.flatMap((piece, i) => (i === 0 ? [sql.raw(piece)] : [sql.param(params[i - 1]), sql.raw(piece)])),
    );
    const [header] = await tx.execute(statement);
    return header.affectedRows;
  };
}

async function repay(orm: MySql2Database, grant: Grant, loanId: string, amount: number): Promise<void> {
  try {
    await orm.transaction(async (tx) => {
      await tx
        .insert(loans)
        .values({ id: loanId, repaid: amount })
        .onDuplicateKeyUpdate({ set: { repaid: sql`${loans.repaid} + ${amount}` } });
      await tx.insert(payments).values({ loanId, amount });
      await grant.fence(drizzleExecutor(tx)); // last statement: LockLostError (and a rollback) if the grant was lost
    });
    grant.committed(); // that commit released the grant
  } finally {
    await grant.release(); // no-op after committed(); releases the grant after a rollback
  }
}
// docs/orms.md recipe: end

fenceSuite({
  name: 'Drizzle',
  db,
  recipes: [import.meta.filename],
  packages: ['drizzle-orm', 'mysql2'],
  async connect({ foundRows, url = db.url }) {
    const pool = mysql.createPool({
      ...parseMysqlUrl(url),
      database: db.name,
      connectionLimit: 2,
      flags: [foundRows ? 'FOUND_ROWS' : '-FOUND_ROWS'],
    });
    const orm = drizzle({ client: pool });
    return {
      repay: (grant, loanId, amount) => repay(orm, grant, loanId, amount),
      inTransaction: (body) => orm.transaction((tx) => body(fromDrizzle(tx))),
      adaptClient: () => fromDrizzle(orm as unknown as Parameters<typeof fromDrizzle>[0]),
      close: () => pool.end(),
    };
  },
});
