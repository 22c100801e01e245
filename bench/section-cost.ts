// Where a one-commit section's server CPU goes: the same one-row transaction with the lock's parts
// added one at a time, on one raw mysql2 connection, each a fixed number of operations one after
// another, in 3 interleaved rounds, the server process's CPU per operation read from /proc (a server
// on this machine, found by its port). Not part of `npm run bench`: it answers one question, for
// docs/performance-sections.md. Usage: MYSQL_URL=mysql://root@127.0.0.1:3306/ npx tsx bench/section-cost.ts [--n=2000]
import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import { connectKnex, createDatabase, dropDatabase, parseMysqlUrl } from '../harness/database.js';
import { migrate } from '../src/admin/index.js';
import { serverCpuUs, watchServerCpu } from './lib/run.js';
import { SECTION_BEGIN_BARE_ROUTINE, SECTION_COMMIT_BARE_ROUTINE } from '../src/sql/routines-section.js';

const url = process.env.MYSQL_URL;
if (!url) throw new Error('MYSQL_URL names the server (one on this machine, for its CPU)');
const n = Number(process.argv.find((a) => a.startsWith('--n='))?.slice(4) ?? 2000);
if (watchServerCpu(Number(new URL(url).port || 3306)) === undefined)
  throw new Error('no server process on this machine listens on that port: its CPU cannot be read');
