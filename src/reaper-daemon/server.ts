// The reaper job's HTTP server (METRICS_PORT): /metrics for Prometheus and /healthz for a
// supervisor. Loaded by the job only when METRICS_PORT is set, so prom-client stays optional.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Knex } from 'knex';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { registerLockMetrics } from '../observability/prometheus.js';
import type { LogLine, ReaperHealth } from './job.js';

export interface ReaperServer {
  /** The port it listens on (the one chosen when METRICS_PORT was 0). */
  port: number;
  /** Feeds the job's log lines to the run metrics. */
  observe(line: LogLine): void;
  close(): Promise<void>;
}

/**
 * Starts the server. /metrics: the process's default metrics, the lock metrics of this process
 * (reaped grants, reap runs) and the gauges read from the database at scrape time, and the job's
 * runs and count checks. /healthz: 200 while `health` reports healthy, else 503, with the report as JSON.
 */
export async function startReaperServer(
  db: Knex,
  options: { port: number; host: string; staleAfterMs: number },
  health: ReaperHealth,
): Promise<ReaperServer> {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  registerLockMetrics({ registry, knex: db, staleAfterMs: options.staleAfterMs });
  const { runs, purged, duration, lastRun, lastSuccess, disagreements, lastCheck } = jobMetrics(registry, health);
  let checked = false;
  const server = http.createServer(answer(registry, health));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    observe(line) {
      if (line.event === 'reaper.counts' && typeof line.remaining === 'number') {
        if (!checked) for (const g of [disagreements, lastCheck]) registry.registerMetric(g);
        checked = true;
        disagreements.set(line.remaining);
        lastCheck.set(Date.now() / 1000);
      }
      if (line.event !== 'reaper.run') return;
      const now = Date.now() / 1000;
      runs.inc({ outcome: line.ok === true ? 'ok' : 'failed' });
      if (typeof line.purged === 'number') purged.inc(line.purged);
      if (typeof line.durationMs === 'number') duration.observe(line.durationMs / 1000);
      lastRun.set(now);
      if (line.ok === true) lastSuccess.set(now);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** The job's own metrics on `registry`; the count check's two are made here and registered at the first check. */
function jobMetrics(registry: Registry, health: ReaperHealth) {
  const registers = [registry];
  const runs = new Counter({
    name: 'mysql_rwlock_reaper_runs_total',
    help: 'Reaper job runs, by outcome',
    labelNames: ['outcome'],
    registers,
  });
  for (const outcome of ['ok', 'failed']) runs.inc({ outcome }, 0);
  const purged = new Counter({
    name: 'mysql_rwlock_reaper_purged_grants_total',
    help: 'Released grants purged from t_lock_log by the job',
    registers,
  });
  const duration = new Histogram({
    name: 'mysql_rwlock_reaper_run_duration_seconds',
    help: 'Duration of a reaper job run (reap and purge)',
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300],
    registers,
  });
  const lastRun = new Gauge({
    name: 'mysql_rwlock_reaper_last_run_timestamp_seconds',
    help: 'When the last run finished (Unix time)',
    registers,
  });
  const lastSuccess = new Gauge({
    name: 'mysql_rwlock_reaper_last_success_timestamp_seconds',
    help: 'When the last successful run finished (Unix time)',
    registers,
  });
  // Registered at the first count check: an unlabelled gauge reads 0 until set, and 0 disagreements
  // before any check would tell an alert on "> 0" all is well for up to a day.
  const disagreements = new Gauge({
    name: 'mysql_rwlock_count_disagreements',
    registers: [],
    help: 'Resources whose lock counts disagreed with their live grants at the last count check (after its repair, with COUNT_REPAIR=1); absent before the first check',
  });
  const lastCheck = new Gauge({
    name: 'mysql_rwlock_reaper_last_count_check_timestamp_seconds',
    help: 'When the last count check finished (Unix time); absent before the first check',
    registers: [],
  });
  new Gauge({
    name: 'mysql_rwlock_reaper_healthy',
    help: '1 when /healthz answers 200',
    registers,
    collect() {
      this.set(health.report().healthy ? 1 : 0);
    },
  });
  return { runs, purged, duration, lastRun, lastSuccess, disagreements, lastCheck };
}

/** The server's requests: GET (or HEAD) /metrics and /healthz. */
function answer(registry: Registry, health: ReaperHealth): http.RequestListener {
  return (req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    if (path === '/metrics') {
      registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
        (err: unknown) =>
          res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics failed: ${(err as Error).message}\n`),
      );
    } else if (path === '/healthz') {
      const report = health.report();
      res
        .writeHead(report.healthy ? 200 : 503, { 'content-type': 'application/json' })
        .end(`${JSON.stringify(report)}\n`);
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: /metrics, /healthz\n');
    }
  };
}
