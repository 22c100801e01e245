// A one-commit section costs the round trips of the plain transaction it wraps: its take goes in
// place of knex's BEGIN (rwlock_section_begin, migration 012) and its end in place of the COMMIT
// (rwlock_section_commit). Counted as the commands the section's one connection sends, exact
// whatever the machine's load. Without migration 012 the BEGIN and the take go apart: one more.
// covers: src/lock/sections/section-calls.ts, src/lock/sections/section-take.ts, src/sql/section.ts
import { describe, expect, it } from 'vitest';
import type { Knex } from 'knex';
import { createLockManager } from '../src/index.js';
import { CURRENT_ROUTINES } from '../src/sql/routines.js';
import { useTestDatabase } from './support/db.js';
import { calls, countedKnex as countedCommands, type Counted } from './support/commands.js';

// The procedures themselves are under test: whatever the lane, this database has them.
const db = useTestDatabase(import.meta.filename, { procedures: true });

/** A knex of one pooled connection whose commands are counted. */
const countedKnex = (): Promise<Counted> => countedCommands((o) => db.connect(o));

const WORK = 'UPDATE rt_probe SET n = n + 1 WHERE id = 1';

/** Drops `names` for the length of `run`, then creates them again as the current schema has them. */
async function without(names: readonly string[], run: () => Promise<void>): Promise<void> {
  for (const name of names) await db.knex.raw(`DROP PROCEDURE IF EXISTS ${name}`);
  try {
    await run();
  } finally {
    for (const name of names) await db.knex.raw(CURRENT_ROUTINES[name]!);
  }
}

async function probe(): Promise<number> {
  const [rows] = (await db.knex.raw('SELECT n FROM rt_probe WHERE id = 1')) as unknown as [Array<{ n: number }>];
  return Number(rows[0]!.n);
}

describe('the round trips of a one-commit section', () => {
  it('a one-row section sends as many commands as the same plain transaction, and takes the lock', async () => {
    await db.knex.raw('CREATE TABLE IF NOT EXISTS rt_probe (id INT PRIMARY KEY, n INT NOT NULL) ENGINE=InnoDB');
    await db.knex.raw('INSERT IGNORE INTO rt_probe VALUES (1, 0)');
    const counted = await countedKnex();
    const locks = createLockManager({ knex: counted.knex });
    const other = createLockManager({ knex: db.knex });
    const section = (): Promise<unknown> =>
      locks.withWriteLock('rt-one', (trx) => trx.raw(WORK), { section: true, waitMs: 5_000 });
    // First use: the schema check, the server's kind, the resource's rows.
    await section();
    const plain = await counted.commandsOf(() => counted.knex.transaction((trx) => trx.raw(WORK)));
    let heldDuringWork: unknown = 'not asked';
    const sectionCommands = await counted.commandsOf(() =>
      locks.withWriteLock(
        'rt-one',
        async (trx) => {
          heldDuringWork = await other.tryAcquireWrite('rt-one');
          await trx.raw(WORK);
        },
        { section: true, waitMs: 5_000 },
      ),
    );
    expect(plain).toBe(3);
    expect(sectionCommands).toBe(plain);
    expect(heldDuringWork).toBeNull();
    expect(await probe()).toBe(3);
    const { grants } = await other.history('rt-one', { limit: 10 });
    expect(grants.map((g) => g.releasedBy)).toEqual(['section', 'section']);
  });

  // Told apart by what they do: a row another connection changes mid-transaction is seen changed at
  // READ COMMITTED and unchanged at REPEATABLE READ (the servers' default), the control.
  for (const [level, sees] of [
    ['read committed', 'the change'],
    [undefined, 'no change'],
  ] as const)
    it(`at ${level ?? 'the default level'}: the call begins the transaction at it (${sees} seen)`, async () => {
      await db.knex.raw('CREATE TABLE IF NOT EXISTS rt_level (id INT PRIMARY KEY, n INT NOT NULL) ENGINE=InnoDB');
      await db.knex.raw('INSERT IGNORE INTO rt_level VALUES (1, 0)');
      const read = async (k: Knex | Knex.Transaction): Promise<number> => {
        const [rows] = (await k.raw('SELECT n FROM rt_level WHERE id = 1')) as unknown as [Array<{ n: number }>];
        return Number(rows[0]!.n);
      };
      const locks = createLockManager({ knex: db.knex });
      const [before, after] = await locks.withWriteLock(
        'rt-level',
        async (trx) => {
          const first = await read(trx);
          await db.knex.raw('UPDATE rt_level SET n = n + 1 WHERE id = 1'); // another connection, autocommit
          return [first, await read(trx)];
        },
        { section: true, ...(level ? { isolationLevel: level } : {}) },
      );
      expect(after).toBe(level ? before + 1 : before);
    });

  it('negative control: without migrations 012 and 013 the BEGIN and the take go apart, one command more', async () => {
    await without(['rwlock_section_begin', 'rwlock_section_begin_one'], async () => {
      const counted = await countedKnex();
      const locks = createLockManager({ knex: counted.knex });
      const other = createLockManager({ knex: db.knex });
      const section = (): Promise<unknown> =>
        locks.withWriteLock('rt-apart', (trx) => trx.raw(WORK), { section: true, waitMs: 5_000 });
      await section(); // the first finds the procedure missing, and goes again apart
      const plain = await counted.commandsOf(() => counted.knex.transaction((trx) => trx.raw(WORK)));
      let heldDuringWork: unknown = 'not asked';
      const sectionCommands = await counted.commandsOf(() =>
        locks.withWriteLock(
          'rt-apart',
          async (trx) => {
            heldDuringWork = await other.tryAcquireWrite('rt-apart');
            await trx.raw(WORK);
          },
          { section: true, waitMs: 5_000 },
        ),
      );
      expect(sectionCommands).toBe(plain + 1);
      expect(heldDuringWork).toBeNull();
    });
  });
});

