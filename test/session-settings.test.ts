// Session settings a DBA or a pool gives the application's connections (issue 31, items 2 and 7):
// autocommit off, READ UNCOMMITTED, sql_safe_updates, MariaDB's EMPTY_STRING_IS_NULL. The library's
// own statements must keep their contract under each; every safety property here has its negative
// control, the library run without its session handling (`testSwitches.session.guard`) or with the statement it
// sent before. Settings are the pool's (afterCreate), never the shared server's global ones: the
// DBA-style lane (test/dba-lane.test.ts) starts a server of its own for those.
// covers: src/sql/session.ts
import type { Knex } from 'knex';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connectKnex } from '../harness/database.js';
import { checkLockCounts, purgeReleasedGrants, reapStaleGrants, repairLockCounts } from '../src/admin/index.js';
import { createLockManager, LIMITS, RwLockError, UnsupportedSettingError, type Grant } from '../src/index.js';
import { errnoOf, withConnection } from '../src/sql/connection.js';
import { releaseManyParams, releaseManySql } from '../src/sql/release.js';
import { testSwitches } from '../src/test-switches.js';
import { withdrawAcquire } from '../src/sql/withdraw.js';
import { LOCK_TYPE, RELEASED_BY, STATUS } from '../src/types.js';
import { useTestDatabase } from './support/db.js';
import { proxyFor } from './support/proxy.js';
import { backdate, backdateRelease, grantRow, invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);

let mariadb = false;
beforeAll(async () => {
  const [rows] = (await db.knex.raw('SELECT VERSION() AS v')) as unknown as [Array<{ v: string }>];
  mariadb = /mariadb/i.test(rows[0]!.v);
});

afterEach(() => {
  testSwitches.session.guard = true;
});

/** A pool whose every connection runs `sql` when made, as a knex afterCreate does. */
function poolWith(sql: string, poolMax = 4): Knex {
  return db.connect({ poolMax, afterCreate: sql });
}

async function statusSeenElsewhere(id: number): Promise<number> {
  return (await grantRow(db.knex, id)).status;
}

