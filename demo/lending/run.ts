// The lending scenario: seed the book, run workers + reaper + faults for the duration, verify.
import type { Knex } from 'knex';
import type { DemoConfig } from '../config.js';
import { Crew } from '../crew.js';
import { opsOf } from '../progress.js';
import { seededRandom } from '../random.js';
import type { DemoReport } from '../report.js';
import { count, money } from '../verify/check.js';
import { verifyLending } from '../verify/lending-verifier.js';
import { createLendingTables } from './schema.js';
import { seedBook } from './seed.js';

type Partial = Omit<DemoReport, 'server' | 'database' | 'totalMs'>;

export async function runLending(
  config: DemoConfig,
  db: Knex,
  dbUrl: string,
  log: (line: string) => void,
): Promise<Partial> {
  const seedStart = performance.now();
  await createLendingTables(db);
  const book = await seedBook(db, config, seededRandom(config.seed));
  const seeding = {
    ms: Math.round(performance.now() - seedStart),
    summary:
      `${count(book.loans)} loans, ${count(book.investors)} investors, ${count(book.claims)} claims; ` +
      `principal ${money(book.principalCents)}, investor cash ${money(book.balanceCents)}`,
  };
  log(`seeded ${seeding.summary}`);

  const crew = new Crew(config, db, dbUrl);
  await crew.start();
  log(
    `${config.workers} workers and the reaper are running for ${config.durationSec} s; faults: ${config.faults.map((f) => `${f.kind}@${f.atSec}s`).join(', ') || 'none'}`,
  );
  await new Promise((resolve) => setTimeout(resolve, config.durationSec * 1000)); // the length of the run, not a synchronisation
  const loadMs = Math.round(crew.elapsedSec * 1000);
  const summary = await crew.stop();
  const [[g]] = (await db.raw('SELECT COUNT(*) AS n FROM t_lock_log')) as [Array<{ n: number }>, unknown];
  const verdict = await verifyLending(db);
  // Committed work from the database: a killed worker's last counters never reach the supervisor.
  const [[done]] = (await db.raw(
    'SELECT (SELECT COUNT(*) FROM repayments) AS repayments, (SELECT COUNT(*) FROM transfers) AS transfers',
  )) as [Array<{ repayments: number; transfers: number }>, unknown];
  const counts = {
    ...crew.pool.totals,
    repayments: Number(done?.repayments ?? 0),
    transfers: Number(done?.transfers ?? 0),
  };
  const ops = opsOf(counts);
  return {
    scenario: 'lending',
    config: { ...config, json: undefined } as DemoReport['config'],
    seeding,
    load: { ms: loadMs, operations: ops, counts, opsPerSec: ops / (loadMs / 1000), grants: Number(g?.n ?? 0) },
    crew: summary,
    faults: crew.faults.records,
    verdict,
    notes: [],
  };
}
