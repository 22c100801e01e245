// One worker process's share of the stock sale: sell until the stock reads empty.
import type { Knex } from 'knex';
import type { LockManager } from '../../src/index.js';
import type { FromWorker, OpCounts } from '../messages.js';
import type { Random } from '../random.js';
import { sellSafely, sellUnsafely } from './operations.js';

export interface StockContext {
  db: Knex;
  locks: LockManager;
  name: string;
  unsafe: boolean;
  rnd: Random;
  counts: OpCounts;
  send: (msg: FromWorker) => void;
  stopping: () => boolean;
}

export async function runStockLoops(ctx: StockContext, concurrency: number): Promise<void> {
  const loop = async (): Promise<void> => {
    while (!ctx.stopping()) {
      try {
        const result = ctx.unsafe
          ? await sellUnsafely(ctx.db, ctx.locks, ctx.name, ctx.rnd)
          : await sellSafely(ctx.locks, ctx.name, ctx.rnd);
        if (result === 'sold-out') return;
        ctx.counts.deductions += 1;
      } catch (err) {
        ctx.counts.errors += 1;
        ctx.send({ type: 'error', message: `sale: ${(err as Error).message}` });
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  ctx.send({ type: 'sold-out' });
}