describe('autocommit=0 on every connection of the pool', () => {
  it('acquire and release: a release that resolves true is committed, seen by another connection, and stays so when the pool closes', async () => {
    const pool = poolWith('SET SESSION autocommit = 0');
    const locks = createLockManager({ knex: pool });
    const g = await locks.acquireWrite('ac-1');
    expect(await statusSeenElsewhere(g.id)).toBe(STATUS.live);
    expect(await g.release()).toBe(true);
    expect(await statusSeenElsewhere(g.id)).toBe(STATUS.released);
    await pool.destroy();
    expect(await statusSeenElsewhere(g.id)).toBe(STATUS.released);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('with*Lock, withLocks over three resources with an isolation level, and an extended lease all commit', async () => {
    await db.knex.raw('CREATE TABLE IF NOT EXISTS ac_ledger (tag VARCHAR(32) PRIMARY KEY) ENGINE=InnoDB');
    const pool = poolWith('SET SESSION autocommit = 0');
    const locks = createLockManager({ knex: pool });
    await locks.withWriteLock('ac-2', (trx) => trx.raw("INSERT INTO ac_ledger VALUES ('one')"), { leaseMs: 60_000 });
    await locks.withLocks(
      { write: ['ac-3', 'ac-4'], read: ['ac-5'] },
      (trx) => trx.raw("INSERT INTO ac_ledger VALUES ('group')"),
      { isolationLevel: 'read committed' },
    );
    await locks.withReadLock('ac-3', (trx) => trx.raw("INSERT INTO ac_ledger VALUES ('read')"));
    const [rows] = (await db.knex.raw('SELECT tag FROM ac_ledger ORDER BY tag')) as unknown as [Array<{ tag: string }>];
    expect(rows.map((r) => r.tag)).toEqual(['group', 'one', 'read']);
    for (const id of ['ac-2', 'ac-3', 'ac-4', 'ac-5']) expect((await locks.inspect(id)).holders).toEqual([]);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('autocommit switched off by the application after the library first used the connection: the release still commits', async () => {
    const pool = db.connect({ poolMax: 1 });
    const locks = createLockManager({ knex: pool });
    const g = await locks.acquireRead('ac-6');
    await pool.raw('SET SESSION autocommit = 0'); // the pool's one connection, the one the library read
    expect(await g.release()).toBe(true);
    expect(await statusSeenElsewhere(g.id)).toBe(STATUS.released);
    // And the library's next use of that connection reads its session again.
    const again = await locks.acquireWrite('ac-6');
    expect(await again.release()).toBe(true);
    expect(await statusSeenElsewhere(again.id)).toBe(STATUS.released);
  });

  it('negative control: without the session handling the first acquire fails with 1568, and a release that resolves true is rolled back', async () => {
    testSwitches.session.guard = false;
    const fresh = poolWith('SET SESSION autocommit = 0', 1);
    const err = await createLockManager({ knex: fresh })
      .acquireWrite('ac-7')
      .catch((e: unknown) => e);
    expect(errnoOf(err)).toBe(1568); // ER_CANT_CHANGE_TX_CHARACTERISTICS
    await fresh.destroy();

    testSwitches.session.guard = true;
    const pool = poolWith('SET SESSION autocommit = 0', 1);
    const locks = createLockManager({ knex: pool });
    const g = await locks.acquireWrite('ac-8');
    testSwitches.session.guard = false;
    expect(await g.release()).toBe(true);
    expect(await statusSeenElsewhere(g.id)).toBe(STATUS.live);
    await pool.destroy(); // the open transaction rolls back
    expect(await statusSeenElsewhere(g.id)).toBe(STATUS.live);
    testSwitches.session.guard = true;
    expect(await createLockManager({ knex: db.knex }).forceRelease(g.id)).toBe(true);
  });
});

describe('READ UNCOMMITTED on every connection of the pool', () => {
  /** Runs `check` while another transaction holds half an acquire of `resource`: its count written, its grant row not. */
  async function duringHalfAnAcquire<T>(resource: string, check: () => Promise<T>): Promise<T> {
    await db.knex.raw(
      'INSERT IGNORE INTO t_read_write_lock (resource_id, w_count, r_count, version) VALUES (?, 0, 0, 1)',
      [Buffer.from(resource)],
    );
    const trx = await db.knex.transaction();
    try {
      await trx.raw('UPDATE t_read_write_lock SET w_count = 1, version = version + 1 WHERE resource_id = ?', [
        Buffer.from(resource),
      ]);
      return await check();
    } finally {
      await trx.rollback();
    }
  }

  /** Runs `check` while another transaction holds a reap of grant `id` it has not committed. */
  async function duringUncommittedReap<T>(id: number, check: () => Promise<T>): Promise<T> {
    const trx = await db.knex.transaction();
    try {
      await trx.raw(
        `UPDATE t_lock_log SET status = ${STATUS.released}, released_by = ?, version = version + 1 WHERE id = ?`,
        [RELEASED_BY.reaper, id],
      );
      return await check();
    } finally {
      await trx.rollback();
    }
  }

  const RU = 'SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED';

  it('checkLockCounts does not report half of an acquire another transaction has not committed', async () => {
    const pool = poolWith(RU);
    const found = await duringHalfAnAcquire('ru-1', () => checkLockCounts(pool));
    expect(found.disagreements).toEqual([]);
    const repaired = await duringHalfAnAcquire('ru-1', () => repairLockCounts(pool));
    expect(repaired.repaired).toEqual([]);
  });

  it("a holder's isLive() does not take a reap that has not committed for a loss", async () => {
    const pool = poolWith(RU);
    const g = (await createLockManager({ knex: pool }).tryAcquireWrite('ru-2'))!;
    expect(await duringUncommittedReap(g.id, () => g.isLive())).toBe(true);
    expect(g.signal.aborted).toBe(false);
    expect(await g.release()).toBe(true);
  });

  it('negative control: without the session handling both are misled', async () => {
    const pool = poolWith(RU);
    const g = (await createLockManager({ knex: pool }).tryAcquireWrite('ru-3'))!;
    testSwitches.session.guard = false;
    const found = await duringHalfAnAcquire('ru-4', () => checkLockCounts(pool));
    expect(found.disagreements.map((d) => d.resourceId)).toEqual(['ru-4']);
    expect(await duringUncommittedReap(g.id, () => g.isLive())).toBe(false);
    expect(g.signal.aborted).toBe(true);
    expect(await statusSeenElsewhere(g.id)).toBe(STATUS.live); // the reap rolled back: the grant was never lost
    testSwitches.session.guard = true;
    expect(await createLockManager({ knex: db.knex }).forceRelease(g.id)).toBe(true);
  });
});

describe('SERIALIZABLE on every connection of the pool', () => {
  it('grants, a group, and the count check beside an uncommitted acquire work unchanged', async () => {
    const pool = poolWith('SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE');
    const locks = createLockManager({ knex: pool });
    const g = await locks.acquireWrite('se-1');
    expect(await g.release()).toBe(true);
    expect(await statusSeenElsewhere(g.id)).toBe(STATUS.released);
    expect(await locks.withLocks({ write: ['se-2', 'se-3'], read: ['se-4'] }, async () => 'done')).toBe('done');
    const trx = await db.knex.transaction();
    try {
      await trx.raw('UPDATE t_read_write_lock SET w_count = 1, version = version + 1 WHERE resource_id = ?', [
        Buffer.from('se-2'),
      ]);
      expect((await checkLockCounts(pool)).disagreements).toEqual([]);
    } finally {
      await trx.rollback();
    }
    expect(await invariantViolations(db.knex)).toEqual([]);
  });
});

describe('sql_safe_updates=1 on every connection of the pool', () => {
  const SAFE = 'SET SESSION sql_safe_updates = 1';

  it('withLocks over three resources in mixed modes commits and releases them all; reap, purge and repair run', async () => {
    const pool = poolWith(SAFE);
    const locks = createLockManager({ knex: pool });
    const value = await locks.withLocks({ write: ['su-1', 'su-2'], read: ['su-3', 'su-4'] }, async (_trx, grants) =>
      grants.map((g) => g.mode),
    );
    expect(value).toEqual(['write', 'write', 'read', 'read']);
    for (const id of ['su-1', 'su-2', 'su-3', 'su-4']) expect((await locks.inspect(id)).holders).toEqual([]);
    const stale = (await locks.tryAcquireWrite('su-5'))!;
    await backdate(db.knex, stale.id, 120_000);
    const reaped = await reapStaleGrants(pool, { staleAfterMs: 60_000 });
    expect(reaped.grants.map((r) => r.id)).toContain(stale.id);
    await backdateRelease(db.knex, stale.id, LIMITS.purgeFloorMs + 60_000);
    expect((await purgeReleasedGrants(pool, { retentionMs: 1 })).purged).toBeGreaterThan(0);
    expect((await repairLockCounts(pool)).problems).toEqual([]);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('negative control: MariaDB refuses the group fence as one statement (1175: primary-key ranges), which the fence then sends a grant at a time', async (ctx) => {
    if (!mariadb) ctx.skip(); // MySQL's safe mode takes the one statement
    const pool = poolWith(SAFE, 1);
    const locks = createLockManager({ knex: pool });
    const group = await locks.acquireMany({ write: ['su-6', 'su-7'], read: ['su-8'] });
    const sql = releaseManySql(group.grants.length);
    const params = releaseManyParams(
      group.grants.map((g) => (g as Grant & { ref: Parameters<typeof releaseManyParams>[0][number] }).ref),
      'holder',
    );
    const err = await pool.transaction((trx) => trx.raw(sql, params)).catch((e: unknown) => e);
    expect(errnoOf(err)).toBe(1175);
    expect(await group.release()).toBe(true);
  });
});

describe("MariaDB's EMPTY_STRING_IS_NULL", () => {
  const MODE = "SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',EMPTY_STRING_IS_NULL')";

  it('an acquire whose statement was cut before the server saw it is withdrawn and tried again: granted once', async (ctx) => {
    if (!mariadb) ctx.skip(); // a MariaDB sql_mode
    const front = await proxyFor(db.url);
    const pool = connectKnex(front.url.toString(), db.name, { poolMax: 4, afterCreate: MODE });
    try {
      const locks = createLockManager({ knex: pool, resolveTimeoutMs: 10_000 });
      const withStatements = !(await pool
        .raw("SHOW PROCEDURE STATUS WHERE Db = DATABASE() AND Name = 'rwlock_acquire'")
        .then((r: unknown) => (r as [unknown[]])[0].length > 0));
      const cut = front.proxy.armOnce(withStatements ? /^START TRANSACTION/i : /CALL rwlock_acquire/, 'before-forward');
      const g = await locks.tryAcquireWrite('es-1');
      await cut;
      expect(g).not.toBeNull();
      const [rows] = (await db.knex.raw(
        'SELECT status, released_by FROM t_lock_log WHERE resource_id = ? ORDER BY id',
        [Buffer.from('es-1')],
      )) as unknown as [Array<{ status: number; released_by: number | null }>];
      // The withdrawn attempt's row, then the grant.
      expect(rows).toEqual([
        { status: STATUS.released, released_by: RELEASED_BY.withdrawn },
        { status: STATUS.live, released_by: null },
      ]);
      expect(await g!.release()).toBe(true);
    } finally {
      await pool.destroy();
      await front.proxy.close();
    }
  });

  it("negative control: the withdrawal's former empty-string owner is NULL under the mode, which the column refuses (1048)", async (ctx) => {
    if (!mariadb) ctx.skip();
    const pool = poolWith(MODE, 1);
    await withConnection(pool, (conn) => withdrawAcquire(conn, Buffer.from('es-2'), 'write', Buffer.alloc(16, 2)));
    const err = await pool
      .raw(
        `INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token, released_at, released_by)
         VALUES (?, ?, ${STATUS.released}, UTC_TIMESTAMP(6), 1, '', ?, UTC_TIMESTAMP(6), ${RELEASED_BY.withdrawn})`,
        [Buffer.from('es-2'), LOCK_TYPE.write, Buffer.alloc(16, 3)],
      )
      .catch((e: unknown) => e);
    expect(errnoOf(err)).toBe(1048);
  });
});

describe('other sql_modes', () => {
  it('a strict set a DBA may choose (ONLY_FULL_GROUP_BY, NO_ZERO_DATE, PIPES_AS_CONCAT, …): every path works', async () => {
    const modes = mariadb
      ? 'ONLY_FULL_GROUP_BY,NO_ZERO_DATE,NO_ZERO_IN_DATE,STRICT_ALL_TABLES,ERROR_FOR_DIVISION_BY_ZERO,PIPES_AS_CONCAT,REAL_AS_FLOAT,IGNORE_SPACE,NO_AUTO_VALUE_ON_ZERO,NO_UNSIGNED_SUBTRACTION,HIGH_NOT_PRECEDENCE,TIME_ROUND_FRACTIONAL'
      : 'ONLY_FULL_GROUP_BY,NO_ZERO_DATE,NO_ZERO_IN_DATE,STRICT_ALL_TABLES,ERROR_FOR_DIVISION_BY_ZERO,PIPES_AS_CONCAT,REAL_AS_FLOAT,IGNORE_SPACE,NO_AUTO_VALUE_ON_ZERO,NO_UNSIGNED_SUBTRACTION,HIGH_NOT_PRECEDENCE,TIME_TRUNCATE_FRACTIONAL';
    const pool = poolWith(`SET SESSION sql_mode = '${modes}'`);
    const locks = createLockManager({ knex: pool });
    const g = await locks.acquireWrite('sm-1');
    expect(await g.extend(60_000)).toBe(true);
    await g.downgrade();
    expect(await g.release()).toBe(true);
    expect(await locks.withLocks({ write: ['sm-2', 'sm-3'], read: ['sm-4'] }, async () => 'group')).toBe('group');
    expect(await locks.withWriteLock('sm-5', async () => 'section', { section: true })).toBe('section');
    await locks.inspect('sm-1');
    await locks.list();
    await locks.stats();
    await locks.history('sm-1');
    expect((await checkLockCounts(pool)).disagreements).toEqual([]);
    expect((await repairLockCounts(pool)).problems).toEqual([]);
    expect((await reapStaleGrants(pool, { staleAfterMs: 60_000 })).problems).toEqual([]);
    const r = (await locks.tryAcquireRead('sm-6'))!;
    expect(await locks.forceRelease(r.id, { reason: 'sql_mode test' })).toBe(true);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it("MariaDB's sql_mode=ORACLE is refused with UnsupportedSettingError naming it, before anything is written", async (ctx) => {
    if (!mariadb) ctx.skip(); // a MariaDB sql_mode
    const pool = poolWith("SET SESSION sql_mode = 'ORACLE'");
    const before = await grantCount();
    const err = await createLockManager({ knex: pool })
      .withWriteLock('or-1', async () => 'never')
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnsupportedSettingError);
    expect((err as UnsupportedSettingError).setting).toBe('sql_mode=ORACLE');
    expect(await grantCount()).toBe(before);
  });

  it("negative control: without the check, withWriteLock fails with a raw syntax error (1064) at knex's BEGIN", async (ctx) => {
    if (!mariadb) ctx.skip();
    testSwitches.session.guard = false;
    const pool = poolWith("SET SESSION sql_mode = 'ORACLE'");
    const err = await createLockManager({ knex: pool })
      .withWriteLock('or-2', async () => 'never')
      .catch((e: unknown) => e);
    expect(err).not.toBeInstanceOf(RwLockError);
    expect(errnoOf(err)).toBe(1064);
  });
});

async function grantCount(): Promise<number> {
  const [rows] = (await db.knex.raw('SELECT COUNT(*) AS n FROM t_lock_log')) as unknown as [Array<{ n: number }>];
  return Number(rows[0]!.n);
}
