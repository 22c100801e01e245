// The operator reads at scale: list(), stats(), history() and checkLockCounts() with 1,000,000 resources, a log of
// 2,000,000 released grants and 10,000 live ones (about 4,000 of them stale, 100 with a writer waiting),
// bulk-loaded with INSERT ... SELECT. Prints each call's median and p95 over repeated runs, and
// the plan of list()'s statement. Usage: MYSQL_URL=mysql://root@127.0.0.1:3306 npx tsx bench/list-scale.ts [--runs 20]
import { parseArgs } from 'node:util';
import type { Knex } from 'knex';
import { connectKnex, createDatabase, dropDatabase } from '../harness/database.js';
import { findServer } from '../harness/server.js';
import { createLockManager } from '../src/index.js';
import { checkLockCounts, migrate } from '../src/admin/index.js';
import { listQuery } from '../src/sql/operate.js';

const RESOURCES = 1_000_000;
const RELEASED = 2_000_000;
const LIVE_EVERY = 100; // a live write grant on every 100th resource: 10,000
const DIGITS =
  'SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9';

async function load(db: Knex, log: (l: string) => void): Promise<void> {
  const t0 = performance.now();
  await db.raw('CREATE TABLE bench_nums (n INT NOT NULL PRIMARY KEY) ENGINE=InnoDB');
  await db.raw(`INSERT INTO bench_nums (n) SELECT a.d + 10*b.d + 100*c.d + 1000*e.d + 10000*f.d + 100000*g.d
    FROM (${DIGITS}) a, (${DIGITS}) b, (${DIGITS}) c, (${DIGITS}) e, (${DIGITS}) f, (${DIGITS}) g`);
  await db.raw(`INSERT INTO t_read_write_lock (resource_id, w_count, r_count, version)
    SELECT CONVERT(CONCAT('res-', n) USING binary), IF(n % ${LIVE_EVERY} = 0, 1, 0), 0, 1 FROM bench_nums`);
  log(`[list-scale] ${RESOURCES.toLocaleString('en')} resources (${((performance.now() - t0) / 1000).toFixed(0)} s)`);
  for (let chunk = 0; chunk < RELEASED / 1_000_000; chunk++) {
    await db.raw(
      `INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token, released_at, released_by)
      SELECT CONVERT(CONCAT('res-', n) USING binary), n % 2, 2, UTC_TIMESTAMP(6) - INTERVAL (2000000 - ? * 1000000 - n) SECOND, 1, 'bulk',
             UNHEX(LPAD(HEX(? * 1000000 + n), 32, '0')), UTC_TIMESTAMP(6) - INTERVAL (2000000 - ? * 1000000 - n) SECOND + INTERVAL 1 SECOND, 1
        FROM bench_nums`,
      [chunk, chunk, chunk],
    );
    log(
      `[list-scale] released grants ${((chunk + 1) * 1_000_000).toLocaleString('en')} (${((performance.now() - t0) / 1000).toFixed(0)} s)`,
    );
  }
  // Live write grants on every 100th resource, granted 15 to 90 minutes ago: about 4,000 of them are
  // older than the 1-hour cutoff used below, so stale.
  await db.raw(`INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token)
    SELECT CONVERT(CONCAT('res-', n) USING binary), 0, 0, UTC_TIMESTAMP(6) - INTERVAL (5400 - n / ${LIVE_EVERY} * 0.45) SECOND, 0,
           CONCAT('worker-', n % 7), UNHEX(LPAD(HEX(50000000 + n), 32, '0'))
      FROM bench_nums WHERE n % ${LIVE_EVERY} = 0`);
  // Joined by primary key: an IN-subquery over an expression is not turned into look-ups.
  await db.raw(`UPDATE t_read_write_lock AS l JOIN bench_nums AS b ON l.resource_id = CONVERT(CONCAT('res-', b.n) USING binary)
      SET l.w_wait_until = UTC_TIMESTAMP(6) + INTERVAL 1 DAY
    WHERE b.n % ${LIVE_EVERY * 100} = 0`);
  await db.raw('ANALYZE TABLE t_lock_log, t_read_write_lock');
  log(`[list-scale] loaded in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
}

async function timed(runs: number, call: () => Promise<unknown>): Promise<{ medianMs: number; p95Ms: number }> {
  await call(); // warm
  const ms: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    await call();
    ms.push(performance.now() - t);
  }
  ms.sort((a, b) => a - b);
  return {
    medianMs: ms[Math.floor(ms.length / 2)]!,
    p95Ms: ms[Math.min(ms.length - 1, Math.ceil(ms.length * 0.95) - 1)]!,
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { runs: { type: 'string', default: '20' }, keep: { type: 'boolean' } } });
  const runs = Number(values.runs);
  const server = await findServer();
  const name = `bench_list_scale_${process.pid}`;
  await createDatabase(server.url, name);
  const db = connectKnex(server.url, name, { poolMax: 4 });
  try {
    await migrate(db);
    await load(db, (l) => console.error(l));
    const locks = createLockManager({ knex: db, staleAfterMs: 3_600_000 });
    const first = await locks.list();
    const middle = (await locks.list({ limit: 5000 })).next!;
    const counts = {
      live: (await locks.stats()).live,
      firstPage: first.grants.length,
      stale: (await locks.list({ staleOnly: true, limit: 10_000 })).grants.length,
      countDisagreements: (await checkLockCounts(db)).disagreements.length,
    };
    const plan = async (sql: string, params: unknown[]): Promise<unknown[]> =>
      ((await db.raw(`EXPLAIN ${sql}`, params as Knex.RawBinding[])) as unknown as [Array<Record<string, unknown>>])[0]; // MariaDB's tabular plan; on MySQL set explain_format=TRADITIONAL.map((r) => ({ table: r.table, type: r.type, key: r.key, rows: r.rows, Extra: r.Extra }));
    const q = listQuery(
      { mode: undefined, owner: undefined, staleOnly: false, resourcePrefix: undefined, limit: 100, after: undefined },
      3_600_000,
    );
    const report = {
      server: server.description,
      resources: RESOURCES,
      releasedGrants: RELEASED,
      counts,
      runs,
      'list() first page of 100': await timed(runs, () => locks.list()),
      'list() page after the 5000th grant': await timed(runs, () => locks.list({ after: middle })),
      'list({ staleOnly }) first page': await timed(runs, () => locks.list({ staleOnly: true })),
      'list({ owner }) first page': await timed(runs, () => locks.list({ owner: 'worker-3' })),
      'list({ resourcePrefix: "res-99" })': await timed(runs, () => locks.list({ resourcePrefix: 'res-99' })),
      'list({ limit: 10000 }) all live grants': await timed(Math.max(3, Math.floor(runs / 4)), () =>
        locks.list({ limit: 10_000 }),
      ),
      'stats()': await timed(runs, () => locks.stats()),
      'history() of a resource with a live grant': await timed(runs, () => locks.history('res-999900')),
      'history() of a resource granted only 2,000,000 grants ago': await timed(3, () => locks.history('res-0')),
      'checkLockCounts() (every count agrees)': await timed(3, () => checkLockCounts(db)),
      listPlan: await plan(q.sql, q.params),
    };
    console.log(JSON.stringify(report, null, 2));
  } finally {
    await db.destroy();
    if (!values.keep) await dropDatabase(server.url, name);
    await server.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