describe('a one-resource section takes and commits through routines of its own (migration 013)', () => {
  it('one resource: rwlock_section_begin_one and rwlock_section_commit_one; two: the packed begin and commit', async () => {
    await db.knex.raw('CREATE TABLE IF NOT EXISTS rt_probe (id INT PRIMARY KEY, n INT NOT NULL) ENGINE=InnoDB');
    await db.knex.raw('INSERT IGNORE INTO rt_probe VALUES (1, 0)');
    const counted = await countedKnex();
    const locks = createLockManager({ knex: counted.knex });
    const other = createLockManager({ knex: db.knex });
    await locks.withWriteLock('one-a', (trx) => trx.raw(WORK), { section: true }); // first use
    let heldDuringWork: unknown = 'not asked';
    const one = await counted.sqlOf(() =>
      locks.withWriteLock(
        'one-a',
        async (trx) => {
          heldDuringWork = await other.tryAcquireWrite('one-a');
          await trx.raw(WORK);
        },
        { section: true },
      ),
    );
    expect(calls(one)).toEqual(['rwlock_section_begin_one', 'rwlock_section_commit_one']);
    expect(heldDuringWork).toBeNull();
    // A reader's section shares with a durable reader, and takes through the same routines.
    let readerBeside: unknown = 'not asked';
    const read = await counted.sqlOf(() =>
      locks.withReadLock(
        'one-a',
        async () => {
          const g = await other.tryAcquireRead('one-a');
          readerBeside = g === null ? null : await g.release();
        },
        { section: true },
      ),
    );
    expect(calls(read)).toEqual(['rwlock_section_begin_one', 'rwlock_section_commit_one']);
    expect(readerBeside).toBe(true);
    await locks.withLocks({ write: ['one-b', 'one-c'] }, (trx) => trx.raw(WORK), { section: true }); // first use
    const two = await counted.sqlOf(() =>
      locks.withLocks({ write: ['one-b', 'one-c'] }, (trx) => trx.raw(WORK), { section: true }),
    );
    expect(calls(two)).toEqual(['rwlock_section_begin', 'rwlock_section_commit']);
    const { grants } = await other.history('one-a', { limit: 10 });
    const sections = grants.filter((g) => g.releasedBy === 'section');
    expect(sections).toHaveLength(3);
    expect(sections.every((g) => g.releasedAt !== null)).toBe(true);
  });

  it('refuses a call of more than one target, taking nothing', async () => {
    const packed = Buffer.from('\x05one-d\x05one-e', 'latin1');
    await expect(
      db.knex.raw('CALL rwlock_section_begin_one(?, ?, ?, ?, NULL, 5, 0)', [packed, 'ww', 'me', Buffer.alloc(32)]),
    ).rejects.toThrow(/takes one target/);
    const [rows] = (await db.knex.raw(
      "SELECT COUNT(*) AS n FROM t_lock_log WHERE resource_id IN ('one-d', 'one-e')",
    )) as unknown as [Array<{ n: number }>];
    expect(Number(rows[0]!.n)).toBe(0);
  });

  it('without migration 013 a one-resource section goes through the packed routines, as many commands', async () => {
    await without(['rwlock_section_begin_one', 'rwlock_section_commit_one'], async () => {
      const counted = await countedKnex();
      const locks = createLockManager({ knex: counted.knex });
      const other = createLockManager({ knex: db.knex });
      await locks.withWriteLock('one-f', (trx) => trx.raw(WORK), { section: true }); // finds 013 missing, goes again
      const plain = await counted.commandsOf(() => counted.knex.transaction((trx) => trx.raw(WORK)));
      let heldDuringWork: unknown = 'not asked';
      const sql = await counted.sqlOf(() =>
        locks.withWriteLock(
          'one-f',
          async (trx) => {
            heldDuringWork = await other.tryAcquireWrite('one-f');
            await trx.raw(WORK);
          },
          { section: true },
        ),
      );
      expect(calls(sql)).toEqual(['rwlock_section_begin', 'rwlock_section_commit']);
      expect(sql.length).toBe(plain);
      expect(heldDuringWork).toBeNull();
    });
  });
});

