// Benchmark of mysql-rwlock against the cheapest possible commit (the "ceiling"), a plain
// transaction, the reference article's flow, MySQL GET_LOCK and a Redis lock, all in one run on
// one server so that the ratios hold on a noisy machine. The cases live in bench/cases/, one file
// per family, each with the targets it answers; this file runs them and prints the tables.
//
//   npm run bench                 full run (~6 min): 4 interleaved rounds of 1 s per case
//   npm run bench:smoke           quick run (~1.5 min): 1 round of 0.5 s, a small reaper case (CI smoke;
//                                 it fails on errors, never on a target not met)
//   npm run bench -- --scale      also the 1M-resource / 10M-log-row case (slow to set up)
//   options: --seconds=N --rounds=N
//            --only=ceiling,lib,fenced,sections,ref,peers,lan,breakdown,contention,handover,writers,reaper,scale
//            (or none; a target whose cases a family left out prints n/a with the values it lacks)
//            --server-arg=--innodb-buffer-pool-size=2G (flags for a throwaway server)
//
// Server: RWLOCK_TEST_SERVER=mariadb-10.11|mysql-9.7|mariadb-11.8 starts a throwaway server of that
// flavour (and wins over MYSQL_URL); else MYSQL_URL; else what harness/server.ts finds.
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import mysql from 'mysql2/promise';
import { connectKnex, createDatabase, dropDatabase, parseMysqlUrl } from '../harness/database.js';
import { findServer } from '../harness/server.js';
import { createLockManager } from '../src/index.js';
import { migrate } from '../src/admin/index.js';
import { contention } from './cases/contention.js';
import { fenced } from './cases/fenced.js';
import { handover } from './cases/handover.js';
import { lan } from './cases/lan.js';
import { peers } from './cases/peers.js';
import { procedures } from './cases/procedures.js';
import { reaper } from './cases/reaper.js';
import { reference } from './cases/reference.js';
import { scale } from './cases/scale.js';
import { sections } from './cases/sections.js';
import { throughput, CEILING } from './cases/throughput.js';
import { writers } from './cases/writers.js';
import { breakdown } from './cases/breakdown.js';
import { Results, type BenchContext, type Family, type RoundCase } from './lib/family.js';
import { fmt } from './lib/format.js';
import { pooled, runFor, stats, watchServerCpu, type Sample } from './lib/run.js';
import { evaluate, targetTable } from './lib/targets.js';

/** In the order they run; round cases of all of them are interleaved first. */
const FAMILIES: Family[] = [
  throughput,
  fenced,
  sections,
  procedures,
  reference,
  peers,
  lan,
  breakdown,
  contention,
  handover,
  writers,
  reaper,
  scale,
];

const argv = process.argv.slice(2);
const flag = (name: string): boolean => argv.includes(`--${name}`);
const option = (name: string): string | undefined => argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
const quick = flag('quick');
const seconds = Number(option('seconds') ?? (quick ? 0.5 : 1));
const rounds = Number(option('rounds') ?? (quick ? 1 : 4));
const only = option('only')?.split(',');
const wanted = (f: Family): boolean =>
  (only ? f.groups.some((g) => only.includes(g)) : !f.optIn) || (f === scale && flag('scale'));
const log = (line: string): void => void process.stderr.write(`${line}\n`);

