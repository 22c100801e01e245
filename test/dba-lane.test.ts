// A server configured as a DBA might (issue 31, items 3 and 7): a throwaway server of the lane's
// flavour (RWLOCK_TEST_SERVER, else the host's MariaDB 10.11) whose system time zone observes DST,
// with init_connect='SET autocommit=0', a global READ-UNCOMMITTED, sql_safe_updates and, on MariaDB,
// EMPTY_STRING_IS_NULL; the application and the reaper connect as users with the documented
// privileges and nothing global, so init_connect applies to them (it is skipped for users with
// SUPER or CONNECTION_ADMIN). The core lock paths run against it. Then the same server's
// max_connections is reached under 60 withWriteLock calls with leaseMs.
// covers: src/sql/session.ts, src/admin/privileges.ts, src/lock/durable/privilege-probe.ts
import knexFactory, { type Knex } from 'knex';
import mysql from 'mysql2/promise';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase, parseMysqlUrl } from '../harness/database.js';
import { chosenFlavour, startFlavour, type FoundServer } from '../harness/server.js';
import { checkLockCounts, migrate, reapStaleGrants } from '../src/admin/index.js';
import { grantStatements } from '../src/admin/privileges.js';
import { createLockManager, DatabaseUnreachableError, RwLockError } from '../src/index.js';
import { testSwitches } from '../src/test-switches.js';
import { STATUS } from '../src/types.js';
import { TEST_PROCEDURES } from './support/db.js';
import { proxyFor } from './support/proxy.js';

const DB = 'rwl_dba_lane';
const APP = 'rwl_app';
const REAPER = 'rwl_reaper';
let server: FoundServer;
let root: mysql.Connection;
let mariadb = false;
const pools: Knex[] = [];

/** A manager as the lane's application role runs it: without procedures, it has no EXECUTE to try one with. */
function lockManager(options: Parameters<typeof createLockManager>[0]): ReturnType<typeof createLockManager> {
  return createLockManager({ ...options, procedures: TEST_PROCEDURES ? 'auto' : false });
}

/** A knex pool as `user` (no password) on the lane's database. */
function poolAs(user: string, max = 10, url = server.url): Knex {
  const k = knexFactory({
    client: 'mysql2',
    connection: { ...parseMysqlUrl(url), user, password: '', database: DB },
    pool: { min: 0, max },
  });
  pools.push(k);
  return k;
}

async function rootRows<T>(sql: string, values: unknown[] = []): Promise<T[]> {
  return (await root.query(sql, values))[0] as T[];
}

async function liveGrants(): Promise<number> {
  const [row] = await rootRows<{ n: number }>(`SELECT COUNT(*) AS n FROM ${DB}.t_lock_log WHERE status = ?`, [
    STATUS.live,
  ]);
  return Number(row!.n);
}

beforeAll(async () => {
  server = await startFlavour(chosenFlavour() ?? 'mariadb-10.11', { env: { TZ: 'Europe/Berlin' } });
  await createDatabase(server.url, DB);
  root = await mysql.createConnection({ ...parseMysqlUrl(server.url), database: DB });
  mariadb = /mariadb/i.test((await rootRows<{ v: string }>('SELECT VERSION() AS v'))[0]!.v);
  const admin = knexFactory({ client: 'mysql2', connection: { ...parseMysqlUrl(server.url), database: DB } });
  await migrate(admin, { procedures: TEST_PROCEDURES });
  await admin.destroy();
  await root.query('CREATE TABLE ledger (id INT AUTO_INCREMENT PRIMARY KEY, tag VARCHAR(64) NOT NULL) ENGINE=InnoDB');
  for (const user of [APP, REAPER]) await root.query(`CREATE USER '${user}'@'%'`);
  const appRole = TEST_PROCEDURES ? 'app' : 'app-no-procedures';
  for (const sql of [
    ...grantStatements(appRole, `${APP}@%`, DB),
    `GRANT SELECT, INSERT, UPDATE, DELETE ON ${DB}.ledger TO '${APP}'@'%'`,
    ...grantStatements('reaper', `${REAPER}@%`, DB),
    ...grantStatements('checker', `${REAPER}@%`, DB),
  ])
    await root.query(sql);
  // The DBA's settings, for every connection made from now on.
  await root.query("SET GLOBAL init_connect = 'SET autocommit = 0'");
  await root.query('SET GLOBAL TRANSACTION ISOLATION LEVEL READ UNCOMMITTED');
  await root.query('SET GLOBAL sql_safe_updates = 1');
  if (mariadb) await root.query("SET GLOBAL sql_mode = CONCAT(@@GLOBAL.sql_mode, ',EMPTY_STRING_IS_NULL')");
}, 180_000);

afterAll(async () => {
  await Promise.all(pools.map((k) => k.destroy()));
  await root?.end();
  await server?.stop();
});

