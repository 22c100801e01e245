// A small lending book with a little real history, made through the real lock manager: two
// repayments and a transfer chain on loan-0001, a transfer on loan-0002, and a repayment on loan-0004
// whose grant the reaper takes back mid-bank-call (backdated, no sleeping), so its commit is refused.
// Negative controls then break exactly one thing and expect exactly that check to FAIL.
import type { Knex } from 'knex';
import { expect } from 'vitest';
import { createLockManager, LockLostError } from '../../src/index.js';
import { reapStaleGrants } from '../../src/admin/index.js';
import { repay, transfer } from '../../demo/lending/operations.js';
import { createLendingTables } from '../../demo/lending/schema.js';
import { seedBook } from '../../demo/lending/seed.js';
import { seededRandom } from '../../demo/random.js';

export const INVESTORS = 12;
/** Claims are dealt to loans round robin: claims 1, 5, 9, ... fund loan-0001 of 4. */
export const CHAINED_CLAIM = 1;
export const UNTOUCHED_CLAIM = 5;

export interface Fixture {
  pausedGrantId: number;
  /** The original owner of CHAINED_CLAIM and its two buyers, in order. */
  owners: [number, number, number];
}

const TABLES = ['transfers', 'payments', 'repayments', 'claims', 'loans', 'investors', 'demo_faults'];

export async function buildFixture(db: Knex): Promise<Fixture> {
  for (const t of TABLES) await db.raw(`DROP TABLE IF EXISTS ${t}`);
  await db.raw('DELETE FROM t_lock_log');
  await db.raw('DELETE FROM t_read_write_lock');
  await createLendingTables(db);
  await seedBook(db, { loans: 4, investors: INVESTORS, claims: 40 }, seededRandom(7));
  const locks = createLockManager({ knex: db, owner: 'fixture' });
  const noBank = async (): Promise<void> => undefined;

  const [[claim]] = (await db.raw('SELECT investor_id FROM claims WHERE id = ?', [CHAINED_CLAIM])) as [
    Array<{ investor_id: number }>,
    unknown,
  ];
  const a = claim!.investor_id;
  const b = (a % INVESTORS) + 1;
  const c = (b % INVESTORS) + 1;

  expect(await locks.withWriteLock('loan-0001', (trx, g) => repay(trx, g, 'loan-0001', 'fixture', noBank))).toEqual({
    outcome: 'done',
  });
  expect(await locks.withReadLock('loan-0001', (trx, g) => transfer(trx, g, CHAINED_CLAIM, b, 2, 'fixture'))).toEqual({
    outcome: 'done',
  });
  expect(await locks.withReadLock('loan-0001', (trx, g) => transfer(trx, g, CHAINED_CLAIM, c, 0, 'fixture'))).toEqual({
    outcome: 'done',
  });
  expect(
    await locks.withReadLock('loan-0002', (trx, g) => transfer(trx, g, 2, (a % INVESTORS) + 3, 1, 'fixture')),
  ).toMatchObject({ outcome: expect.any(String) });
  expect(await locks.withWriteLock('loan-0001', (trx, g) => repay(trx, g, 'loan-0001', 'fixture', noBank))).toEqual({
    outcome: 'done',
  });

  // The paused repayment: while it is in the bank call its grant becomes stale (backdated) and the
  // reaper takes it; the repayment then writes its payments and must be refused at commit.
  let pausedGrantId = 0;
  // The bank call runs once more if the server rolls the first attempt back as a conflict (MariaDB
  // 11.6+ answers the refused commit's locking read with 1020); the grant is reaped only once.
  const paused = locks.withWriteLock('loan-0004', (trx, g) =>
    repay(trx, g, 'loan-0004', 'fixture', async () => {
      if (pausedGrantId !== 0) return;
      pausedGrantId = g.id;
      await db.raw('UPDATE t_lock_log SET create_time = create_time - INTERVAL 10 SECOND WHERE id = ?', [g.id]);
      const reaped = await reapStaleGrants(db, { staleAfterMs: 5_000 });
      expect(reaped.grants.map((x) => x.id)).toEqual([g.id]);
    }),
  );
  await expect(paused).rejects.toBeInstanceOf(LockLostError);
  await db('demo_faults').insert({
    kind: 'pause',
    worker: 'fixture',
    grant_id: pausedGrantId,
    loan_id: 'loan-0004',
    outcome: 'lock-lost',
  });
  return { pausedGrantId, owners: [a, b, c] };
}

/** Names of the failing checks of a verdict. */
export function failing(verdict: { checks: Array<{ name: string; pass: boolean }> }): string[] {
  return verdict.checks.filter((x) => !x.pass).map((x) => x.name);
}
