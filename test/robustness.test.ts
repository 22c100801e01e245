// Defects an independent probe found, each pinned by a test: rejections of any value surface,
// first use by concurrent readers, values that no sql_mode or character set can misread, typed
// errors for a damaged schema, and validation of every entry point's arguments.
// covers: src/errors.ts, src/admin/migrate.ts, src/options/validators.ts
import type { Knex } from 'knex';
import { describe, expect, it } from 'vitest';
import { CURRENT_PROCEDURES } from '../migrations/index.js';
import * as v1 from '../migrations/001_lock_tables.js';
import {
  createLockManager,
  InvalidOptionsError,
  LIMITS,
  LockInvariantError,
  SchemaMissingError,
} from '../src/index.js';
import { migrate, purgeReleasedGrants, reapStaleGrants } from '../src/admin/index.js';
import { errnoOf, ER_DUP_ENTRY, withConnection } from '../src/sql/connection.js';
import { withdrawAcquire } from '../src/sql/withdraw.js';
import { useTestDatabase } from './support/db.js';
import { invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);
// These two test the procedure itself: they have it whatever the lane.
const oldAcquire = useTestDatabase(`${import.meta.filename}-v1`, { procedures: true });
const latin1 = useTestDatabase(`${import.meta.filename}-latin1`, { migrate: false });
const damaged = useTestDatabase(`${import.meta.filename}-damaged`, { procedures: true });

async function rowsOf<T>(k: Knex, sql: string, bindings: unknown[] = []): Promise<T[]> {
  return ((await k.raw(sql, bindings as Knex.RawBinding[])) as unknown as [T[]])[0];
}

async function liveGrants(k: Knex, resource: string): Promise<number> {
  const [row] = await rowsOf<{ n: number }>(
    k,
    'SELECT COUNT(*) AS n FROM t_lock_log WHERE status = 0 AND resource_id = ?',
    [Buffer.from(resource)],
  );
  return Number(row!.n);
}

describe('a rejection of any value is a rejection', () => {
  const rejections: Array<[string, () => Promise<never>]> = [
    [
      'throw undefined',
      async () => {
        throw undefined;
      },
    ],
    ['Promise.reject() with no reason', () => Promise.reject()],
    [
      'throw null',
      async () => {
        throw null;
      },
    ],
    [
      'throw a string',
      async () => {
        throw 'no funds';
      },
    ],
  ];
  it.each(rejections)(
    '%s: the caller gets the same value, the business insert is rolled back, the grant is released',
    async (name, reject) => {
      await db.knex.raw('CREATE TABLE IF NOT EXISTS rejected (tag VARCHAR(64)) ENGINE=InnoDB');
      const locks = createLockManager({ knex: db.knex });
      const resource = `reject-${name}`;
      const outcome = await locks
        .withWriteLock(resource, async (trx) => {
          await trx.raw('INSERT INTO rejected VALUES (?)', [name]);
          return reject();
        })
        .then(
          (value: unknown) => ({ resolved: value }),
          (reason: unknown) => ({ rejected: reason }),
        );
      const expected = await reject().catch((reason: unknown) => reason);
      expect(outcome).toEqual({ rejected: expected });
      expect(await rowsOf(db.knex, 'SELECT * FROM rejected WHERE tag = ?', [name])).toEqual([]);
      expect(await liveGrants(db.knex, resource)).toBe(0);
      expect(await locks.tryAcquireWrite(resource)).not.toBeNull();
    },
  );

  it('negative control: knex on its own resolves a transaction whose callback threw undefined', async () => {
    const outcome = await db.knex
      .transaction(async () => {
        throw undefined;
      })
      .then(
        () => 'resolved',
        () => 'rejected',
      );
    expect(outcome).toBe('resolved');
  });
});