describe('a DBA-configured server', () => {
  it('the application user really runs with the DBA settings, in a time zone with DST', async () => {
    const app = poolAs(APP, 1);
    const [rows] = (await app.raw(
      'SELECT @@autocommit AS ac, @@sql_safe_updates AS su, @@sql_mode AS mode, @@system_time_zone AS tz, @@time_zone AS zone',
    )) as unknown as [Array<{ ac: number; su: number; mode: string; tz: string; zone: string }>];
    const [iso] = await rootRows<{ iso: string }>('SELECT @@GLOBAL.transaction_isolation AS iso').catch(() =>
      rootRows<{ iso: string }>('SELECT @@GLOBAL.tx_isolation AS iso'),
    );
    expect(rows[0]).toMatchObject({ ac: 0, su: 1, zone: 'SYSTEM' });
    expect(rows[0]!.tz).toMatch(/^CES?T$/);
    expect(iso!.iso).toBe('READ-UNCOMMITTED');
    if (mariadb) expect(rows[0]!.mode).toContain('EMPTY_STRING_IS_NULL');
  });

  it('durable write and read grants: released when release() resolves true, as another connection sees', async () => {
    const locks = lockManager({ knex: poolAs(APP, 4) });
    const w = await locks.acquireWrite('dba-1');
    expect(await liveGrants()).toBe(1);
    expect(await w.release()).toBe(true);
    const readers = await Promise.all([locks.acquireRead('dba-1'), locks.acquireRead('dba-1')]);
    expect(await liveGrants()).toBe(2);
    for (const r of readers) expect(await r.release()).toBe(true);
    expect(await liveGrants()).toBe(0);
  });

  it('with*Lock, withLocks over three resources in mixed modes, and a section commit their work and release', async () => {
    const locks = lockManager({ knex: poolAs(APP, 6) });
    await locks.withWriteLock('dba-2', (trx) => trx('ledger').insert({ tag: 'write' }), { leaseMs: 30_000 });
    await locks.withReadLock('dba-2', (trx) => trx('ledger').insert({ tag: 'read' }));
    await locks.withLocks({ write: ['dba-3', 'dba-4'], read: ['dba-5'] }, (trx) =>
      trx('ledger').insert({ tag: 'group' }),
    );
    await locks.withWriteLock('dba-6', (trx) => trx('ledger').insert({ tag: 'section' }), { section: true });
    const tags = await rootRows<{ tag: string }>('SELECT tag FROM ledger ORDER BY id');
    expect(tags.map((t) => t.tag)).toEqual(['write', 'read', 'group', 'section']);
    expect(await liveGrants()).toBe(0);
  });

  it('an acquire whose statement never reached the server is withdrawn and tried again: granted once', async () => {
    const front = await proxyFor(server.url);
    try {
      const locks = lockManager({ knex: poolAs(APP, 4, front.url.toString()), resolveTimeoutMs: 10_000 });
      const cut = front.proxy.armOnce(
        TEST_PROCEDURES ? /CALL rwlock_acquire/ : /^START TRANSACTION/i,
        'before-forward',
      );
      const g = await locks.tryAcquireWrite('dba-7');
      await cut;
      const rows = await rootRows<{ status: number }>(
        'SELECT status FROM t_lock_log WHERE resource_id = ? ORDER BY id',
        [Buffer.from('dba-7')],
      );
      expect(rows.map((r) => r.status)).toEqual([STATUS.released, STATUS.live]); // the withdrawal, then the grant
      expect(await g!.release()).toBe(true);
    } finally {
      await front.proxy.close();
    }
  });

  it('checkLockCounts during traffic finds no disagreement; the reaper takes a stale grant and nothing else', async () => {
    const locks = lockManager({ knex: poolAs(APP, 8) });
    const checker = poolAs(REAPER, 2);
    let stop = false;
    const worker = async (n: number): Promise<void> => {
      for (let i = 0; !stop; i++) {
        const id = `dba-t${(n + i) % 5}`;
        if (i % 3 === 0) await locks.withWriteLock(id, async () => undefined, { waitMs: 30_000 });
        else await locks.withReadLock(id, async () => undefined, { waitMs: 30_000 });
      }
    };
    const workers = [0, 1, 2, 3].map((n) => worker(n));
    let checks = 0;
    try {
      for (; checks < 60; checks++) expect((await checkLockCounts(checker)).disagreements).toEqual([]);
    } finally {
      stop = true;
      await Promise.all(workers);
    }
    const stale = (await locks.tryAcquireWrite('dba-8'))!;
    const fresh = (await locks.tryAcquireWrite('dba-9'))!;
    await root.query('UPDATE t_lock_log SET create_time = create_time - INTERVAL 120 SECOND WHERE id = ?', [stale.id]);
    const reaped = await reapStaleGrants(poolAs(REAPER, 2), { staleAfterMs: 60_000 });
    expect(reaped.grants.map((g) => g.id)).toEqual([stale.id]);
    expect(await fresh.release()).toBe(true);
    expect(await stale.release()).toBe(false);
    expect(await liveGrants()).toBe(0);
  });
});

