// A reaper process of the reliability suite. Several run at once and start their rounds on the same
// wall-clock ticks (as cron '* * * * * *' jobs on several hosts would), so they contend for the
// same stale grants. Each round is appended to a JSONL file.
// Usage: node --import tsx test/faults/reaper.ts '<ReaperConfig JSON>'
import { connectKnex } from '../../harness/database.js';
import { reapStaleGrants } from '../../src/index.js';
import { referenceReap } from './broken.js';
import { appendJsonl, now, type ReaperRun } from './history.js';

export interface ReaperConfig {
  id: string;
  serverUrl: string;
  database: string;
  log: string;
  periodMs: number;
  staleAfterMs: number;
  /** 'reference' is the broken negative control: no status/version check. */
  variant: 'library' | 'reference';
  referenceDelayMs?: number;
}

const config = JSON.parse(process.argv[2] ?? '{}') as ReaperConfig;
const db = connectKnex(config.serverUrl, config.database, { poolMax: 2 });
let stopping = false;
process.on('SIGTERM', () => {
  stopping = true;
});

async function main(): Promise<void> {
  while (!stopping) {
    const wall = Date.now();
    await new Promise((r) => setTimeout(r, config.periodMs - (wall % config.periodMs)));
    if (stopping) break;
    const start = now();
    const run: ReaperRun = { reaper: config.id, start, end: start, reaped: [], skipped: 0 };
    try {
      if (config.variant === 'library') {
        const result = await reapStaleGrants(db, { staleAfterMs: config.staleAfterMs });
        run.reaped = result.grants.map((g) => g.id);
        run.skipped = result.skipped;
      } else {
        run.reaped = await referenceReap(db, config.staleAfterMs, config.referenceDelayMs ?? 0);
      }
    } catch (err) {
      const e = err as { code?: string; message?: string };
      run.error = e.code ?? e.message ?? String(err);
    }
    run.end = now();
    appendJsonl(config.log, run);
  }
  await db.destroy();
  process.exit(0);
}

main().catch((err: unknown) => {
  process.stderr.write(`reaper ${config.id} crashed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