describe('a section without history takes and commits through routines that write no row (migration 014)', () => {
  /** The section rows (`released_by` section) `t_lock_log` holds for `resource`. */
  async function logRows(resource: string): Promise<number> {
    const [rows] = (await db.knex.raw(
      'SELECT COUNT(*) AS n FROM t_lock_log WHERE resource_id = ? AND released_by = 5',
      [Buffer.from(resource)],
    )) as unknown as [Array<{ n: number }>];
    return Number(rows[0]!.n);
  }

  it("one resource: rwlock_section_begin_bare and rwlock_section_commit_bare, the plain transaction's commands, no row", async () => {
    await db.knex.raw('CREATE TABLE IF NOT EXISTS rt_probe (id INT PRIMARY KEY, n INT NOT NULL) ENGINE=InnoDB');
    await db.knex.raw('INSERT IGNORE INTO rt_probe VALUES (1, 0)');
    const counted = await countedKnex();
    const locks = createLockManager({ knex: counted.knex });
    const other = createLockManager({ knex: db.knex });
    const bare = { section: true, history: false } as const;
    await locks.withWriteLock('bare-a', (trx) => trx.raw(WORK), bare); // first use
    const plain = await counted.commandsOf(() => counted.knex.transaction((trx) => trx.raw(WORK)));
    for (const mode of ['write', 'read'] as const) {
      let beside: unknown = 'not asked';
      let id: number | undefined;
      const run = mode === 'write' ? locks.withWriteLock.bind(locks) : locks.withReadLock.bind(locks);
      const sql = await counted.sqlOf(() =>
        run(
          'bare-a',
          async (trx, grant) => {
            id = grant.id;
            // Held as any section holds: a durable writer is refused, a durable reader shares with a reader.
            const g = await (mode === 'write' ? other.tryAcquireWrite('bare-a') : other.tryAcquireRead('bare-a'));
            beside = g === null ? null : await g.release();
            await trx.raw(WORK);
          },
          bare,
        ),
      );
      expect(calls(sql), mode).toEqual(['rwlock_section_begin_bare', 'rwlock_section_commit_bare']);
      expect(sql.length, mode).toBe(plain);
      expect(id, mode).toBe(0);
      expect(beside, mode).toBe(mode === 'write' ? null : true);
    }
    expect(await logRows('bare-a')).toBe(0);
    // Not vacuous: the same section with history writes its row.
    await locks.withWriteLock('bare-a', (trx) => trx.raw(WORK), { section: true });
    expect(await logRows('bare-a')).toBe(1);
  });

  it('without migration 014, or over two resources, it takes through statements and still writes no row', async () => {
    await without(['rwlock_section_begin_bare', 'rwlock_section_commit_bare'], async () => {
      const counted = await countedKnex();
      const locks = createLockManager({ knex: counted.knex });
      const other = createLockManager({ knex: db.knex });
      await locks.withWriteLock('bare-b', (trx) => trx.raw(WORK), { section: true, history: false }); // finds 014 missing
      let heldDuringWork: unknown = 'not asked';
      const sql = await counted.sqlOf(() =>
        locks.withWriteLock(
          'bare-b',
          async (trx) => {
            heldDuringWork = await other.tryAcquireWrite('bare-b');
            await trx.raw(WORK);
          },
          { section: true, history: false },
        ),
      );
      expect(calls(sql)).toEqual([]);
      expect(heldDuringWork).toBeNull();
      expect(await logRows('bare-b')).toBe(0);
    });
    const counted = await countedKnex();
    const locks = createLockManager({ knex: counted.knex });
    const two = { section: true, history: false } as const;
    await locks.withLocks({ write: ['bare-c', 'bare-d'] }, (trx) => trx.raw(WORK), two); // first use
    const sql = await counted.sqlOf(() =>
      locks.withLocks({ write: ['bare-c', 'bare-d'] }, (trx) => trx.raw(WORK), two),
    );
    expect(calls(sql)).toEqual([]);
    expect((await logRows('bare-c')) + (await logRows('bare-d'))).toBe(0);
  });
});