const database = `rwl_section_cost_${randomBytes(3).toString('hex')}`;
await createDatabase(url, database);
const knex = connectKnex(url, database);
await migrate(knex);
await knex.destroy();
const c = await mysql.createConnection({ ...parseMysqlUrl(url), database });
try {
  await c.query('CREATE TABLE probe (id INT PRIMARY KEY, n INT NOT NULL) ENGINE=InnoDB');
  await c.query('INSERT INTO probe VALUES (1, 0)');
  await c.query("INSERT INTO t_read_write_lock (resource_id) VALUES ('cost')");
  await c.query("INSERT INTO t_lock_gate (resource_id) VALUES ('cost')");
  await c.query('CREATE PROCEDURE empty_call() BEGIN SELECT 1 AS outcome; END');
  // Prototypes, in this database only, of two choices issue 40 asks to measure before building them.
  // The history row written once, released, by the commit's call (no row at the take, no UPDATE).
  await c.query(
    SECTION_COMMIT_BARE_ROUTINE.replace(
      'rwlock_section_commit_bare(IN p_idle TINYINT UNSIGNED)',
      'proto_commit_logged(IN p_token VARBINARY(16), IN p_idle TINYINT UNSIGNED)',
    ).replace(
      '  COMMIT;',
      `  INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token, released_at, released_by)
  VALUES ('cost', 0, 2, UTC_TIMESTAMP(6), 1, 'me', p_token, UTC_TIMESTAMP(6), 5);
  COMMIT;`,
    ),
  );
  // The session bounds saved and set in one SET statement instead of four.
  const oneSet = SECTION_BEGIN_BARE_ROUTINE.replace('rwlock_section_begin_bare(', 'proto_begin_bare_one_set(').replace(
    /SET @rwlock_lwt = [^\n]*\n\s*SET SESSION innodb_lock_wait_timeout = p_lock_wait_sec;\n\s*IF p_idle_sec IS NOT NULL THEN\n\s*SET @rwlock_idle = @@SESSION.wait_timeout;\n\s*SET SESSION wait_timeout = p_idle_sec;\n\s*END IF;/,
    `SET @rwlock_lwt = @@SESSION.innodb_lock_wait_timeout, SESSION innodb_lock_wait_timeout = p_lock_wait_sec,
    @rwlock_idle = @@SESSION.wait_timeout, SESSION wait_timeout = IFNULL(p_idle_sec, @@SESSION.wait_timeout);`,
  );
  if (!oneSet.includes('IFNULL(p_idle_sec')) throw new Error('the bounds prototype did not apply');
  await c.query(oneSet);
  const work = (): Promise<unknown> => c.query('UPDATE probe SET n = n + 1 WHERE id = 1');
  const takeArgs = (): unknown[] => [
    Buffer.from('\x04cost', 'latin1'),
    Buffer.from('w'),
    Buffer.from('me'),
    randomBytes(16),
    30,
    10,
    0,
  ];
  const call = (name: string): string =>
    `CALL ${name}(?, CONVERT(? USING ascii), CONVERT(? USING utf8mb4), ?, ?, ?, ?)`;
  const logRow = `INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token, released_at, released_by)
    VALUES ('cost', 0, 2, UTC_TIMESTAMP(6), 1, 'me', ?, UTC_TIMESTAMP(6), 5)`;
  const cases: Record<string, () => Promise<void>> = {
    'plain transaction (BEGIN, the UPDATE, COMMIT)': async () => {
      await c.query('BEGIN');
      await work();
      await c.query('COMMIT');
    },
    'the same, plus an empty CALL': async () => {
      await c.query('BEGIN');
      await c.query('CALL empty_call()');
      await work();
      await c.query('COMMIT');
    },
    'the same, plus a log row INSERT': async () => {
      await c.query('BEGIN');
      await c.query(logRow, [randomBytes(16)]);
      await work();
      await c.query('COMMIT');
    },
    'the same, plus gate, lock row and log row as statements': async () => {
      await c.query('BEGIN');
      await c.query("SELECT 1 FROM t_lock_gate WHERE resource_id = 'cost' FOR UPDATE");
      await c.query(
        "UPDATE t_read_write_lock SET version = version + 1 WHERE resource_id = 'cost' AND w_count = 0 AND r_count = 0",
      );
      await c.query(logRow, [randomBytes(16)]);
      await work();
      await c.query('COMMIT');
    },
    'BEGIN, rwlock_section_take, the UPDATE, COMMIT': async () => {
      await c.query('BEGIN');
      await c.query(call('rwlock_section_take'), takeArgs());
      await work();
      await c.query('COMMIT');
    },
    'a section: rwlock_section_begin, the UPDATE, rwlock_section_commit': async () => {
      const [sets] = (await c.query(call('rwlock_section_begin'), takeArgs())) as unknown as [
        Array<Array<{ ids: string }>>,
      ];
      await work();
      await c.query('CALL rwlock_section_commit(CONVERT(? USING ascii), 1)', [Buffer.from(String(sets[0]![0]!.ids))]);
    },
    'a one-resource section: rwlock_section_begin_one, the UPDATE, rwlock_section_commit_one': async () => {
      const [sets] = (await c.query(call('rwlock_section_begin_one'), takeArgs())) as unknown as [
        Array<Array<{ ids: string }>>,
      ];
      await work();
      await c.query('CALL rwlock_section_commit_one(CONVERT(? USING ascii), 1)', [
        Buffer.from(String(sets[0]![0]!.ids)),
      ]);
    },
    'a one-resource section without history: rwlock_section_begin_bare, the UPDATE, rwlock_section_commit_bare':
      async () => {
        await c.query(call('rwlock_section_begin_bare'), takeArgs());
        await work();
        await c.query('CALL rwlock_section_commit_bare(1)');
      },
    'prototype: the history row written once by the commit call (begin_bare, the UPDATE, INSERT + COMMIT)':
      async () => {
        await c.query(call('rwlock_section_begin_bare'), takeArgs());
        await work();
        await c.query('CALL proto_commit_logged(?, 1)', [randomBytes(16)]);
      },
    'prototype: without history, the bounds in one SET (begin, the UPDATE, rwlock_section_commit_bare)': async () => {
      await c.query(call('proto_begin_bare_one_set'), takeArgs());
      await work();
      await c.query('CALL rwlock_section_commit_bare(1)');
    },
  };
  const perOp = new Map<string, number[]>();
  for (let round = 0; round < 3; round++)
    for (const [name, op] of Object.entries(cases)) {
      for (let i = 0; i < 100; i++) await op();
      const before = serverCpuUs()!;
      for (let i = 0; i < n; i++) await op();
      perOp.set(name, [...(perOp.get(name) ?? []), (serverCpuUs()! - before) / n]);
    }
  const [version] = (await c.query('SELECT VERSION() AS v')) as unknown as [Array<{ v: string }>];
  console.log(`server CPU per operation, µs (3 rounds of ${n}), ${version[0]!.v}:`);
  for (const [name, v] of perOp) console.log(`| ${name} | ${v.map((x) => x.toFixed(0)).join(' / ')} |`);
} finally {
  await c.end();
  await dropDatabase(url, database);
}
