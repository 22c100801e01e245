#!/usr/bin/env node
// The scheduled reaper process: `npm run reaper` (or `mysql-rwlock-reaper` when installed).
// Config from the environment: MYSQL_URL (required), REAPER_CRON (default every minute),
// STALE_AFTER_MS (default 600000), REAPER_BATCH_SIZE (500), RETENTION_MS (7 days; 0 = keep all).
// `--once` runs a single round and exits. Logs one JSON line per run and per reaped grant.
import knexFactory from 'knex';
import { jobConfigFromEnv, runReaperOnce, scheduleReaper, type LogLine } from '../src/reaper-job.js';

function log(line: LogLine): void {
  process.stdout.write(`${JSON.stringify({ ts: new Date().toISOString(), ...line })}\n`);
}

async function main(): Promise<void> {
  const url = process.env.MYSQL_URL;
  if (!url) {
    log({ event: 'reaper.config', ok: false, error: 'MYSQL_URL is required, e.g. mysql://user:pass@host:3306/db' });
    process.exit(2);
  }
  const config = jobConfigFromEnv(process.env);
  const db = knexFactory({ client: 'mysql2', connection: url, pool: { min: 0, max: 2 } });
  if (process.argv.includes('--once')) {
    await runReaperOnce(db, config, log);
    await db.destroy();
    return;
  }
  log({ event: 'reaper.start', cron: config.cron, staleAfterMs: config.staleAfterMs, retentionMs: config.retentionMs, pid: process.pid });
  const job = scheduleReaper(db, config, log);
  const shutdown = async (signal: string): Promise<void> => {
    log({ event: 'reaper.stop', signal });
    await job.stop();
    await db.destroy();
    process.exit(0);
  };
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
  process.once('SIGINT', () => void shutdown('SIGINT'));
}

main().catch((err: unknown) => {
  log({ event: 'reaper.fatal', ok: false, error: (err as Error).message });
  process.exit(1);
});
