// The stock verifier: sales under withWriteLock PASS; a lost deduction, an oversell or a negative
// stock FAIL; and the deliberately unsafe sale (lock inside the transaction) is caught losing a deduction.
// covers: demo/verify/stock-verifier.ts
import { beforeEach, describe, expect, it } from 'vitest';
import { createLockManager } from '../../src/index.js';
import { sellSafely, sellUnsafely } from '../../demo/stock/operations.js';
import { createStockTables } from '../../demo/stock/schema.js';
import { seededRandom } from '../../demo/random.js';
import { verifyStock } from '../../demo/verify/stock-verifier.js';
import { useTestDatabase } from '../support/db.js';
import { failing } from './lending-fixture.js';

const db = useTestDatabase(import.meta.filename);
const UNITS = 5;

describe('stock verifier', () => {
  beforeEach(async () => {
    await db.knex.raw('DROP TABLE IF EXISTS stock');
    await db.knex.raw('DROP TABLE IF EXISTS deductions');
    await db.knex.raw('DELETE FROM t_lock_log');
    await db.knex.raw('DELETE FROM t_read_write_lock');
    await createStockTables(db.knex, UNITS);
  });

  async function sellAllSafely(): Promise<void> {
    const locks = createLockManager({ knex: db.knex, owner: 'seller' });
    const rnd = seededRandom(1);
    const results = await Promise.all(
      Array.from({ length: 3 }, async () => {
        const mine: string[] = [];
        for (;;) {
          const r = await sellSafely(locks, 'seller', rnd);
          mine.push(r);
          if (r === 'sold-out') return mine;
        }
      }),
    );
    expect(results.flat().filter((r) => r === 'sold')).toHaveLength(UNITS);
  }

  it('passes concurrent sales under withWriteLock', async () => {
    await sellAllSafely();
    const verdict = await verifyStock(db.knex);
    expect(failing(verdict)).toEqual([]);
    expect(verdict.checks.map((c) => c.summary).join('\n')).toContain(`${UNITS} deductions for ${UNITS} units`);
    expect(verdict.checks.map((c) => c.figures)).toEqual([
      { initial: UNITS, final: 0 },
      { lowest: 0 },
      { deductions: UNITS, units: UNITS },
      { levelsSold: UNITS, lostDeductions: 0, levelsNeverSold: 0 },
      expect.objectContaining({ live: 0, countLogMismatches: 0 }),
    ]);
  });

  it('fails on a sale recorded from a level already sold (oversell behind a final stock of 0)', async () => {
    await sellAllSafely();
    await db.knex.raw(
      `INSERT INTO deductions (sku, grant_id, worker, qty_before, qty_after, committed_at)
       SELECT sku, grant_id, 'double', qty_before, qty_after, committed_at FROM deductions WHERE qty_before = 3`,
    );
    const verdict = await verifyStock(db.knex);
    expect(failing(verdict)).toEqual([
      `Exactly ${UNITS} successful deductions`,
      'Each unit sold once (no lost deduction)',
    ]);
    expect(verdict.checks.map((c) => c.problems.join('\n')).join('\n')).toContain(
      '2 sales all read stock 3 and wrote 2',
    );
    expect(verdict.checks[2]!.figures).toEqual({ deductions: UNITS + 1, units: UNITS });
    expect(verdict.checks[3]!.figures).toEqual({ levelsSold: UNITS, lostDeductions: 1, levelsNeverSold: 0 });
  });

  it('fails on a negative stock', async () => {
    await sellAllSafely();
    await db.knex.raw('UPDATE stock SET qty = -1');
    expect(failing(await verifyStock(db.knex))).toEqual(['Final stock is exactly 0', 'Stock never negative']);
  });

  it('catches the unsafe sale losing deductions', async () => {
    const locks = createLockManager({ knex: db.knex, owner: 'unsafe' });
    const rnd = seededRandom(2);
    await Promise.all([db.knex.raw('SELECT 1'), db.knex.raw('SELECT 1'), db.knex.raw('SELECT 1')]); // warm the pool
    // Three sales start together: all read 5 before any of them writes (the write waits for the
    // authorisation step), so the lock taken around the UPDATE alone cannot save them.
    const results = await Promise.all([1, 2, 3].map(() => sellUnsafely(db.knex, locks, 'unsafe', rnd)));
    expect(results).toEqual(['sold', 'sold', 'sold']);
    const verdict = await verifyStock(db.knex);
    expect(failing(verdict)).toContain('Each unit sold once (no lost deduction)');
    const [[row]] = (await db.knex.raw('SELECT qty FROM stock')) as [Array<{ qty: number }>, unknown];
    expect(row!.qty).toBeGreaterThan(UNITS - 3); // three sold, fewer than three deducted
  });
});
