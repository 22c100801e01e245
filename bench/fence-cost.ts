// What sending the fence and the COMMIT as one call (rwlock_fence_commit, migration 015) saves a
// fenced withWriteLock: the same one-row write through the library as users call it, on two
// databases of one server, one with migration 015 and one without it (the fence and the COMMIT
// apart), beside the plain knex transaction; 3 interleaved rounds of a fixed number of operations
// one after another. Per operation: wall time, this process's CPU (process.cpuUsage) and the server
// process's CPU (from /proc: a server on this machine, found by its port). Not part of
// `npm run bench`: it answers one question, for docs/cost.md.
// Usage: MYSQL_URL=mysql://root@127.0.0.1:3306/ npx tsx bench/fence-cost.ts [--n=2000]
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { connectKnex, createDatabase, dropDatabase } from '../harness/database.js';
import { migrate } from '../src/admin/index.js';
import { createLockManager } from '../src/index.js';
import { serverCpuUs, watchServerCpu } from './lib/run.js';

const url = process.env.MYSQL_URL;
if (!url) throw new Error('MYSQL_URL names the server (one on this machine, for its CPU)');
const n = Number(process.argv.find((a) => a.startsWith('--n='))?.slice(4) ?? 2000);
if (watchServerCpu(Number(new URL(url).port || 3306)) === undefined)
  throw new Error('no server process on this machine listens on that port: its CPU cannot be read');

/** A database with the current schema and one probe row; `apart`: without rwlock_fence_commit. */
async function database(apart: boolean): Promise<{ name: string; knex: Knex }> {
  const name = `rwl_fence_cost_${randomBytes(3).toString('hex')}`;
  await createDatabase(url!, name);
  const knex = connectKnex(url!, name, { poolMax: 2 });
  await migrate(knex);
  if (apart) await knex.raw('DROP PROCEDURE rwlock_fence_commit');
  await knex.raw('CREATE TABLE probe (id INT PRIMARY KEY, n INT NOT NULL) ENGINE=InnoDB');
  await knex.raw('INSERT INTO probe VALUES (1, 0)');
  return { name, knex };
}

const one = await database(false);
const apart = await database(true);
try {
  const write = (trx: Knex.Transaction): Promise<unknown> => trx('probe').where({ id: 1 }).increment('n', 1);
  const inOne = createLockManager({ knex: one.knex, owner: 'fence-cost' });
  const twoCalls = createLockManager({ knex: apart.knex, owner: 'fence-cost' });
  const cases: Record<string, () => Promise<unknown>> = {
    'plain knex transaction': () => one.knex.transaction(write),
    'fenced withWriteLock, fence and COMMIT apart (no migration 015)': () => twoCalls.withWriteLock('cost', write),
    'fenced withWriteLock, fence and COMMIT in one call': () => inOne.withWriteLock('cost', write),
  };
  const perOp = new Map<string, Array<{ wall: number; client: number; server: number }>>();
  for (let round = 0; round < 3; round++)
    for (const [name, op] of Object.entries(cases)) {
      for (let i = 0; i < 200; i++) await op();
      const server = serverCpuUs()!;
      const client = process.cpuUsage();
      const wall = performance.now();
      for (let i = 0; i < n; i++) await op();
      const used = process.cpuUsage(client);
      perOp.set(name, [
        ...(perOp.get(name) ?? []),
        {
          wall: ((performance.now() - wall) * 1000) / n,
          client: (used.user + used.system) / n,
          server: (serverCpuUs()! - server) / n,
        },
      ]);
    }
  const [[version]] = (await one.knex.raw('SELECT VERSION() AS v')) as unknown as [[{ v: string }]];
  console.log(
    `per operation, µs (3 rounds of ${n}): wall / client CPU / server CPU, Node ${process.version}, ${version.v}`,
  );
  const r = (v: number[]): string => v.map((x) => x.toFixed(0)).join(', ');
  for (const [name, v] of perOp)
    console.log(
      `| ${name} | ${r(v.map((x) => x.wall))} | ${r(v.map((x) => x.client))} | ${r(v.map((x) => x.server))} |`,
    );
  await inOne.close();
  await twoCalls.close();
} finally {
  for (const d of [one, apart]) {
    await d.knex.destroy();
    await dropDatabase(url, d.name);
  }
}
