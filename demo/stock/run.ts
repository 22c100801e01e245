// The stock scenario: N workers sell from a stock of `--stock` units until it reads empty.
import type { Knex } from 'knex';
import type { DemoConfig } from '../config.js';
import { Crew } from '../crew.js';
import { opsOf } from '../progress.js';
import type { DemoReport } from '../report.js';
import { verifyStock } from '../verify/stock-verifier.js';
import { createStockTables } from './schema.js';

type Partial = Omit<DemoReport, 'server' | 'database' | 'totalMs'>;

const UNSAFE_NOTE = [
  'Why --unsafe fails: each sale reads the stock in its transaction, then takes the write lock only',
  'around its UPDATE and releases it before COMMIT. The lock orders the writes but not the decisions:',
  'sales that read the same level all sell, each writes level-1 over the other, and the lost deductions',
  'turn into units sold that never existed. The rule: the lock must contain the transaction, not the other way',
  'round; withWriteLock runs the transaction inside the grant and releases the grant in the same COMMIT.',
  'This run exits non-zero on purpose.',
].join('\n');

export async function runStock(
  config: DemoConfig,
  db: Knex,
  dbUrl: string,
  log: (line: string) => void,
): Promise<Partial> {
  const seedStart = performance.now();
  await createStockTables(db, config.stock);
  const seeding = { ms: Math.round(performance.now() - seedStart), summary: `stock of ${config.stock} units of sku-1` };
  log(
    `seeded ${seeding.summary}; ${config.workers} workers sell ${config.unsafe ? 'UNSAFELY (lock inside the transaction)' : 'under withWriteLock'}`,
  );
  const crew = new Crew(config, db, dbUrl);
  await crew.start();
  await crew.pool.waitAllExited(); // each worker exits when it reads the stock as empty
  const loadMs = Math.round(crew.elapsedSec * 1000);
  const summary = await crew.stop();
  const [[g]] = (await db.raw('SELECT COUNT(*) AS n FROM t_lock_log')) as [Array<{ n: number }>, unknown];
  const verdict = await verifyStock(db);
  const counts = crew.pool.totals;
  return {
    scenario: 'stock',
    config: { ...config, json: undefined } as DemoReport['config'],
    seeding,
    load: {
      ms: loadMs,
      operations: opsOf(counts),
      counts,
      opsPerSec: counts.deductions / Math.max(0.001, loadMs / 1000),
      grants: Number(g?.n ?? 0),
    },
    crew: summary,
    faults: [],
    verdict,
    notes: config.unsafe ? [UNSAFE_NOTE] : [],
  };
}
