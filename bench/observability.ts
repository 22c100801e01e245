// What observability costs: the fenced operation (withWriteLock around a 1-row UPDATE, distinct
// resources) with nothing subscribed, with a tracing subscriber on every channel, with the
// Prometheus helper registered, and with OpenTelemetry spans on (mysql-rwlock/otel, the SDK's
// TracerProvider and batch processor, an exporter that drops what it is given), in one run on one server, interleaved over rounds in shuffled
// order, as ratios against "none" (ops/s, and client CPU per op, which the database's commit
// latency does not hide).
//
//   npm run bench:observability               4 rounds of 2 s per mode at concurrency 1 and 8
//   options: --seconds=N --rounds=N
// Server: MYSQL_URL if set, else a throwaway mariadbd/mysqld from PATH.
import diagnostics from 'node:diagnostics_channel';
import type { Knex } from 'knex';
import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BatchSpanProcessor, TracerProvider, type SpanExporter } from '@opentelemetry/sdk-trace';
import { Registry } from 'prom-client';
import { connectKnex, createDatabase, dropDatabase } from '../harness/database.js';
import { findServer } from '../harness/server.js';
import { createLockManager } from '../src/index.js';
import { migrate } from '../src/admin/index.js';
import { CHANNELS } from '../src/observability/tracing-entry.js';
import { instrumentLocks } from '../src/observability/otel.js';
import { registerLockMetrics } from '../src/observability/prometheus.js';
import { acquireChannel, traced } from '../src/contract/channels.js';
import { pooled, runFor, stats, watchServerCpu, type Sample } from './lib/run.js';

const argv = process.argv.slice(2);
const option = (name: string): string | undefined => argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
const seconds = Number(option('seconds') ?? 2);
const rounds = Number(option('rounds') ?? 4);
const log = (line: string): void => void process.stderr.write(`${line}\n`);

type Mode = 'none' | 'tracing' | 'prometheus' | 'otel';
const MODES: Mode[] = ['none', 'tracing', 'prometheus', 'otel'];

// As an app sets OpenTelemetry up: a context manager, and spans batched to an exporter (here one
// that drops them, so the figure is the lock's instrumentation and the SDK, not a network).
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const dropSpans: SpanExporter = { export: (_spans, done) => done({ code: 0 }), shutdown: async () => undefined };
const tracerProvider = new TracerProvider({ spanProcessors: [new BatchSpanProcessor({ exporter: dropSpans })] });

/** A subscriber as a tracer would be: a span per call (start time, duration, outcome) on every tracing channel. */
function subscribeTracer(): () => void {
  const spans: Array<{ name: string; ms: number; failed: boolean }> = [];
  const undo: Array<() => void> = [];
  const started = new WeakMap<object, number>();
  for (const name of [CHANNELS.acquire, CHANNELS.fence, CHANNELS.release, CHANNELS.reap]) {
    const handlers = {
      start: (c: object) => void started.set(c, performance.now()),
      end: () => undefined,
      asyncStart: () => undefined,
      asyncEnd: (c: { error?: unknown }) => {
        spans.push({ name, ms: performance.now() - (started.get(c) ?? 0), failed: c.error !== undefined });
        if (spans.length > 10_000) spans.length = 0;
      },
      error: () => undefined,
    };
    const tc = diagnostics.tracingChannel(name);
    tc.subscribe(handlers);
    undo.push(() => tc.unsubscribe(handlers));
  }
  return () => undo.forEach((u) => u());
}

function enable(mode: Mode): () => void {
  if (mode === 'tracing') return subscribeTracer();
  if (mode === 'otel') {
    // dbSystem given: no detection query per round; the attribute's value does not change the cost.
    const handle = instrumentLocks({ tracerProvider, dbSystem: 'mysql' });
    return () => handle.disable();
  }
  if (mode === 'prometheus') {
    const registry = new Registry();
    const metrics = registerLockMetrics({ registry });
    return () => metrics.unregister();
  }
  return () => undefined;
}

