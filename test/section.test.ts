// One-commit sections ({ section: true }): exclusion between sections and with durable grants
// both ways (with a negative control: an unguarded take is caught by the same check), waitMs and
// abort while waiting on another section's row lock, history, reentrancy and refused options.
// covers: src/test-switches.ts, src/lock/sections/section-run.ts, src/lock/sections/section-attempt.ts, src/lock/sections/section-take.ts, src/lock/sections/section-grant.ts, src/lock/sections/section-types.ts, src/sql/section.ts
import { afterEach, describe, expect, it } from 'vitest';
import {
  createLockManager,
  InvalidOptionsError,
  LockAbortedError,
  LockTimeoutError,
  RwLockError,
} from '../src/index.js';
import knexFactory from 'knex';
import { databaseUrl } from '../harness/database.js';
import { testSwitches } from '../src/test-switches.js';
import { withConnection } from '../src/sql/connection.js';
import { detectSectionServer } from '../src/sql/section.js';
import { TEST_PROCEDURES, useTestDatabase } from './support/db.js';
import { invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);

afterEach(() => {
  testSwitches.section.guard = true;
});

/** A promise and its resolver: a step the test opens when it chooses. */
function gate(): { open: () => void; opened: Promise<void> } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}

async function counter(name: string): Promise<number> {
  const [rows] = (await db.knex.raw('SELECT n FROM counters WHERE name = ?', [name])) as unknown as [
    Array<{ n: number }>,
  ];
  return Number(rows[0]?.n ?? -1);
}

async function counts(resource: string): Promise<{ w: number; r: number }> {
  const [rows] = (await db.knex.raw('SELECT w_count AS w, r_count AS r FROM t_read_write_lock WHERE resource_id = ?', [
    Buffer.from(resource),
  ])) as unknown as [Array<{ w: number; r: number }>];
  return { w: Number(rows[0]!.w), r: Number(rows[0]!.r) };
}

/** 12 write sections at once, each a read-modify-write with a pause between: lost updates show a broken exclusion. */
async function racingIncrements(name: string): Promise<number> {
  await db.knex.raw('CREATE TABLE IF NOT EXISTS counters (name VARCHAR(32) PRIMARY KEY, n INT NOT NULL) ENGINE=InnoDB');
  await db.knex.raw('INSERT INTO counters VALUES (?, 0)', [name]);
  const locks = createLockManager({ knex: db.knex });
  await Promise.all(
    Array.from({ length: 12 }, () =>
      locks.withWriteLock(
        name,
        async (trx) => {
          const [rows] = (await trx.raw('SELECT n FROM counters WHERE name = ?', [name])) as unknown as [
            Array<{ n: number }>,
          ];
          await new Promise((r) => setTimeout(r, 5));
          await trx.raw('UPDATE counters SET n = ? WHERE name = ?', [Number(rows[0]!.n) + 1, name]);
        },
        { section: true, isolationLevel: 'read committed' },
      ),
    ),
  );
  return counter(name);
}