describe('first use of a resource by concurrent readers', () => {
  async function refusedReaders(k: Knex, round: number): Promise<number> {
    const locks = createLockManager({ knex: k });
    let refused = 0;
    await Promise.all(
      Array.from({ length: 50 }, async (_, i) => {
        const grants = await Promise.all(Array.from({ length: 8 }, () => locks.tryAcquireRead(`fresh-${round}-${i}`)));
        refused += grants.filter((g) => g === null).length;
        await Promise.all(grants.map((g) => g?.release()));
      }),
    );
    return refused;
  }

  it('8 readers of each of 50 never-used ids are all granted', async () => {
    expect(await refusedReaders(db.knex, 0)).toBe(0);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('negative control: the acquire of schema version 1 refuses some of them', async () => {
    await oldAcquire.knex.raw('DROP PROCEDURE rwlock_acquire');
    await oldAcquire.knex.raw(v1.PROCEDURES.rwlock_acquire!);
    let refused = 0;
    // The race is lost by a few percent of readers; rounds until one is seen, bounded.
    for (let round = 0; round < 20 && refused === 0; round++) refused += await refusedReaders(oldAcquire.knex, round);
    expect(refused).toBeGreaterThan(0);
  });
});

describe('values no sql_mode can misread', () => {
  const owners = ["O'Brien", 'back\\slash\\', "x\\', X'00000000000000000000000000000000', 0) -- ", '"quoted" `ticks`'];

  function strictModes(): Knex {
    return db.connect({
      poolMax: 4,
      afterCreate: "SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',NO_BACKSLASH_ESCAPES,ANSI_QUOTES')",
    });
  }

  it.each(owners)(
    'owner %j: every operation works under NO_BACKSLASH_ESCAPES and ANSI_QUOTES, and the owner is stored exactly',
    async (owner) => {
      const k = strictModes();
      const [mode] = await rowsOf<{ m: string }>(k, 'SELECT @@SESSION.sql_mode AS m');
      expect(mode!.m).toMatch(/NO_BACKSLASH_ESCAPES/);
      expect(mode!.m).toMatch(/ANSI_QUOTES/);
      const locks = createLockManager({ knex: k, owner });
      const resource = `modes-${owner}`;
      expect(await locks.withWriteLock(resource, async () => 'ok')).toBe('ok');
      const g = await locks.acquireRead(resource);
      expect((await locks.inspect(resource)).holders.map((h) => h.owner)).toEqual([owner]);
      expect(await g.extend(60_000)).toBe(true);
      expect(await g.release()).toBe(true);
      const w = await locks.acquireWrite(resource);
      expect(await locks.forceRelease(w.id)).toBe(true);
      const [row] = await rowsOf<{ owner: string; token: Buffer }>(
        k,
        'SELECT owner, token FROM t_lock_log WHERE id = ?',
        [w.id],
      );
      expect(row!.owner).toBe(owner);
      expect(row!.token.toString('hex')).toBe(w.token);
      await reapStaleGrants(k);
      expect(await invariantViolations(k)).toEqual([]);
    },
  );

  it('negative control: a string escaped into the statement text breaks under NO_BACKSLASH_ESCAPES', async () => {
    const k = strictModes();
    const err = await k.raw('SELECT ? AS v', ["O'Brien\\"]).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: 'ER_PARSE_ERROR' });
  });
});

describe('character sets', () => {
  it('in a latin1 database, owners outside latin1 work, and the owner limit counts characters', async () => {
    await latin1.knex.raw(`ALTER DATABASE \`${latin1.name}\` CHARACTER SET latin1 COLLATE latin1_swedish_ci`);
    await migrate(latin1.knex);
    const emoji = '😀'.repeat(LIMITS.maxOwnerChars);
    for (const owner of ['貸款', emoji]) {
      const locks = createLockManager({ knex: latin1.knex, owner });
      const g = await locks.acquireWrite('charset');
      expect((await locks.inspect('charset')).holders.map((h) => h.owner)).toEqual([owner]);
      expect(await g.release()).toBe(true);
    }
    expect(() => createLockManager({ knex: latin1.knex, owner: `${emoji}😀` })).toThrow(InvalidOptionsError);
    expect(() => createLockManager({ knex: latin1.knex, owner: 'lone \ud800' })).toThrow(/well-formed/);
  });
});

