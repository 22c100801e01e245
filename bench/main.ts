// Benchmark of mysql-rwlock against the cheapest possible commit (the "ceiling"), a plain
// transaction, the reference article's flow, MySQL GET_LOCK and a Redis lock, all in one run on
// one server so that the ratios hold on a noisy machine.
//
//   npm run bench                 full run (~4 min): 4 interleaved rounds of 1 s per case
//   npm run bench:smoke           quick run (~1 min): 2 interleaved rounds of 0.5 s per case (CI smoke)
//   npm run bench -- --scale      also the 1M-resource / 10M-log-row case (slow to set up)
//   options: --seconds=N --rounds=N --only=ceiling,lib,fenced,ref,peers,contention,writers (or none)
//            --server-arg=--innodb-buffer-pool-size=2G (flags for the throwaway server)
//
// Server: MYSQL_URL if set, else a throwaway mariadbd/mysqld from PATH (what CI and fresh machines get).
import { fork } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { Knex } from 'knex';
import mysql from 'mysql2/promise';
import { connectKnex, createDatabase, dropDatabase, parseMysqlUrl } from '../harness/database.js';
import { findServer } from '../harness/server.js';
import { createLockManager, migrate, type LockManager } from '../src/index.js';
import { pooled as poolSamples, runFor, sortedCopy, percentile, stats, watchServerCpu, type Sample, type Stats } from './lib/run.js';
import { createReferenceTables, refAcquire, refFenced, refRelease } from './reference/flow.js';
import { runScale, type ScaleReport } from './scale.js';

const argv = process.argv.slice(2);
const flag = (name: string): boolean => argv.includes(`--${name}`);
const option = (name: string): string | undefined => argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
const quick = flag('quick');
const seconds = Number(option('seconds') ?? (quick ? 0.5 : 1));
const rounds = Number(option('rounds') ?? (quick ? 2 : 4));
const only = option('only')?.split(',');
const want = (group: string): boolean => !only || only.includes(group);
const log = (line: string): void => void process.stderr.write(`${line}\n`);

interface Row {
  group: string;
  name: string;
  concurrency: number;
  stats: Stats;
  /** What the ratio is taken against, and the ratio. */
  ratios: Record<string, number>;
  note?: string;
}