describe('max_connections reached', () => {
  let hog: mysql.Connection[] = [];

  /** Opens connections as the application user until the server refuses one (1040), then closes `free` of them. */
  async function fillServer(free: number): Promise<void> {
    for (;;) {
      try {
        hog.push(await mysql.createConnection({ ...parseMysqlUrl(server.url), user: APP, password: '', database: DB }));
      } catch (err) {
        expect((err as { errno?: number }).errno).toBe(1040);
        break;
      }
    }
    for (const c of hog.splice(0, free)) await c.end();
  }

  beforeAll(async () => {
    // Only the hog's and this file's root connection from now on: no idle pool connection of an
    // earlier test may close and free a slot the tests count on being taken.
    await Promise.all(pools.splice(0).map((k) => k.destroy()));
    await root.query('SET GLOBAL max_connections = 24');
  });

  afterEach(async () => {
    await Promise.all(hog.map((c) => c.end()));
    hog = [];
  });

  afterAll(async () => {
    await root.query('SET GLOBAL max_connections = 1000');
  });

  it('60 withWriteLock calls with leaseMs through a pool of 10 on 3 free connections: every failure typed, no grant left live', async () => {
    await fillServer(3);
    const app = poolAs(APP, 10);
    let refused = 0;
    (app.client as { pool: { on(event: 'createFail', listener: () => void): void } }).pool.on(
      'createFail',
      () => refused++,
    );
    const locks = lockManager({ knex: app, resolveTimeoutMs: 30_000 });
    const outcomes = await Promise.allSettled(
      Array.from({ length: 60 }, (_, i) =>
        locks.withWriteLock(`cx-${i % 6}`, (trx) => trx('ledger').insert({ tag: `cx-${i}` }), {
          leaseMs: 1_000,
          waitMs: 30_000,
        }),
      ),
    );
    const failures = outcomes.flatMap((o) => (o.status === 'rejected' ? [o.reason as unknown] : []));
    expect(refused).toBeGreaterThan(0); // the server did refuse the pool connections
    console.log(
      `[dba-lane] ${failures.length} of 60 calls failed: ${[...new Set(failures.map((f) => (f as Error).constructor.name))].join(', ')}; ${refused} connections refused`,
    );
    for (const f of failures) expect(f).toBeInstanceOf(RwLockError);
    expect(await liveGrants()).toBe(0);
    const [{ n }] = (await rootRows<{ n: number }>("SELECT COUNT(*) AS n FROM ledger WHERE tag LIKE 'cx-%'")) as [
      { n: number },
    ];
    expect(Number(n)).toBe(outcomes.length - failures.length);
    await app.destroy();
  });

  /** A grant, then the server filled to the last connection while the pool holds none. */
  async function grantOnAFullServer(
    resource: string,
  ): Promise<{ id: number; refused: () => number; release(): Promise<boolean> }> {
    const app = knexFactory({
      client: 'mysql2',
      connection: { ...parseMysqlUrl(server.url), user: APP, password: '', database: DB },
      pool: { min: 0, max: 2, idleTimeoutMillis: 100, reapIntervalMillis: 50 },
    });
    pools.push(app);
    const g = await lockManager({ knex: app, resolveTimeoutMs: 30_000 }).acquireWrite(resource);
    const pool = (
      app.client as {
        pool: { numUsed(): number; numFree(): number; on(event: 'createFail', listener: () => void): void };
      }
    ).pool;
    await expect.poll(() => pool.numUsed() + pool.numFree(), { timeout: 20_000 }).toBe(0);
    await fillServer(0);
    let refused = 0;
    pool.on('createFail', () => refused++);
    return { id: g.id, refused: () => refused, release: () => g.release() };
  }

  it('a release refused a connection is sent again once one frees, and releases', async () => {
    const g = await grantOnAFullServer('cx-release');
    const released = g.release();
    released.catch(() => undefined); // awaited below; a failed poll must not leave it unhandled
    // The server refused the release's connection at least once; then one connection frees.
    await expect.poll(g.refused, { timeout: 20_000 }).toBeGreaterThan(0);
    await hog.pop()!.end();
    expect(await released).toBe(true);
    expect(await liveGrants()).toBe(0);
  });

  it('negative control: sent once, the same release fails and leaves the grant live, named by a typed error', async () => {
    const g = await grantOnAFullServer('cx-control');
    testSwitches.unreachable.retry = false;
    try {
      const err = await g.release().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(DatabaseUnreachableError);
      expect((err as DatabaseUnreachableError).grantId).toBe(g.id);
      expect(g.refused()).toBeGreaterThan(0);
    } finally {
      testSwitches.unreachable.retry = true;
      await Promise.all(hog.map((c) => c.end()));
      hog = [];
    }
    expect(await liveGrants()).toBe(1);
    const operator = knexFactory({ client: 'mysql2', connection: { ...parseMysqlUrl(server.url), database: DB } });
    pools.push(operator);
    expect(await lockManager({ knex: operator }).forceRelease(g.id)).toBe(true);
  });
});