describe('one-commit sections', () => {
  it('write sections exclude each other; a section logs one released row marked section and leaves no count', async () => {
    expect(await racingIncrements('s-excl')).toBe(12);
    expect(await counts('s-excl')).toEqual({ w: 0, r: 0 });
    const locks = createLockManager({ knex: db.knex });
    const { grants } = await locks.history('s-excl', { limit: 100 });
    expect(grants).toHaveLength(12);
    expect(grants.every((g) => g.releasedBy === 'section' && g.mode === 'write')).toBe(true);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('negative control: the same check catches sections that take the row without the guard', async () => {
    await db.knex.raw('INSERT IGNORE INTO t_read_write_lock (resource_id) VALUES (?)', [Buffer.from('s-bad')]);
    testSwitches.section.guard = false;
    expect(await racingIncrements('s-bad')).toBeLessThan(12);
  });

  it('a section waits for a durable writer (its work never runs meanwhile) and runs once it is released', async () => {
    const locks = createLockManager({ knex: db.knex });
    const durable = await locks.acquireWrite('s-dur');
    let ran = 0;
    await expect(
      locks.withWriteLock('s-dur', async () => void ran++, { section: true, waitMs: 300 }),
    ).rejects.toBeInstanceOf(LockTimeoutError);
    await expect(
      locks.withReadLock('s-dur', async () => void ran++, { section: true, waitMs: 300 }),
    ).rejects.toBeInstanceOf(LockTimeoutError);
    expect(ran).toBe(0);
    const waiting = locks.withWriteLock('s-dur', async () => ++ran, { section: true, waitMs: 10_000 });
    await new Promise((r) => setTimeout(r, 100));
    expect(ran).toBe(0);
    await durable.release();
    expect(await waiting).toBe(1);
    expect(await counts('s-dur')).toEqual({ w: 0, r: 0 });
  });

  it('a write section waiting for durable readers marks writer intent: new read sections hold back', async () => {
    const locks = createLockManager({ knex: db.knex, writerIntentMs: 5_000 });
    const reader = await locks.acquireRead('s-intent');
    let wrote = false;
    const writer = locks.withWriteLock('s-intent', async () => void (wrote = true), { section: true, waitMs: 10_000 });
    await expect.poll(async () => (await locks.inspect('s-intent')).writerWaiting).toBe(true);
    await expect(
      locks.withReadLock('s-intent', async () => 'read', { section: true, waitMs: 300 }),
    ).rejects.toBeInstanceOf(LockTimeoutError);
    expect(wrote).toBe(false);
    await reader.release();
    await writer;
    expect(wrote).toBe(true);
  });

  it('negative control: an unguarded section runs its work while a durable writer holds, and the same check sees it', async () => {
    const locks = createLockManager({ knex: db.knex });
    const durable = await locks.acquireWrite('s-dur-bad');
    testSwitches.section.guard = false;
    let ran = 0;
    await locks.withWriteLock('s-dur-bad', async () => void ran++, { section: true, waitMs: 300 });
    expect(ran).toBe(1);
    await durable.release();
  });

  it('a durable acquire meeting a section waits on its row and decides on the counts it leaves', async () => {
    const locks = createLockManager({ knex: db.knex });
    const other = createLockManager({ knex: db.knex });
    const inside = gate();
    const finish = gate();
    const section = locks.withWriteLock(
      's-row',
      async () => {
        inside.open();
        await finish.opened;
        return 'done';
      },
      { section: true },
    );
    await inside.opened;
    let granted = false;
    const durable = other.acquireWrite('s-row', { waitMs: 10_000 }).then((g) => {
      granted = true;
      return g;
    });
    await new Promise((r) => setTimeout(r, 300));
    expect(granted).toBe(false);
    finish.open();
    expect(await section).toBe('done');
    const grant = await durable;
    expect(await counts('s-row')).toEqual({ w: 1, r: 0 });
    await grant.release();
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('reading sections share; a writing section waits for them', async () => {
    const locks = createLockManager({ knex: db.knex });
    const both = gate();
    let inside = 0;
    const reader = () =>
      locks.withReadLock(
        's-read',
        async () => {
          if (++inside === 2) both.open();
          await both.opened; // only returns if the two readers are inside together
        },
        { section: true, waitMs: 5_000 },
      );
    await Promise.all([reader(), reader()]);
    expect(inside).toBe(2);
  });

  it('waitMs bounds a wait on another section (whole seconds, rounded up) and signal aborts it', async () => {
    const locks = createLockManager({ knex: db.knex });
    const inside = gate();
    const finish = gate();
    const holder = locks.withWriteLock(
      's-wait',
      async () => {
        inside.open();
        await finish.opened;
      },
      { section: true },
    );
    await inside.opened;
    let started = performance.now();
    await expect(locks.withWriteLock('s-wait', async () => 1, { section: true, waitMs: 1_500 })).rejects.toBeInstanceOf(
      LockTimeoutError,
    );
    const timedOutAfter = performance.now() - started;
    expect(timedOutAfter).toBeGreaterThanOrEqual(1_500);
    expect(timedOutAfter).toBeLessThan(2_000 + 1_500); // 2 s of lock wait, plus margin
    const controller = new AbortController();
    started = performance.now();
    const aborted = locks.withWriteLock('s-wait', async () => 1, {
      section: true,
      waitMs: 30_000,
      signal: controller.signal,
    });
    setTimeout(() => controller.abort(new Error('stop')), 200);
    await expect(aborted).rejects.toBeInstanceOf(LockAbortedError);
    expect(performance.now() - started).toBeLessThan(5_000);
    finish.open();
    await holder;
    expect(await locks.withWriteLock('s-wait', async () => 'free', { section: true, waitMs: 0 })).toBe('free');
  });

  it('reentrancy: a section inside a durable scope joins it; a durable acquire inside a section is refused', async () => {
    const locks = createLockManager({ knex: db.knex });
    await locks.withWriteLock('s-re', async (trx, grant) => {
      await locks.withWriteLock(
        's-re',
        async (trx2, grant2) => {
          expect(trx2).toBe(trx);
          expect(grant2).toBe(grant);
        },
        { section: true },
      );
    });
    await locks.withWriteLock(
      's-re',
      async (trx, grant) => {
        const code = (p: Promise<unknown>) =>
          p.then(
            () => 'resolved',
            (e: unknown) => (e instanceof RwLockError ? e.code : String(e)),
          );
        expect(await code(locks.acquireWrite('s-re', { waitMs: 100 }))).toBe('ERR_RWLOCK_SECTION');
        expect(await code(locks.tryAcquireRead('s-re'))).toBe('ERR_RWLOCK_SECTION');
        for (const call of [grant.release(), grant.extend(1000), grant.downgrade(), grant.tryUpgrade()])
          expect(await code(call)).toBe('ERR_RWLOCK_SECTION');
        expect(await grant.isLive()).toBe(true);
        // A nested scoped call on the same resource joins the section.
        await locks.withReadLock('s-re', async (trx2) => expect(trx2).toBe(trx));
      },
      { section: true },
    );
  });

  it('restores the session bounds it set on the pooled connection, after a commit and after a timeout', async () => {
    const one = knexFactory({ client: 'mysql2', connection: databaseUrl(db.url, db.name), pool: { min: 1, max: 1 } });
    try {
      const server = await withConnection(one, detectSectionServer);
      expect(server.topology).toBe('single');
      // The section procedures (migration 009) bound wait_timeout on both servers; the statements
      // bound MariaDB's idle_transaction_timeout, which counts only inside a transaction.
      const idle = server.mariadb && !TEST_PROCEDURES ? 'idle_transaction_timeout' : 'wait_timeout';
      const session = async (q: Pick<typeof one, 'raw'> = one) => {
        const [rows] = (await q.raw(
          `SELECT @@SESSION.${idle} AS idle, @@SESSION.innodb_lock_wait_timeout AS lwt`,
        )) as unknown as [Array<{ idle: number; lwt: number }>];
        return { idle: Number(rows[0]!.idle), lwt: Number(rows[0]!.lwt) };
      };
      await one.raw(`SET SESSION ${idle} = 777, SESSION innodb_lock_wait_timeout = 77`);
      const locks = createLockManager({ knex: one, sectionIdleTimeoutMs: 3_000 });
      const inside = await locks.withWriteLock('s-session', async (trx) => session(trx), {
        section: true,
        waitMs: 5_000,
      });
      // During the section: the idle bound in force, and the work's row-lock waits as the session had them.
      expect(inside).toEqual({ idle: 3, lwt: 77 });
      expect(await session()).toEqual({ idle: 777, lwt: 77 });
      const durable = await createLockManager({ knex: db.knex }).acquireWrite('s-session');
      await expect(
        locks.withWriteLock('s-session', async () => 1, { section: true, waitMs: 0 }),
      ).rejects.toBeInstanceOf(LockTimeoutError);
      await durable.release();
      expect(await session()).toEqual({ idle: 777, lwt: 77 });
    } finally {
      await one.destroy();
    }
  });

  it('a rejection of the work, whatever its value, rolls the section back and reaches the caller as it is', async () => {
    await db.knex.raw(
      'CREATE TABLE IF NOT EXISTS counters (name VARCHAR(32) PRIMARY KEY, n INT NOT NULL) ENGINE=InnoDB',
    );
    const locks = createLockManager({ knex: db.knex });
    for (const reason of [undefined, 'text', new Error('boom')]) {
      const seen = await locks
        .withWriteLock(
          's-reject',
          async (trx) => {
            await trx.raw("INSERT INTO counters VALUES ('s-reject', 1)");
            throw reason;
          },
          { section: true },
        )
        .then(
          () => 'resolved',
          (e: unknown) => ({ e }),
        );
      expect(seen).toEqual({ e: reason });
      expect(await counter('s-reject')).toBe(-1);
    }
    expect((await locks.history('s-reject')).grants).toEqual([]);
  });

  it('refuses leaseMs with section, a non-boolean section and a bad sectionIdleTimeoutMs, with nothing written', async () => {
    const locks = createLockManager({ knex: db.knex });
    await expect(locks.withWriteLock('s-opt', async () => 1, { section: true, leaseMs: 1_000 })).rejects.toBeInstanceOf(
      InvalidOptionsError,
    );
    await expect(
      locks.withWriteLock('s-opt', async () => 1, { section: 'yes' as unknown as boolean }),
    ).rejects.toBeInstanceOf(InvalidOptionsError);
    expect(() => createLockManager({ knex: db.knex, sectionIdleTimeoutMs: 0 })).toThrow(InvalidOptionsError);
    const [rows] = (await db.knex.raw('SELECT COUNT(*) AS n FROM t_read_write_lock WHERE resource_id = ?', [
      Buffer.from('s-opt'),
    ])) as unknown as [Array<{ n: number }>];
    expect(Number(rows[0]!.n)).toBe(0);
  });
});
