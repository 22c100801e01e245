// The client's CPU per operation: a one-row write as a plain knex transaction, fenced by a durable
// grant, and as a one-resource section around the same statement, on one pool, in 3 interleaved rounds, read from
// process.cpuUsage(). The section's extra over the plain transaction is what the library adds in the
// application's process (its own code, knex's and mysql2's work for the calls, their replies). Not part
// of `npm run bench`: it answers one question, for docs/performance-sections.md.
// Usage: MYSQL_URL=mysql://root@127.0.0.1:3306/ npx tsx bench/client-cost.ts [--n=3000]
import { randomBytes } from 'node:crypto';
import { connectKnex, createDatabase, dropDatabase } from '../harness/database.js';
import { migrate } from '../src/admin/index.js';
import { createLockManager } from '../src/index.js';

const url = process.env.MYSQL_URL;
if (!url) throw new Error('MYSQL_URL names the server');
const n = Number(process.argv.find((a) => a.startsWith('--n='))?.slice(4) ?? 3000);
const database = `rwl_client_cost_${randomBytes(3).toString('hex')}`;
await createDatabase(url, database);
const knex = connectKnex(url, database, { poolMax: 2 });
const locks = createLockManager({ knex, owner: 'client-cost' });
try {
  await migrate(knex);
  await knex.raw('CREATE TABLE probe (id INT PRIMARY KEY, n INT NOT NULL) ENGINE=InnoDB');
  await knex.raw('INSERT INTO probe VALUES (1, 0)');
  const cases: Record<string, () => Promise<unknown>> = {
    'plain transaction': () => knex.transaction((trx) => trx('probe').where({ id: 1 }).increment('n', 1)),
    'fenced withWriteLock': () => locks.withWriteLock('cost', (trx) => trx('probe').where({ id: 1 }).increment('n', 1)),
    'one-resource write section': () =>
      locks.withWriteLock('cost', (trx) => trx('probe').where({ id: 1 }).increment('n', 1), { section: true }),
    'one-resource write section without history': () =>
      locks.withWriteLock('cost', (trx) => trx('probe').where({ id: 1 }).increment('n', 1), {
        section: true,
        history: false,
      }),
  };
  const perOp = new Map<string, number[]>();
  for (let round = 0; round < 3; round++)
    for (const [name, op] of Object.entries(cases)) {
      for (let i = 0; i < 200; i++) await op();
      const before = process.cpuUsage();
      for (let i = 0; i < n; i++) await op();
      const used = process.cpuUsage(before);
      perOp.set(name, [...(perOp.get(name) ?? []), (used.user + used.system) / n]);
    }
  const [[version]] = (await knex.raw('SELECT VERSION() AS v')) as unknown as [[{ v: string }]];
  console.log(`client CPU per operation, µs (3 rounds of ${n}), Node ${process.version}, ${version.v}:`);
  for (const [name, v] of perOp) console.log(`| ${name} | ${v.map((x) => x.toFixed(0)).join(' / ')} |`);
} finally {
  await locks.close();
  await knex.destroy();
  await dropDatabase(url, database);
}
