#!/usr/bin/env node
// The scheduled reaper process: `mysql-rwlock-reaper` when installed, `npm run reaper` in a checkout.
// Configured by environment variables (see `--help`, or JOB_ENV in src/reaper-daemon/job.ts). Logs one JSON
// line per run and per reaped grant on stdout. Exit codes: 0 stopped by SIGTERM/SIGINT or a `--once`
// run that succeeded; 1 a `--once` run that failed, or an unexpected error; 2 bad configuration or usage.
import knexFactory from 'knex';
import { parseArgs } from 'node:util';
import {
  JOB_ENV,
  ReaperHealth,
  cronPeriodMs,
  jobConfigFromEnv,
  runReaperOnce,
  scheduleReaper,
  type LogLine,
} from '../src/reaper-daemon/job.js';
import type { ReaperServer } from '../src/reaper-daemon/server.js';

const USAGE = `Usage: mysql-rwlock-reaper [--once]

Releases lock grants whose holders died (older than STALE_AFTER_MS) and purges old released grants.
Runs as a daemon on REAPER_CRON until SIGTERM or SIGINT, finishing the run in progress; --once runs one
round and exits, for an external scheduler (a Kubernetes CronJob, a systemd timer, cron).

Options:
  --once        run one round and exit
  -h, --help    print this help and exit

Environment:
${JOB_ENV.map((v) => `  ${v.name.padEnd(20)} ${v.default === 'required' ? 'required' : `default ${v.default}`}\n  ${''.padEnd(20)} ${v.meaning}`).join('\n')}

Output: one JSON line per run ({"event":"reaper.run","ok":true,"reaped":0,...}), per reaped grant and per
count check ({"event":"reaper.counts","ok":true,"found":0,"remaining":0,...}; daemon only: --once does not
check counts, run mysql-rwlock check for that).

With METRICS_PORT (daemon only): GET /metrics (Prometheus text) and GET /healthz: 200 while the last run
succeeded and finished within two schedule periods + 30 s, else 503; a JSON report either way.

Exit codes:
  0  stopped by SIGTERM/SIGINT, or a --once run that succeeded
  1  a --once run failed (database unreachable, schema missing, a grant that could not be reaped)
  2  bad configuration or usage (the line names the variable or option)

Run it so that signals reach it: node node_modules/.bin/mysql-rwlock-reaper, or exec it from a shell
wrapper. npx and npm run do not forward SIGTERM to it.`;

function log(line: LogLine): void {
  process.stdout.write(`${JSON.stringify({ ts: new Date().toISOString(), ...line })}\n`);
}

function refuse(error: string): never {
  log({ event: 'reaper.config', ok: false, error });
  process.exit(2);
}

async function main(): Promise<void> {
  let once = false;
  try {
    const { values } = parseArgs({
      args: process.argv.slice(2),
      strict: true,
      options: { once: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
    });
    if (values.help) {
      process.stdout.write(`${USAGE}\n`);
      return;
    }
    once = values.once ?? false;
  } catch (err) {
    refuse(`${(err as Error).message}; see --help`);
  }
  let config;
  try {
    config = jobConfigFromEnv(process.env);
  } catch (err) {
    refuse((err as Error).message);
  }
  // knex's own warnings (a refused connection, say) as JSON lines too, so stdout stays parseable.
  const knexLog = (level: string) => (message: unknown) =>
    log({
      event: 'reaper.driver',
      level,
      message: (message instanceof Error ? message.message : String(message)).split('\n')[0],
    });
  const db = knexFactory({
    client: 'mysql2',
    connection: config.connection,
    pool: { min: 0, max: 2 },
    log: { warn: knexLog('warn'), error: knexLog('error'), deprecate: knexLog('deprecate'), debug: () => undefined },
  });
  if (once) {
    const ok = await runReaperOnce(db, config, log);
    await db.destroy();
    process.exitCode = ok ? 0 : 1;
    return;
  }
  const { cron, runAtStart, staleAfterMs, batchSize, retentionMs, target, countCheckCron, countRepair } = config;
  // Signal handlers first, the start line last: whoever waits for that line may signal at once.
  let job: { stop(): Promise<void> } | undefined;
  let server: ReaperServer | undefined;
  const shutdown = async (signal: string): Promise<void> => {
    log({ event: 'reaper.stop', signal });
    await job?.stop();
    await server?.close();
    await db.destroy();
    process.exit(0);
  };
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
  process.once('SIGINT', () => void shutdown('SIGINT'));
  let observe = log;
  if (config.metricsPort !== null) {
    // Loaded only now: prom-client is an optional peer dependency.
    const loaded = await import('../src/reaper-daemon/server.js').catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ERR_MODULE_NOT_FOUND' && /prom-client/.test(err.message))
        refuse('METRICS_PORT needs prom-client: npm install prom-client');
      throw err;
    });
    const health = new ReaperHealth(cronPeriodMs(cron));
    const started = await loaded.startReaperServer(
      db,
      { port: config.metricsPort, host: config.metricsHost, staleAfterMs },
      health,
    );
    server = started;
    observe = (line) => {
      health.observe(line);
      started.observe(line);
      log(line);
    };
  }
  job = scheduleReaper(db, config, observe);
  log({
    event: 'reaper.start',
    target,
    cron,
    runAtStart,
    staleAfterMs,
    batchSize,
    retentionMs,
    countCheckCron,
    countRepair,
    metricsPort: server?.port ?? null,
    pid: process.pid,
  });
}

main().catch((err: unknown) => {
  log({ event: 'reaper.fatal', ok: false, error: (err as Error).message });
  process.exit(1);
});
