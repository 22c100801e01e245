// A reaper process of the reliability suite. Several run at once and start their rounds on the same
// wall-clock ticks (as cron '* * * * * *' jobs on several hosts would), so they contend for the
// same stale grants. Each round is appended to a JSONL file.
// Usage: node --import tsx test/faults/reaper.ts '<ReaperConfig JSON>'
import { connectKnex } from '../../harness/database.js';
import { connectFollowingPrimary, refusedAsReadOnly } from '../support/group-replication.js';
import type { Knex } from 'knex';
import { reapStaleGrants } from '../../src/admin/index.js';
import { referenceReap } from './broken.js';
import { appendJsonl, now, type ReaperRun } from './history.js';

export interface ReaperConfig {
  id: string;
  serverUrl: string;
  /** A single-primary group's nodes: reap on whichever reports itself the writable primary. */
  followPrimary?: string[];
  database: string;
  log: string;
  periodMs: number;
  staleAfterMs: number;
  /** 'reference' is the broken negative control: no status/version check. */
  variant: 'library' | 'reference';
  referenceDelayMs?: number;
}

const config = JSON.parse(process.argv[2] ?? '{}') as ReaperConfig;
function connect(): Knex {
  return config.followPrimary
    ? connectFollowingPrimary(config.followPrimary, config.database, 2)
    : connectKnex(config.serverUrl, config.database, { poolMax: 2 });
}
let db = connect();
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
      // super_read_only: this pool is on a node that is no longer the primary.
      if (config.followPrimary && refusedAsReadOnly(err)) {
        const old = db;
        db = connect();
        await old.destroy().catch(() => undefined);
      }
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