const started = Date.now();
// --server-arg=--innodb-buffer-pool-size=2G etc. are passed to a throwaway server (not to MYSQL_URL)
const serverArgs = argv.filter((a) => a.startsWith('--server-arg=')).map((a) => a.slice('--server-arg='.length));
const server = await findServer({ log: (l) => log(`[server] ${l}`), extraArgs: serverArgs });
log(`[bench] server: ${server.description}`);
const dbName = `bench_${process.pid}_${Date.now().toString(36)}`;
await createDatabase(server.url, dbName);
const knex = connectKnex(server.url, dbName, { poolMax: 40 });
const raws: mysql.Connection[] = [];
let redis: { quit(): Promise<unknown> } | undefined;
const report: Record<string, unknown> = {};
try {
  await migrate(knex);
  await createReferenceTables(knex);
  await knex.raw('CREATE TABLE bench_ceiling (id INT NOT NULL PRIMARY KEY, v BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB');
  await knex.raw('CREATE TABLE bench_account (id INT NOT NULL PRIMARY KEY, balance BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB');
  await knex.raw('INSERT INTO bench_ceiling (id) SELECT seq FROM (SELECT a.n + 10 * b.n + 100 * c.n + 1 AS seq FROM (SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) a, (SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) b, (SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) c) s');
  await knex.raw('INSERT INTO bench_account (id) SELECT id FROM bench_ceiling');
  const version = ((await knex.raw('SELECT VERSION() AS v')) as unknown as [[{ v: string }]])[0][0].v;
  const conn = parseMysqlUrl(server.url);
  for (let i = 0; i < 16; i++) raws.push(await mysql.createConnection({ ...conn, database: dbName }));
  const locks = createLockManager({ knex });

  // ---- the cases -------------------------------------------------------------------------
  type Op = (w: number) => Promise<boolean | void>;
  interface Case { group: string; name: string; concurrency: number; op: Op }
  const cases: Case[] = [];
  const add = (group: string, name: string, op: Op, cs: number[] = [1, 16]): void => {
    if (want(group)) for (const c of cs) cases.push({ group, name, concurrency: c, op });
  };
  const businessUpdate = (trx: Knex.Transaction, id: number): Promise<unknown> =>
    trx.raw('UPDATE bench_account SET balance = balance + 1 WHERE id = ?', [id]);
  const cycle = (lm: LockManager, mode: 'write' | 'read', res: (w: number) => string): Op => async (w) => {
    const g = mode === 'write' ? await lm.tryAcquireWrite(res(w)) : await lm.tryAcquireRead(res(w));
    if (!g) return false;
    await g.release();
  };

  add('ceiling', 'ceiling: autocommit 1-row UPDATE by PK (raw mysql2)', async (w) => {
    await raws[w]!.query('UPDATE bench_ceiling SET v = v + 1 WHERE id = ?', [w + 1]);
  });
  add('lib', 'lib: tryAcquireWrite+release, distinct resources', cycle(locks, 'write', (w) => `dw-${w}`));
  add('lib', 'lib: tryAcquireRead+release, distinct resources', cycle(locks, 'read', (w) => `dr-${w}`));
  add('lib', 'lib: tryAcquireWrite+release, one hot resource', cycle(locks, 'write', () => 'hot-w'));
  add('lib', 'lib: tryAcquireRead+release, one hot resource', cycle(locks, 'read', () => 'hot-r'));
  add('fenced', 'fenced withWriteLock + 1-row UPDATE, distinct', (w) => locks.withWriteLock(`fw-${w}`, (trx) => businessUpdate(trx, w + 1)).then(() => true));
  add('fenced', 'plain knex transaction, same UPDATE, distinct', (w) => knex.transaction((trx) => businessUpdate(trx, w + 1)).then(() => true));
  add('fenced', 'fenced withWriteLock + 1-row UPDATE, one hot', () => locks.withWriteLock('fw-hot', (trx) => businessUpdate(trx, 1000)).then(() => true));
  add('fenced', 'plain knex transaction, same UPDATE, one hot', () => knex.transaction((trx) => businessUpdate(trx, 1000)).then(() => true));
  const refCycle = (mode: 'write' | 'read'): Op => async (w) => {
    const id = await refAcquire(knex, `r${mode}-${w}`, mode);
    if (id === null) return false;
    await refRelease(knex, `r${mode}-${w}`, mode, id);
  };
  add('ref', 'reference flow: write acquire+release, distinct', refCycle('write'));
  add('ref', 'reference flow: read acquire+release, distinct', refCycle('read'));
  add('ref', 'reference fenced op (3 commits), distinct', (w) => refFenced(knex, `rf-${w}`, (trx) => businessUpdate(trx, w + 1)));
  add('peers', 'peer: MySQL GET_LOCK/RELEASE_LOCK', async (w) => {
    const [rows] = await raws[w]!.query('SELECT GET_LOCK(?, 0) AS got', [`bench-${w}`]);
    if (Number((rows as Array<{ got: number }>)[0]?.got) !== 1) return false;
    await raws[w]!.query('SELECT RELEASE_LOCK(?)', [`bench-${w}`]);
  });
  let redisNote = '';
  if (want('peers')) {
    const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
    try {
      const { Redis } = await import('ioredis');
      const { Mutex } = await import('redis-semaphore');
      const client = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null, connectTimeout: 2000 });
      await client.connect();
      await client.ping();
      redis = client;
      add('peers', 'peer: Redis lock (redis-semaphore Mutex, 1 instance)', async (w) => {
        const m = new Mutex(client, `bench-${w}`, { lockTimeout: 10_000, refreshInterval: 0, acquireAttemptsLimit: 1 });
        if (!(await m.tryAcquire())) return false;
        await m.release();
      });
    } catch (err) {
      redisNote = `Redis not reachable at ${redisUrl} (${(err as Error).message}): Redis peer skipped`;
      log(`[bench] ${redisNote}`);
    }
  }

  // ---- interleaved rounds ------------------------------------------------------------------
  const cpuWatched = watchServerCpu(Number(new URL(server.url).port || 3306));
  log(`[bench] server CPU per op: ${cpuWatched ? 'measured from /proc' : 'not available'}`);
  const samples = new Map<Case, Sample[]>();
  for (let r = 0; r < rounds; r++) {
    // A new order every round (seeded: same order every run), with a short idle gap between cases,
    // so no case always follows the same heavy case and inherits its purge/flush backlog.
    let seed = 7 + r;
    const rnd = (): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const order = r === 0 ? [...cases] : [...cases].sort(() => rnd() - 0.5);
    for (const c of order) {
      await sleep(quick ? 50 : 200);
      log(`[bench] round ${r + 1}/${rounds}: ${c.name} @${c.concurrency}`);
      const s = await runFor(seconds * 1000, c.concurrency, c.op, r === 0 ? 300 : 150);
      samples.set(c, [...(samples.get(c) ?? []), s]);
    }
  }
  const pooled = (c: Case): Stats => stats(poolSamples(samples.get(c) ?? []));
  const find = (name: string, c: number): Stats | undefined => {
    const k = cases.find((x) => x.name.startsWith(name) && x.concurrency === c);
    return k ? pooled(k) : undefined;
  };
  const rows: Row[] = [];
  for (const c of cases) {
    const s = pooled(c);
    const ratios: Record<string, number> = {};
    const ceil = find('ceiling', c.concurrency);
    if (ceil) ratios['x ceiling'] = s.opsPerSec / ceil.opsPerSec;
    const twoCommit = c.group === 'lib' || c.name.startsWith('reference flow') || c.name.startsWith('fenced');
    if (ceil && twoCommit) ratios['x ceiling/2'] = s.opsPerSec / (ceil.opsPerSec / 2);
    if (c.name.startsWith('reference fenced') && ceil) ratios['x ceiling/3'] = s.opsPerSec / (ceil.opsPerSec / 3);
    if (c.name.startsWith('fenced')) {
      const plain = find(`plain knex transaction, same UPDATE, ${c.name.endsWith('hot') ? 'one hot' : 'distinct'}`, c.concurrency);
      if (plain) ratios['x plain tx'] = s.opsPerSec / plain.opsPerSec;
    }
    const row: Row = { group: c.group, name: c.name, concurrency: c.concurrency, stats: s, ratios };
    if (s.attemptsPerSec > s.opsPerSec * 1.01) row.note = `${s.attemptsPerSec.toFixed(0)} attempts/s, ${((100 * s.opsPerSec) / s.attemptsPerSec).toFixed(0)}% granted`;
    rows.push(row);
  }

  // ---- contention: 32 waiters on one resource, each holding 1 ms -----------------------------
  let contention: Record<string, unknown> | undefined;
  if (want('contention')) {
    // [granted at, waited ms]
    const hold = (w: number, res: string, waits: Array<[number, number]>) => async (): Promise<void> => {
      void w;
      const t0 = performance.now();
      const g = await locks.acquireWrite(res, { waitMs: 60_000 });
      const t1 = performance.now();
      waits.push([t1, t1 - t0]);
      await sleep(1);
      await g.release();
    };
    const oneWaits: Array<[number, number]> = [];
    const manyWaits: Array<[number, number]> = [];
    const oneSamples: Sample[] = [];
    const manySamples: Sample[] = [];
    for (let r = 0; r < rounds; r++) {
      // interleaved so that both see the same machine
      log(`[bench] contention round ${r + 1}/${rounds}: 1 holder, then 32 waiters, 1 ms hold`);
      oneSamples.push(await runFor(seconds * 1000, 1, (w) => hold(w, 'cont-1', oneWaits)(), 150));
      manySamples.push(await runFor(seconds * 1000, 32, (w) => hold(w, 'cont-32', manyWaits)(), 300));
    }
    const pool = poolSamples;
    const one = stats(pool(oneSamples));
    const manyStats = stats(pool(manySamples));
    const inWindow = ([at]: [number, number]): boolean => manySamples.some((m) => at >= (m.from ?? 0) && at <= (m.to ?? 0));
    const sortedWaits = sortedCopy(manyWaits.filter(inWindow).map(([, waited]) => waited));
    const hotNoHold = find('lib: tryAcquireWrite+release, one hot', 1);
    contention = {
      uncontendedWith1msHold: one,
      contended32: manyStats,
      ratio: manyStats.opsPerSec / one.opsPerSec,
      ratioToNoHoldCycle: hotNoHold ? manyStats.opsPerSec / hotNoHold.opsPerSec : null,
      waitP50: percentile(sortedWaits, 50),
      waitP99: percentile(sortedWaits, 99),
      waitMax: sortedWaits[sortedWaits.length - 1],
      starvationBoundMs: 2 * 32 * 1,
      // strict FIFO: a waiter that re-queues waits for the 31 others' full cycles
      fifoIdealWaitMs: (31 * 1000) / manyStats.opsPerSec,
    };
  }

  // ---- writers do not starve: 16 readers holding overlapping read locks + a writer elsewhere --
  let writers: Record<string, unknown> | undefined;
  if (want('writers')) {
    const READ_HOLD = 10;
    const holds: number[] = [];
    const reader = async (): Promise<void> => {
      const g = await locks.acquireRead('rw-hot', { waitMs: 60_000 });
      const t0 = performance.now();
      await sleep(READ_HOLD);
      await g.release();
      holds.push(performance.now() - t0);
    };
    const tryReader = async (): Promise<boolean> => {
      const g = await locks.tryAcquireRead('rw-hot');
      if (!g) return false;
      await sleep(READ_HOLD);
      await g.release();
      return true;
    };
    const phaseMs = seconds * 1000 * Math.max(2, rounds);
    const withWriterChild = async (intentMs: number, waitMs: number): Promise<{ readers: Stats; waits: number[]; timeouts: number }> => {
      const child = fork(fileURLToPath(new URL('./writer-child.ts', import.meta.url)),
        [server.url, dbName, 'rw-hot', String(phaseMs), '200', String(intentMs), String(waitMs)], { execArgv: ['--import', 'tsx'] });
      const ready = new Promise<void>((resolve) => child.once('message', () => resolve()));
      const done = new Promise<{ waits: number[]; timeouts: number }>((resolve, reject) => {
        child.on('message', (m: { waits?: number[]; timeouts?: number }) => m.waits && resolve({ waits: m.waits, timeouts: m.timeouts ?? 0 }));
        child.once('exit', (code) => (code === 0 ? undefined : reject(new Error(`writer child exited ${code}`))));
      });
      await ready;
      const readers = stats(await runFor(phaseMs, 16, reader, 0));
      return { readers, ...(await done) };
    };
    log('[bench] writers: 16 readers alone (acquireRead, and tryAcquireRead as the no-wait-machinery baseline)');
    const aloneA = stats(await runFor(phaseMs / 2, 16, reader));
    const tryA = stats(await runFor(phaseMs / 2, 16, tryReader));
    log('[bench] writers: 16 readers + a writer in another process every ~200 ms (writer preference on)');
    const on = await withWriterChild(1000, 30_000);
    log('[bench] writers: the same with writer preference off (writerIntentMs 0, waitMs 2000)');
    const off = await withWriterChild(0, 2000);
    log('[bench] writers: 16 readers alone again');
    const aloneB = stats(await runFor(phaseMs / 2, 16, reader));
    const tryB = stats(await runFor(phaseMs / 2, 16, tryReader));
    const aloneOps = (aloneA.opsPerSec + aloneB.opsPerSec) / 2;
    const tryOps = (tryA.opsPerSec + tryB.opsPerSec) / 2;
    const sw = sortedCopy(on.waits);
    const swOff = sortedCopy(off.waits);
    const sh = sortedCopy(holds);
    writers = {
      readHoldMs: READ_HOLD,
      readersAloneOpsPerSec: aloneOps,
      readersAloneTryAcquireOpsPerSec: tryOps,
      waitingMachineryCost: 1 - aloneOps / tryOps,
      readersWithWriterOpsPerSec: on.readers.opsPerSec,
      readerDrop: 1 - on.readers.opsPerSec / aloneOps,
      readHoldP99: percentile(sh, 99),
      readHoldMax: sh[sh.length - 1],
      writerGrants: on.waits.length,
      writerWaitP50: percentile(sw, 50),
      writerWaitP99: percentile(sw, 99),
      writerWaitMax: sw[sw.length - 1],
      intentOff: {
        readersOpsPerSec: off.readers.opsPerSec,
        writerGrants: off.waits.length,
        writerTimeouts2s: off.timeouts,
        writerWaitP50: percentile(swOff, 50),
        writerWaitMax: swOff[swOff.length - 1],
      },
    };
  }

  let scale: ScaleReport | undefined;
  if (flag('scale')) scale = await runScale(server.url, { seconds, log });

  // ---- output ------------------------------------------------------------------------------
  const fmt = (n: number | null | undefined, d = 0): string => (n === undefined || n === null || Number.isNaN(n) ? '-' : n.toFixed(d));
  const lines = [
    `| case | conc. | ops/s | p50 ms | p99 ms | ratio | CPU µs/op client+server | note |`,
    `|---|--:|--:|--:|--:|---|--:|---|`,
    ...rows.map((r) => `| ${r.name} | ${r.concurrency} | ${fmt(r.stats.opsPerSec)} | ${fmt(r.stats.p50, 2)} | ${fmt(r.stats.p99, 2)} | ${Object.entries(r.ratios).map(([k, v]) => `${v.toFixed(2)} ${k}`).join(', ')} | ${fmt(r.stats.clientCpuUsPerOp)}+${fmt(r.stats.serverCpuUsPerOp)} | ${r.note ?? ''} |`),
  ];
  const machine = `${cpus().length} cores (${cpus()[0]?.model ?? '?'}), ${(totalmem() / 2 ** 30).toFixed(1)} GiB, Node ${process.version}, ${version} (${server.kind === 'local' ? 'throwaway server' : server.kind})`;
  console.log(`\nmysql-rwlock benchmark — ${machine}\n${quick ? 'quick run' : 'full run'}: ${seconds} s per case × ${rounds} round(s)\n`);
  console.log(lines.join('\n'));
  if (redisNote) console.log(`\n${redisNote}`);
  const t = (name: string, c: number, key: string): number | undefined => rows.find((r) => r.name.startsWith(name) && r.concurrency === c)?.ratios[key];
  const rel = (a: string, b: string, c: number): number | undefined => {
    const x = rows.find((r) => r.name.startsWith(a) && r.concurrency === c)?.stats.opsPerSec;
    const y = rows.find((r) => r.name.startsWith(b) && r.concurrency === c)?.stats.opsPerSec;
    return x !== undefined && y !== undefined ? x / y : undefined;
  };
  const targets: Array<[string, number | undefined, number]> = [];
  for (const c of [1, 16]) {
    targets.push([`1. write cycle (distinct) x ceiling/2 @${c}`, t('lib: tryAcquireWrite+release, distinct', c, 'x ceiling/2'), c === 1 ? 0.55 : 0.45]);
    targets.push([`1. read cycle (distinct) x ceiling/2 @${c}`, t('lib: tryAcquireRead+release, distinct', c, 'x ceiling/2'), c === 1 ? 0.55 : 0.45]);
  }
  for (const c of [1, 16]) targets.push([`2. fenced withWriteLock x plain tx (distinct) @${c}`, t('fenced withWriteLock + 1-row UPDATE, distinct', c, 'x plain tx'), 0.3]);
  for (const c of [1, 16]) {
    targets.push([`3. write cycle x reference write cycle @${c}`, rel('lib: tryAcquireWrite+release, distinct', 'reference flow: write', c), 1.2]);
    targets.push([`3. read cycle x reference read cycle @${c}`, rel('lib: tryAcquireRead+release, distinct', 'reference flow: read', c), 1.2]);
    targets.push([`3. fenced op x reference fenced op @${c}`, rel('fenced withWriteLock + 1-row UPDATE, distinct', 'reference fenced', c), 1.4]);
  }
  if (contention) {
    targets.push(['4. 32 waiters x uncontended (1 ms hold)', contention.ratio as number, 0.5]);
    targets.push(['4. max wait / (2 x 32 x 1 ms)', (contention.waitMax as number) / 64, -1]);
    targets.push(['4. max wait / FIFO ideal (31 x measured cycle)', (contention.waitMax as number) / (contention.fifoIdealWaitMs as number), -2]);
  }
  if (writers) {
    targets.push(['5. writer max wait / (2 x longest read hold)', (writers.writerWaitMax as number) / (2 * (writers.readHoldMax as number)), -1]);
    targets.push(['5. reader throughput cost of the wait path, no writers (acquireRead vs tryAcquireRead)', writers.waitingMachineryCost as number, -0.1]);
    targets.push(['5. (info) reader throughput drop with a writer every ~200 ms', writers.readerDrop as number, -0.1]);
  }
  if (scale) {
    targets.push(['6. cycle @1M resources x @1k resources', scale.cycleRatio, 0.8]);
    targets.push(['6. reap 100k stale grants, seconds (<= 10)', scale.reapSeconds, -10]);
    targets.push(['6. (info) reap 100k while 8 workers acquire, seconds', scale.reapSecondsUnderLoad, -10]);
    targets.push(['6. acquire p99 during reap / without', scale.p99Ratio, -1.5]);
  }
  console.log('\n| target | measured | goal | met |\n|---|--:|--:|---|');
  for (const [name, v, goal] of targets) {
    // goal > 0: at least goal; goal < 0: at most |goal|
    const met = v === undefined ? '-' : goal >= 0 ? v >= goal : v <= -goal;
    console.log(`| ${name} | ${fmt(v, 3)} | ${goal >= 0 ? '>= ' : '<= '}${Math.abs(goal)} | ${met === '-' ? '-' : met ? 'yes' : 'NO'} |`);
  }
  if (contention) {
    console.log(`\ncontention: uncontended 1-ms-hold cycle ${fmt((contention.uncontendedWith1msHold as Stats).opsPerSec)}/s, 32 waiters ${fmt((contention.contended32 as Stats).opsPerSec)}/s` +
      ` (${fmt(contention.ratio as number, 2)}x; ${fmt(contention.ratioToNoHoldCycle as number, 2)}x the no-hold hot cycle); waits p50 ${fmt(contention.waitP50 as number, 1)} ms, p99 ${fmt(contention.waitP99 as number, 1)} ms, max ${fmt(contention.waitMax as number, 1)} ms (bound 64 ms; FIFO ideal ${fmt(contention.fifoIdealWaitMs as number, 1)} ms)`);
  }
  if (writers) {
    console.log(`writers: readers alone ${fmt(writers.readersAloneOpsPerSec as number)}/s, with a writer ${fmt(writers.readersWithWriterOpsPerSec as number)}/s (drop ${fmt(100 * (writers.readerDrop as number), 1)}%);` +
      ` read hold p99 ${fmt(writers.readHoldP99 as number, 1)} ms max ${fmt(writers.readHoldMax as number, 1)} ms; writer waits (${writers.writerGrants as number}) p50 ${fmt(writers.writerWaitP50 as number, 1)} ms, p99 ${fmt(writers.writerWaitP99 as number, 1)} ms, max ${fmt(writers.writerWaitMax as number, 1)} ms`);
    const off = writers.intentOff as Record<string, number>;
    console.log(`writers, no wait machinery: tryAcquireRead readers ${fmt(writers.readersAloneTryAcquireOpsPerSec as number)}/s vs acquireRead ${fmt(writers.readersAloneOpsPerSec as number)}/s;` +
      ` writer preference OFF: ${off.writerGrants} writer grants, ${off.writerTimeouts2s} timeouts after 2 s, wait p50 ${fmt(off.writerWaitP50, 1)} ms max ${fmt(off.writerWaitMax, 1)} ms, readers ${fmt(off.readersOpsPerSec)}/s`);
  }
  if (scale) console.log(`scale: ${JSON.stringify(scale)}`);
  const total = (Date.now() - started) / 1000;
  console.log(`\ntotal ${total.toFixed(0)} s`);
  Object.assign(report, { machine, server: server.description, serverArgs, serverVersion: version, quick, seconds, rounds, rows, contention, writers, scale, targets, redisNote, totalSeconds: total, at: new Date().toISOString() });
  const dir = fileURLToPath(new URL('./results/', import.meta.url));
  mkdirSync(dir, { recursive: true });
  const file = `${dir}bench-${new Date().toISOString().replace(/[:.]/g, '-')}${quick ? '-quick' : ''}.json`;
  writeFileSync(file, JSON.stringify(report, null, 2));
  log(`[bench] wrote ${file}`);
} finally {
  await Promise.all(raws.map((r) => r.end().catch(() => undefined)));
  await redis?.quit().catch(() => undefined);
  await knex.destroy();
  await dropDatabase(server.url, dbName).catch(() => undefined);
  await server.stop();
}
