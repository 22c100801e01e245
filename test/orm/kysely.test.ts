// The fence on a Kysely transaction (MysqlDialect on a mysql2 pool).
// covers: src/adapters/index.ts
import { CompiledQuery, Kysely, MysqlDialect, sql, type Generated, type Transaction } from 'kysely';
import { createPool } from 'mysql2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databaseUrl, parseMysqlUrl } from '../../harness/database.js';
import { createLockManager, LockInvariantError, type FenceExecutor, type Grant } from '../../src/index.js';
import { useTestDatabase } from '../support/db.js';
import { grantRow, invariantViolations } from '../support/state.js';
import { fromKysely } from '../../src/adapters/index.js';
import { fenceSuite } from './support/suite.js';

const db = useTestDatabase(import.meta.filename);

// docs/orms.md recipe: begin
interface Database {
  loans: { id: string; repaid_cents: number };
  payments: { id: Generated<number>; loan_id: string; amount_cents: number };
}

/** Kysely on a mysql2 pool to the database at `url`, e.g. mysql://app:secret@db.internal:3306/app. */
function connect(url: string): Kysely<Database> {
  return new Kysely<Database>({ dialect: new MysqlDialect({ pool: createPool(url) }) });
}

async function repay(kysely: Kysely<Database>, grant: Grant, loanId: string, amount: number): Promise<void> {
  await kysely.transaction().execute(async (trx) => {
    await trx
      .insertInto('loans')
      .values({ id: loanId, repaid_cents: amount })
      .onDuplicateKeyUpdate({ repaid_cents: sql`repaid_cents + ${amount}` })
      .execute();
    await trx.insertInto('payments').values({ loan_id: loanId, amount_cents: amount }).execute();
    await grant.fence(fromKysely(trx)); // last statement: LockLostError (and a rollback) if the grant was lost
  });
}
// docs/orms.md recipe: end

/** The recipe's Kysely has mysql2's default, CLIENT_FOUND_ROWS; the test's own has it off. */
function connectWith(foundRows: boolean, url = db.url): Kysely<Database> {
  if (foundRows) return connect(databaseUrl(url, db.name));
  const pool = createPool({ ...parseMysqlUrl(url), database: db.name, connectionLimit: 2, flags: ['-FOUND_ROWS'] });
  return new Kysely<Database>({ dialect: new MysqlDialect({ pool }) });
}

fenceSuite({
  name: 'Kysely',
  db,
  recipes: [import.meta.filename],
  packages: ['kysely', 'mysql2'],
  async connect({ foundRows, url }) {
    const kysely = connectWith(foundRows, url);
    return {
      repay: (grant, loanId, amount) => repay(kysely, grant, loanId, amount),
      inTransaction: (body) => kysely.transaction().execute((trx) => body(fromKysely(trx))),
      adaptClient: () => fromKysely(kysely as unknown as Parameters<typeof fromKysely>[0]),
      close: () => kysely.destroy(),
    };
  },
});

describe('an executor that does not resolve to the affected-row count', () => {
  let kysely: Kysely<Database>;

  beforeAll(() => {
    kysely = connectWith(true);
  });

  afterAll(async () => {
    await kysely?.destroy();
  });

  it('makes fence() throw LockInvariantError, and the transaction rolls the release back', async () => {
    const locks = createLockManager({ knex: db.knex });
    const grant = await locks.acquireWrite('bigint-executor');
    // The easy mistake with Kysely: handing on numAffectedRows, a bigint (2n), as it is.
    const bigintExecutor = (trx: Transaction<Database>) =>
      (async (text: string, params: Parameters<FenceExecutor>[1]) =>
        (await trx.executeQuery(CompiledQuery.raw(text, [...params]))).numAffectedRows) as unknown as FenceExecutor;
    const err = await kysely
      .transaction()
      .execute((trx) => grant.fence(bigintExecutor(trx)))
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(LockInvariantError);
    expect(String((err as Error).message)).toMatch(/resolved to 2 \(a bigint\)/);
    // The fence's UPDATE did run; the rejected transaction rolled it back.
    expect(await grantRow(db.knex, grant.id)).toMatchObject({ status: 0 });
    expect(await grant.release()).toBe(true);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });
});
