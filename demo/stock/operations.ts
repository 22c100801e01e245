// One sale: read the stock, authorise the payment (a short think time), write stock - 1.
// The new quantity is computed in the client from what was read, as most application code does,
// so a stale read becomes a lost deduction instead of being hidden by `qty = qty - 1`.
import type { Knex } from 'knex';
import { setTimeout as sleep } from 'node:timers/promises';
import type { LockManager } from '../../src/index.js';
import { randomInt, type Random } from '../random.js';
import { SKU } from './schema.js';

export type SaleResult = 'sold' | 'sold-out';

async function readQty(trx: Knex.Transaction): Promise<number> {
  const [[row]] = (await trx.raw('SELECT qty FROM stock WHERE sku = ?', [SKU])) as [Array<{ qty: number }>, unknown];
  if (!row) throw new Error(`no stock row ${SKU}`);
  return row.qty;
}

async function writeSale(trx: Knex.Transaction, grantId: number, worker: string, before: number): Promise<void> {
  await trx.raw('UPDATE stock SET qty = ? WHERE sku = ?', [before - 1, SKU]);
  await trx.raw(
    'INSERT INTO deductions (sku, grant_id, worker, qty_before, qty_after, committed_at) VALUES (?, ?, ?, ?, ?, UTC_TIMESTAMP(6))',
    [SKU, grantId, worker, before, before - 1],
  );
}

/** Correct: the lock contains the transaction, so the read inside it is current. */
export function sellSafely(locks: LockManager, worker: string, rnd: Random): Promise<SaleResult> {
  return locks.withWriteLock(
    SKU,
    async (trx, grant) => {
      const qty = await readQty(trx);
      if (qty <= 0) return 'sold-out';
      await sleep(randomInt(rnd, 2, 10)); // payment authorisation
      await writeSale(trx, grant.id, worker, qty);
      return 'sold';
    },
    { waitMs: 30_000 },
  );
}

/**
 * Wrong, on purpose (--unsafe): the transaction reads first and takes the lock only around the
 * write, released before COMMIT. The lock serialises the UPDATEs but not the decisions: two
 * sales that read the same quantity both sell, and the second write overwrites the first.
 * It runs at READ COMMITTED, as many applications do: at REPEATABLE READ, MariaDB 11.6 and later
 * (innodb_snapshot_isolation) refuse the stale write with error 1020 rather than lose it.
 */
export async function sellUnsafely(db: Knex, locks: LockManager, worker: string, rnd: Random): Promise<SaleResult> {
  return db.transaction(
    async (trx) => {
      const qty = await readQty(trx);
      if (qty <= 0) return 'sold-out';
      await sleep(randomInt(rnd, 2, 10)); // payment authorisation
      const grant = await locks.acquireWrite(SKU, { waitMs: 30_000 });
      try {
        await writeSale(trx, grant.id, worker, qty);
      } finally {
        await grant.release();
      }
      return 'sold';
    },
    { isolationLevel: 'read committed' },
  );
}
