// Sections without history (`history: false`, the manager's `sectionHistory`): the exclusion and
// the commit of a section, and no `t_lock_log` row. Exclusion against sections with history and
// durable writers (negative control: an unguarded take is caught by the same check); the grant's id
// 0; the manager's default and a call's choice; a COMMIT whose reply was lost ends in
// LockOutcomeUnknownError, as there is no row to settle it by (negative control: settled by its token
// as a section with history is, it reports "not committed" for a COMMIT that committed); refused
// options with nothing written.
// covers: src/lock/sections/section-attempt.ts, src/lock/sections/section-take.ts, src/options/resolve.ts
import { afterEach, describe, expect, it } from 'vitest';
import {
  ConnectionLostError,
  createLockManager,
  InvalidOptionsError,
  LockOutcomeUnknownError,
  LockTimeoutError,
  type LockManager,
} from '../src/index.js';
import { testSwitches } from '../src/test-switches.js';
import { TEST_PROCEDURES, useTestDatabase } from './support/db.js';
import { useProxiedKnex } from './support/proxy.js';
import { invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);
const via = useProxiedKnex(db);

afterEach(() => {
  testSwitches.section.guard = true;
  testSwitches.section.settleWithoutRow = false;
});

/** The section rows (`released_by` section) of `resource`. */
async function sectionRows(resource: string): Promise<number> {
  const [rows] = (await db.knex.raw('SELECT COUNT(*) AS n FROM t_lock_log WHERE resource_id = ? AND released_by = 5', [
    Buffer.from(resource),
  ])) as unknown as [Array<{ n: number }>];
  return Number(rows[0]!.n);
}

async function counter(name: string): Promise<number> {
  const [rows] = (await db.knex.raw('SELECT n FROM hx_counters WHERE name = ?', [name])) as unknown as [
    Array<{ n: number }>,
  ];
  return Number(rows[0]?.n ?? -1);
}

async function newCounter(name: string): Promise<void> {
  await db.knex.raw(
    'CREATE TABLE IF NOT EXISTS hx_counters (name VARCHAR(32) PRIMARY KEY, n INT NOT NULL) ENGINE=InnoDB',
  );
  await db.knex.raw('INSERT INTO hx_counters VALUES (?, 0)', [name]);
}

type Writer = 'section without history' | 'section' | 'durable';

/**
 * 12 writers at once on `name`, four of each kind in `kinds`, each a read-modify-write with a pause
 * between: a lost update shows a broken exclusion.
 */
async function racingIncrements(locks: LockManager, name: string, kinds: readonly Writer[]): Promise<number> {
  await newCounter(name);
  await Promise.all(
    Array.from({ length: 12 }, (_, i) => {
      const kind = kinds[i % kinds.length]!;
      return locks.withWriteLock(
        name,
        async (trx) => {
          const [rows] = (await trx.raw('SELECT n FROM hx_counters WHERE name = ?', [name])) as unknown as [
            Array<{ n: number }>,
          ];
          await new Promise((r) => setTimeout(r, 5));
          await trx.raw('UPDATE hx_counters SET n = ? WHERE name = ?', [Number(rows[0]!.n) + 1, name]);
        },
        {
          isolationLevel: 'read committed',
          waitMs: 30_000,
          ...(kind === 'durable' ? {} : { section: true, history: kind === 'section' }),
        },
      );
    }),
  );
  return counter(name);
}