function shuffled<T>(list: T[]): T[] {
  const out = [...list];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

const server = await findServer({ log: (l) => log(`[server] ${l}`) });
log(`[bench] server: ${server.description}`);
watchServerCpu(new URL(server.url).port ? Number(new URL(server.url).port) : 3306);
const dbName = `bench_obs_${process.pid}_${Date.now().toString(36)}`;
await createDatabase(server.url, dbName);
const knex = connectKnex(server.url, dbName, { poolMax: 20 });
try {
  await migrate(knex);
  await knex.raw(
    'CREATE TABLE bench_account (id INT NOT NULL PRIMARY KEY, balance BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB',
  );
  await knex.raw(
    'INSERT INTO bench_account (id) VALUES ' + Array.from({ length: 16 }, (_, i) => `(${i + 1})`).join(','),
  );
  const locks = createLockManager({ knex });
  const op = (w: number): Promise<boolean> =>
    locks
      .withWriteLock(`obs-${w}`, (trx: Knex.Transaction) =>
        trx.raw('UPDATE bench_account SET balance = balance + 1 WHERE id = ?', [w + 1]),
      )
      .then(() => true);
  const samples = new Map<string, Sample[]>();
  for (let round = 1; round <= rounds; round++) {
    for (const concurrency of [1, 8]) {
      for (const mode of shuffled(MODES)) {
        const disable = enable(mode);
        try {
          const s = await runFor(seconds * 1000, concurrency, op);
          const key = `${mode}@${concurrency}`;
          samples.set(key, [...(samples.get(key) ?? []), s]);
          log(`[bench] round ${round}/${rounds} ${key}: ${(s.ops / s.seconds).toFixed(0)} ops/s`);
        } finally {
          disable();
        }
      }
    }
  }
  const lines = [
    `fenced withWriteLock + 1-row UPDATE, distinct resources; ${rounds} interleaved rounds × ${seconds} s per mode; ${server.description}`,
    '| subscribed | conc. | ops/s | p50 ms | p99 ms | client CPU µs/op | ops/s ÷ none | CPU/op ÷ none |',
    '|---|--:|--:|--:|--:|--:|--:|--:|',
  ];
  for (const concurrency of [1, 8]) {
    const none = stats(pooled(samples.get(`none@${concurrency}`)!));
    for (const mode of MODES) {
      const s = stats(pooled(samples.get(`${mode}@${concurrency}`)!));
      const cpu = s.clientCpuUsPerOp ?? NaN;
      lines.push(
        `| ${mode} | ${concurrency} | ${s.opsPerSec.toFixed(0)} | ${s.p50.toFixed(2)} | ${s.p99.toFixed(2)} | ${cpu.toFixed(0)} | ${(s.opsPerSec / none.opsPerSec).toFixed(3)} | ${(cpu / (none.clientCpuUsPerOp ?? NaN)).toFixed(3)} |`,
      );
    }
  }
  // The same three modes without the database: the cost of one traced acquire call in this
  // process, which the commit latency above hides on a busy machine.
  const calls = 200_000;
  const perCall = new Map<Mode, number[]>();
  const context = () => ({ resourceId: 'r', mode: 'write' as const, waitMs: 0, owner: 'o' });
  for (let round = 1; round <= rounds; round++) {
    for (const mode of shuffled(MODES)) {
      const disable = enable(mode);
      try {
        const t0 = performance.now();
        for (let i = 0; i < calls; i++) await traced(acquireChannel, context, async () => null);
        perCall.set(mode, [...(perCall.get(mode) ?? []), ((performance.now() - t0) * 1e6) / calls]);
      } finally {
        disable();
      }
    }
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  lines.push(
    '',
    `one traced acquire call around an already-resolved promise, no database (median of ${rounds} rounds × ${calls} calls)`,
    '| subscribed | ns/call | added ns/call |',
    '|---|--:|--:|',
  );
  for (const mode of MODES)
    lines.push(
      `| ${mode} | ${median(perCall.get(mode)!).toFixed(0)} | ${(median(perCall.get(mode)!) - median(perCall.get('none')!)).toFixed(0)} |`,
    );
  process.stdout.write(`${lines.join('\n')}\n`);
} finally {
  await knex.destroy();
  await dropDatabase(server.url, dbName).catch(() => undefined);
  await server.stop();
  await tracerProvider.shutdown();
}