describe('a damaged schema', () => {
  it('a dropped procedure gives SchemaMissingError (managers that require it), and migrate() repairs it', async () => {
    const locks = createLockManager({ knex: damaged.knex, procedures: true });
    await damaged.knex.raw('DROP PROCEDURE rwlock_acquire');
    await expect(locks.tryAcquireWrite('damaged')).rejects.toBeInstanceOf(SchemaMissingError);
    expect(await migrate(damaged.knex)).toEqual({ applied: [], repaired: ['rwlock_acquire'] });
    const [proc] = await rowsOf<{ def: string }>(
      damaged.knex,
      "SELECT ROUTINE_DEFINITION AS def FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = 'rwlock_acquire'",
    );
    expect(proc!.def.replace(/\s+/g, ' ')).toContain('v_duplicate'); // the current version, not version 1's
    expect(CURRENT_PROCEDURES.rwlock_acquire).toContain('v_duplicate');
    const g = await locks.tryAcquireWrite('damaged');
    expect(await g!.release()).toBe(true);
  });

  it('a column and an index that migrations added in place, dropped by hand, are rebuilt by migrate() and listed', async () => {
    const present = async (): Promise<string[]> =>
      (
        await rowsOf<{ n: string }>(
          damaged.knex,
          `SELECT COLUMN_NAME AS n FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 't_lock_log' AND COLUMN_NAME = 'mode_changed_at'
       UNION ALL SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 't_lock_log' AND INDEX_NAME = 'ix_lock_log_resource'`,
        )
      ).map((r) => r.n);
    expect(await present()).toEqual(['mode_changed_at', 'ix_lock_log_resource']);
    await damaged.knex.raw('ALTER TABLE t_lock_log DROP COLUMN mode_changed_at, DROP INDEX ix_lock_log_resource');
    expect(await present()).toEqual([]);
    expect(await migrate(damaged.knex)).toEqual({
      applied: [],
      repaired: ['t_lock_log.mode_changed_at', 't_lock_log.ix_lock_log_resource'],
    });
    expect(await present()).toEqual(['mode_changed_at', 'ix_lock_log_resource']);
    // A downgrade writes the rebuilt column.
    const locks = createLockManager({ knex: damaged.knex });
    const g = await locks.acquireWrite('rebuilt');
    await g.downgrade();
    expect((await locks.history('rebuilt')).grants[0]).toMatchObject({
      id: g.id,
      mode: 'read',
      modeChangedAt: expect.any(Date),
    });
    expect(await g.release()).toBe(true);
    expect(await migrate(damaged.knex)).toEqual({ applied: [], repaired: [] });
  });

  it('indexes the tables were created with, dropped by hand, are built again by migrate() and listed; the token is unique again', async () => {
    const indexes = async (): Promise<string[]> =>
      (
        await rowsOf<{ n: string }>(
          damaged.knex,
          `SELECT DISTINCT CONCAT(TABLE_NAME, '.', INDEX_NAME) AS n FROM information_schema.STATISTICS
        WHERE TABLE_SCHEMA = DATABASE() AND INDEX_NAME IN ('uk_lock_log_token', 'ix_lock_log_status_time', 'ix_release_note_time') ORDER BY n`,
        )
      ).map((r) => r.n);
    const all = [
      't_lock_log.ix_lock_log_status_time',
      't_lock_log.uk_lock_log_token',
      't_lock_release_note.ix_release_note_time',
    ];
    expect(await indexes()).toEqual(all);
    const locks = createLockManager({ knex: damaged.knex });
    const g = await locks.acquireWrite('created-indexes');
    const withdrawn = (): Promise<unknown> =>
      withConnection(damaged.knex, (conn) =>
        withdrawAcquire(conn, Buffer.from('created-indexes'), 'write', Buffer.from(g.token, 'hex')),
      ).then(
        () => 'inserted',
        (e: unknown) => errnoOf(e),
      );
    expect(await withdrawn()).toBe(ER_DUP_ENTRY); // a granted acquire cannot be withdrawn: how a lost reply is settled
    await damaged.knex.raw('ALTER TABLE t_lock_log DROP INDEX uk_lock_log_token, DROP INDEX ix_lock_log_status_time');
    await damaged.knex.raw('ALTER TABLE t_lock_release_note DROP INDEX ix_release_note_time');
    expect(await indexes()).toEqual([]);
    expect(await withdrawn()).toBe('inserted'); // without the unique token, a live grant would be settled as never granted
    await damaged.knex.raw("DELETE FROM t_lock_log WHERE resource_id = 'created-indexes' AND status = 2");
    expect(await migrate(damaged.knex)).toEqual({
      applied: [],
      repaired: [
        't_lock_log.uk_lock_log_token',
        't_lock_log.ix_lock_log_status_time',
        't_lock_release_note.ix_release_note_time',
      ],
    });
    expect(await indexes()).toEqual(all);
    expect(await withdrawn()).toBe(ER_DUP_ENTRY);
    expect(await g.release()).toBe(true);
    expect(await migrate(damaged.knex)).toEqual({ applied: [], repaired: [] });
  });

  it('a table missing at the fenced commit gives SchemaMissingError and nothing commits', async () => {
    const locks = createLockManager({ knex: damaged.knex });
    await damaged.knex.raw('CREATE TABLE IF NOT EXISTS fenced_work (tag VARCHAR(16)) ENGINE=InnoDB');
    const err = await locks
      .withWriteLock('hidden', async (trx) => {
        await trx.raw("INSERT INTO fenced_work VALUES ('hidden')");
        await damaged.knex.raw('RENAME TABLE t_read_write_lock TO t_rwl_hidden');
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    await damaged.knex.raw('RENAME TABLE t_rwl_hidden TO t_read_write_lock');
    expect(err).toBeInstanceOf(SchemaMissingError);
    expect(await rowsOf(damaged.knex, "SELECT * FROM fenced_work WHERE tag = 'hidden'")).toEqual([]);
  });

  it('counts changed by hand: the fence and release refuse with LockInvariantError instead of giving a count back', async () => {
    const locks = createLockManager({ knex: damaged.knex });
    const tamper = (): Promise<unknown> =>
      damaged.knex.raw("UPDATE t_read_write_lock SET w_count = 0 WHERE resource_id = 'tampered'");
    const err = await locks
      .withWriteLock('tampered', async () => {
        await tamper();
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(LockInvariantError);
    const g = await locks.tryAcquireWrite('tampered');
    expect(g).not.toBeNull();
    await tamper();
    await expect(g!.release()).rejects.toBeInstanceOf(LockInvariantError);
    const [row] = await rowsOf<{ w: number }>(
      damaged.knex,
      "SELECT w_count AS w FROM t_read_write_lock WHERE resource_id = 'tampered'",
    );
    expect(row!.w).toBe(0);
  });
});

describe('every entry point validates its database argument', () => {
  const notKnex: unknown[] = [undefined, null, {}, () => undefined, 'mysql://localhost/db'];
  it.each(notKnex)('%s: reapStaleGrants, purgeReleasedGrants and migrate throw InvalidOptionsError', async (value) => {
    const anyDb = value as Knex;
    for (const call of [() => reapStaleGrants(anyDb), () => purgeReleasedGrants(anyDb), () => migrate(anyDb)]) {
      const err = await call().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(InvalidOptionsError);
      expect((err as Error).message).toMatch(/^db must be a knex instance/);
    }
  });
});

describe('the largest accepted values work', () => {
  it('purge and reap accept their largest retention and cutoff, and refuse larger ones', async () => {
    expect(await purgeReleasedGrants(db.knex, { retentionMs: LIMITS.maxRetentionMs })).toEqual({
      purged: 0,
      resources: 0,
    });
    expect((await reapStaleGrants(db.knex, { staleAfterMs: LIMITS.maxRetentionMs })).reaped).toBe(0);
    await expect(purgeReleasedGrants(db.knex, { retentionMs: Number.MAX_SAFE_INTEGER })).rejects.toBeInstanceOf(
      InvalidOptionsError,
    );
    await expect(reapStaleGrants(db.knex, { staleAfterMs: Number.MAX_SAFE_INTEGER })).rejects.toBeInstanceOf(
      InvalidOptionsError,
    );
  });
});