describe('a section without history', () => {
  it('writes no row; its grant has id 0; its work commits, and it leaves the resource free', async () => {
    const locks = createLockManager({ knex: db.knex });
    await newCounter('hx-one');
    const ids: number[] = [];
    const bump = async (trx: Parameters<Parameters<LockManager['withWriteLock']>[1]>[0], g: { id: number }) => {
      ids.push(g.id);
      await trx.raw("UPDATE hx_counters SET n = n + 1 WHERE name = 'hx-one'");
    };
    const bare = { section: true, history: false } as const;
    await locks.withWriteLock('hx-a', bump, bare);
    await locks.withReadLock('hx-a', bump, bare);
    await locks.withLocks({ write: ['hx-b'], read: ['hx-c'] }, (trx, grants) => bump(trx, grants[0]!), bare);
    expect(ids).toEqual([0, 0, 0]);
    expect(await counter('hx-one')).toBe(3);
    for (const r of ['hx-a', 'hx-b', 'hx-c']) {
      expect(await sectionRows(r), r).toBe(0);
      expect(await locks.inspect(r), r).toMatchObject({ live: { write: 0, read: 0 }, holders: [] });
    }
    // Not vacuous: with history, the same calls write one row per resource.
    await locks.withWriteLock('hx-a', bump, { section: true });
    await locks.withLocks({ write: ['hx-b'], read: ['hx-c'] }, (trx, grants) => bump(trx, grants[0]!), {
      section: true,
    });
    for (const r of ['hx-a', 'hx-b', 'hx-c']) expect(await sectionRows(r), r).toBe(1);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('while it holds: no holder in inspect(), its transaction in INNODB_TRX, a durable try refused', async () => {
    const locks = createLockManager({ knex: db.knex });
    // Another process's manager: this one's own try inside the section is refused as reentrant.
    const other = createLockManager({ knex: db.knex });
    /** This file's open transactions. INNODB_TRX is a snapshot refreshed once it went unread for 100 ms. */
    const openTransactions = async (): Promise<number> => {
      const [rows] = (await db.knex.raw(
        `SELECT COUNT(*) AS n FROM information_schema.INNODB_TRX t
           JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id WHERE p.DB = ?`,
        [db.name],
      )) as unknown as [Array<{ n: number }>];
      return Number(rows[0]!.n);
    };
    let seen: unknown;
    await locks.withWriteLock(
      'hx-f',
      async () => {
        await expect.poll(openTransactions, { interval: 150 }).toBeGreaterThanOrEqual(1);
        seen = { state: await other.inspect('hx-f'), tryWrite: await other.tryAcquireWrite('hx-f') };
      },
      { section: true, history: false },
    );
    expect(seen).toMatchObject({ state: { live: { write: 0, read: 0 }, holders: [] }, tryWrite: null });
    // Not vacuous: with history, the same moment shows the section as a holder.
    await locks.withWriteLock('hx-f', async () => void (seen = (await other.inspect('hx-f')).holders.length), {
      section: true,
    });
    expect(seen).toBe(1);
  });

  it('excludes, and is excluded by, sections with history and durable writers: 12 racing increments lose none', async () => {
    const locks = createLockManager({ knex: db.knex });
    expect(await racingIncrements(locks, 'hx-mix', ['section without history', 'section', 'durable'])).toBe(12);
    expect(await sectionRows('hx-mix')).toBe(4);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('negative control: the same check catches sections without history that take the row without the guard', async () => {
    const locks = createLockManager({ knex: db.knex });
    await db.knex.raw('INSERT IGNORE INTO t_read_write_lock (resource_id) VALUES (?)', [Buffer.from('hx-bad')]);
    testSwitches.section.guard = false;
    expect(await racingIncrements(locks, 'hx-bad', ['section without history'])).toBeLessThan(12);
  });

  it('and permits: a section waits out its waitMs behind a permit; a permit try is refused during a writing one', async () => {
    // No writer intent: the refused writing section would hold the reading one back for its length.
    const locks = createLockManager({ knex: db.knex, writerIntentMs: 0 });
    const other = createLockManager({ knex: db.knex });
    const bare = { section: true, history: false, waitMs: 300 } as const;
    const permit = await locks.acquirePermit('hx-p', { permits: 2 });
    let ran = 0;
    await expect(locks.withWriteLock('hx-p', async () => void ran++, bare)).rejects.toBeInstanceOf(LockTimeoutError);
    await expect(locks.withReadLock('hx-p', async () => void ran++, bare)).rejects.toBeInstanceOf(LockTimeoutError);
    expect(ran).toBe(0);
    await permit.release();
    // A writing section holds the lock row: a permit's try is refused at once. (A reading section reads the
    // row without locking it and shares the gate, as a permit acquire does: the two kinds are not kept
    // apart there, with history or without: a gap docs/semaphores.md states.)
    const tried = await locks.withWriteLock('hx-p', () => other.tryAcquirePermit('hx-p', { permits: 2 }), bare);
    expect(tried).toBeNull();
    // The gap as docs/semaphores.md states it: granted beside a reading section.
    const beside = await locks.withReadLock('hx-p', () => other.tryAcquirePermit('hx-p', { permits: 2 }), bare);
    expect(beside).not.toBeNull();
    await beside!.release();
    // Free again: a permit is granted.
    const after = await other.tryAcquirePermit('hx-p', { permits: 2 });
    expect(after).not.toBeNull();
    await after!.release();
  });

  it("is the manager's default with sectionHistory: false; a call's history: true writes the row", async () => {
    const locks = createLockManager({ knex: db.knex, sectionHistory: false });
    await locks.withWriteLock('hx-d', async () => undefined, { section: true });
    expect(await sectionRows('hx-d')).toBe(0);
    await locks.withWriteLock('hx-d', async () => undefined, { section: true, history: true });
    expect(await sectionRows('hx-d')).toBe(1);
    // Durable grants are rows whatever the manager's sectionHistory.
    await locks.withWriteLock('hx-d', async () => undefined);
    const { grants } = await locks.history('hx-d', { limit: 10 });
    expect(grants.map((g) => g.releasedBy)).toEqual(['holder', 'section']);
  });

  it('refuses history: false without section, and a history or sectionHistory not boolean, with nothing written', async () => {
    const locks = createLockManager({ knex: db.knex });
    let ran = 0;
    const work = async (): Promise<void> => void ran++;
    for (const call of [
      () => locks.withWriteLock('hx-e', work, { history: false }),
      () => locks.withReadLock('hx-e', work, { history: false }),
      () => locks.withLocks({ write: ['hx-e'] }, work, { history: false }),
      () => locks.withWriteLock('hx-e', work, { section: true, history: 'no' as never }),
    ])
      await expect(call()).rejects.toBeInstanceOf(InvalidOptionsError);
    await expect(locks.withWriteLock('hx-e', work, { history: false })).rejects.toThrow(
      /^history: false needs section: true/,
    );
    expect(() => createLockManager({ knex: db.knex, sectionHistory: 1 as never })).toThrow(InvalidOptionsError);
    expect(ran).toBe(0);
    const [rows] = (await db.knex.raw('SELECT COUNT(*) AS n FROM t_read_write_lock WHERE resource_id = ?', [
      Buffer.from('hx-e'),
    ])) as unknown as [Array<{ n: number }>];
    expect(Number(rows[0]!.n)).toBe(0);
  });
});

describe('a lost COMMIT reply', () => {
  /** The statement that commits a one-resource section, with history or without. */
  const commitOf = (history: boolean): RegExp =>
    TEST_PROCEDURES ? (history ? /CALL rwlock_section_commit_one/ : /CALL rwlock_section_commit_bare/) : /^COMMIT/i;

  /** A section on `resource` that counts once under `tag`, its commit's reply cut as `mode` says. */
  async function cutSection(
    tag: string,
    history: boolean,
    mode: 'before-reply' | 'before-forward',
  ): Promise<{ outcome: unknown; token: string; counted: number }> {
    await newCounter(tag);
    const locks = createLockManager({ knex: via.knex, resolveTimeoutMs: 10_000 });
    let token = '';
    const outcome = await locks
      .withWriteLock(
        tag,
        async (trx, grant) => {
          token = grant.token;
          // Armed once the section holds, so that it is the commit that is cut.
          void via.proxy.armOnce(commitOf(history), mode);
          await trx.raw('UPDATE hx_counters SET n = n + 1 WHERE name = ?', [tag]);
          return 'paid';
        },
        { section: true, history },
      )
      .catch((e: unknown) => e);
    return { outcome, token, counted: await counter(tag) };
  }

  it('with history: settled by the row, the value returned once', async () => {
    const { outcome, counted } = await cutSection('hx-lost-a', true, 'before-reply');
    expect(outcome).toBe('paid');
    expect(counted).toBe(1);
  });

  it('without history: LockOutcomeUnknownError with the token, whether the server committed or never saw the COMMIT', async () => {
    const committed = await cutSection('hx-lost-b', false, 'before-reply');
    expect(committed.outcome).toBeInstanceOf(LockOutcomeUnknownError);
    expect((committed.outcome as LockOutcomeUnknownError).token).toBe(committed.token);
    expect((committed.outcome as LockOutcomeUnknownError).grantId).toBeNull();
    expect((committed.outcome as Error).message).toMatch(/no row to settle it by/);
    expect(committed.counted).toBe(1);
    const never = await cutSection('hx-lost-c', false, 'before-forward');
    expect(never.outcome).toBeInstanceOf(LockOutcomeUnknownError);
    expect(never.counted).toBe(0);
    expect(await sectionRows('hx-lost-b')).toBe(0);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('negative control: settled by its token as a section with history is, it calls a committed section not committed', async () => {
    testSwitches.section.settleWithoutRow = true;
    const { outcome, counted } = await cutSection('hx-lost-d', false, 'before-reply');
    // ConnectionLostError says nothing committed, so a caller would run it again: yet it committed.
    expect(outcome).toBeInstanceOf(ConnectionLostError);
    expect(counted).toBe(1);
  });
});