const started = Date.now();
if (process.env.RWLOCK_TEST_SERVER && process.env.MYSQL_URL) {
  log(`[bench] RWLOCK_TEST_SERVER=${process.env.RWLOCK_TEST_SERVER}: MYSQL_URL ignored`);
  delete process.env.MYSQL_URL;
}
const serverArgs = argv.filter((a) => a.startsWith('--server-arg=')).map((a) => a.slice('--server-arg='.length));
const server = await findServer({ log: (l) => log(`[server] ${l}`), extraArgs: serverArgs });
log(`[bench] server: ${server.description}`);
const dbName = `bench_${process.pid}_${Date.now().toString(36)}`;
await createDatabase(server.url, dbName);
const knex = connectKnex(server.url, dbName, { poolMax: 40 });
const raws: mysql.Connection[] = [];
const families = FAMILIES.filter(wanted);
try {
  await migrate(knex);
  await knex.raw('CREATE TABLE bench_ceiling (id INT NOT NULL PRIMARY KEY, v BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB');
  await knex.raw(
    'CREATE TABLE bench_account (id INT NOT NULL PRIMARY KEY, balance BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB',
  );
  await knex.raw(
    'INSERT INTO bench_ceiling (id) SELECT seq FROM (SELECT a.n + 10 * b.n + 100 * c.n + 1 AS seq FROM (SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) a, (SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) b, (SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) c) s',
  );
  await knex.raw('INSERT INTO bench_account (id) SELECT id FROM bench_ceiling');
  const version = ((await knex.raw('SELECT VERSION() AS v')) as unknown as [[{ v: string }]])[0][0].v;
  const conn = parseMysqlUrl(server.url);
  for (let i = 0; i < 16; i++) raws.push(await mysql.createConnection({ ...conn, database: dbName }));
  const ctx: BenchContext = {
    server,
    dbName,
    knex,
    locks: createLockManager({ knex }),
    raws,
    seconds,
    rounds,
    quick,
    log,
  };
  const results = new Results();

  // ---- interleaved rounds of the round cases ------------------------------------------------
  const cases: RoundCase[] = [];
  const skipped: string[] = [];
  for (const f of families) {
    for (const c of (await f.roundCases?.(ctx)) ?? []) {
      if (only && !only.includes(c.group)) continue;
      if ('skip' in c) {
        results.skip(c.id, c.skip);
        skipped.push(`skipped: ${c.label}: ${c.skip}`);
        log(`[bench] skipped: ${c.label}: ${c.skip}`);
      } else cases.push(c);
    }
  }
  const runs = cases.flatMap((c) => (c.concurrency ?? [1, 16]).map((concurrency) => ({ c, concurrency })));
  const port = Number(new URL(server.url).port || 3306);
  const serverPid = watchServerCpu(port);
  const cpuSource =
    serverPid === undefined
      ? 'n/a (no server process on this machine listens on that port)'
      : `/proc/${serverPid}/stat (utime + stime)${server.kind === 'MYSQL_URL' ? "; a shared server: its CPU includes other clients' work" : ''}`;
  log(`[bench] server CPU: ${cpuSource}`);
  const samples = new Map<string, Sample[]>();
  for (let r = 0; r < rounds && runs.length; r++) {
    // A new order every round (seeded: same order every run), with a short idle gap between cases,
    // so no case always follows the same heavy case and inherits its purge/flush backlog.
    let seed = 7 + r;
    const rnd = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const order = r === 0 ? [...runs] : [...runs].sort(() => rnd() - 0.5);
    for (const { c, concurrency } of order) {
      await sleep(quick ? 50 : 200);
      log(`[bench] round ${r + 1}/${rounds}: ${c.label} @${concurrency}`);
      const s = await runFor(seconds * 1000, concurrency, c.op, r === 0 ? 300 : 150);
      const key = Results.key(c.id, concurrency);
      samples.set(key, [...(samples.get(key) ?? []), s]);
    }
  }
  for (const { c, concurrency } of runs)
    results.set(c.id, { ...stats(pooled(samples.get(Results.key(c.id, concurrency)) ?? [])) }, concurrency);

  // ---- the families' own scenarios ----------------------------------------------------------
  for (const f of families) await f.run?.(ctx, results);

  // ---- output ------------------------------------------------------------------------------
  const rowRatios = (c: RoundCase, concurrency: number): Record<string, number> => {
    const ops = results.value(c.id, 'opsPerSec', concurrency);
    const out: Record<string, number> = {};
    for (const { name, to, factor } of [{ name: 'x ceiling', to: CEILING }, ...(c.ratios ?? [])] as Array<{
      name: string;
      to: string;
      factor?: number;
    }>) {
      const other = results.value(to, 'opsPerSec', concurrency);
      if (ops !== undefined && other) out[name] = ops / ((factor ?? 1) * other);
    }
    return out;
  };
  const rows = runs.map(({ c, concurrency }) => {
    const s = results.get(c.id, concurrency)!;
    const note =
      s.attemptsPerSec! > s.opsPerSec! * 1.01
        ? `${s.attemptsPerSec!.toFixed(0)} attempts/s, ${((100 * s.opsPerSec!) / s.attemptsPerSec!).toFixed(0)}% granted`
        : '';
    return { id: c.id, group: c.group, name: c.label, concurrency, stats: s, ratios: rowRatios(c, concurrency), note };
  });
  const machine = `${cpus().length} cores (${cpus()[0]?.model ?? '?'}), ${(totalmem() / 2 ** 30).toFixed(1)} GiB, Node ${process.version}, ${version} (${server.kind === 'MYSQL_URL' ? 'MYSQL_URL' : 'throwaway server'})`;
  console.log(
    `\nmysql-rwlock benchmark — ${machine}\n${quick ? 'quick run' : 'full run'}: ${seconds} s per case × ${rounds} round(s); server CPU from ${cpuSource}\n`,
  );
  console.log(
    [
      `| case | conc. | ops/s | p50 ms | p99 ms | ratio | CPU µs/op client+server | note |`,
      `|---|--:|--:|--:|--:|---|--:|---|`,
      ...rows.map(
        (r) =>
          `| ${r.name} | ${r.concurrency} | ${fmt(r.stats.opsPerSec)} | ${fmt(r.stats.p50, 2)} | ${fmt(r.stats.p99, 2)} | ${Object.entries(
            r.ratios,
          )
            .map(([k, v]) => `${v.toFixed(2)} ${k}`)
            .join(', ')} | ${fmt(r.stats.clientCpuUsPerOp)}+${fmt(r.stats.serverCpuUsPerOp)} | ${r.note} |`,
      ),
    ].join('\n'),
  );
  if (skipped.length) console.log(`\n${skipped.join('\n')}`);
  const summary = families.flatMap((f) => f.summary?.(results) ?? []);
  if (summary.length) console.log(`\n${summary.join('\n')}`);
  // The run's name is its JSON report's: each target names it, so a figure copied elsewhere keeps its run.
  const run = `bench-${new Date().toISOString().replace(/[:.]/g, '-')}${quick ? '-quick' : ''}`;
  const targets = evaluate(
    families.flatMap((f) => f.targets),
    results,
    run,
  );
  console.log(
    `\nTargets (named by what they measure; '(retired)' rows are information), on ${version}, run ${run}:\n${targetTable(targets).join('\n')}`,
  );
  const total = (Date.now() - started) / 1000;
  console.log(`\ntotal ${total.toFixed(0)} s`);
  const report = {
    run,
    machine,
    server: server.description,
    serverArgs,
    serverVersion: version,
    serverCpu: cpuSource,
    quick,
    seconds,
    rounds,
    rows,
    results: results.toJSON(),
    targets,
    totalSeconds: total,
    at: new Date().toISOString(),
  };
  const dir = fileURLToPath(new URL('./results/', import.meta.url));
  mkdirSync(dir, { recursive: true });
  const file = `${dir}${run}.json`;
  writeFileSync(file, JSON.stringify(report, null, 2));
  log(`[bench] wrote ${file}`);
} finally {
  await Promise.all(raws.map((r) => r.end().catch(() => undefined)));
  for (const f of families) await f.close?.();
  await knex.destroy();
  await dropDatabase(server.url, dbName).catch(() => undefined);
  await server.stop();
}
