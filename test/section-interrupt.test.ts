// Ending a section's wait on another section (its signal, its deadline) never reaches anyone
// else's query, and a section whose connection dies under its work reports ConnectionLostError.
// The interruption sends KILL QUERY from a connection of its own and waits for its reply before the
// section's connection is used again or handed back to the pool. On a pool of 2 kept busy by
// application queries, no application query is interrupted. Negative control: the interruption as
// it was (KILL QUERY sent through the pool without waiting, the connection handed back) interrupts
// application queries that got the section's connection.
// covers: src/lock/sections/section-waits.ts, src/sql/abort.ts
import { afterEach, describe, expect, it } from 'vitest';
import type { Knex } from 'knex';
import { ConnectionLostError, createLockManager, LockAbortedError, LockTimeoutError } from '../src/index.js';
import { testSwitches } from '../src/test-switches.js';
import { useTestDatabase } from './support/db.js';
import { lockWaitCount } from './support/lock-waits.js';

const db = useTestDatabase(import.meta.filename);

afterEach(() => {
  testSwitches.section.onKill = undefined;
  testSwitches.section.killThroughPool = false;
});

function gate(): { open: () => void; opened: Promise<void> } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}

/** A writing section on `id` through the file's own pool, held until the returned function is called. */
async function holdSection(id: string): Promise<() => Promise<void>> {
  const inside = gate();
  const finish = gate();
  const done = createLockManager({ knex: db.knex }).withWriteLock(
    id,
    async () => {
      inside.open();
      await finish.opened;
    },
    { section: true },
  );
  await inside.opened;
  return async () => {
    finish.open();
    await done;
  };
}

const lockWaits = (): Promise<number> => lockWaitCount(db.knex);

async function threadAlive(id: number): Promise<boolean> {
  const [rows] = (await db.knex.raw('SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE ID = ?', [
    id,
  ])) as unknown as [Array<{ n: number }>];
  return Number(rows[0]!.n) > 0;
}

/** An application's queries on the shared pool, until `stop`: SLEEP answers 1 (or fails) when a KILL QUERY hits it. */
function application(
  pool: Knex,
  stop: Promise<void>,
  done: { queries: number },
): Promise<{ queries: number; interrupted: number }> {
  let stopped = false;
  void stop.then(() => (stopped = true));
  return (async () => {
    let queries = 0;
    let interrupted = 0;
    while (!stopped) {
      queries++;
      done.queries++;
      try {
        const [rows] = (await pool.raw('SELECT SLEEP(0.05) AS s')) as unknown as [Array<{ s: number }>];
        if (Number(rows[0]!.s) !== 0) interrupted++;
      } catch {
        interrupted++;
      }
    }
    return { queries, interrupted };
  })();
}

/**
 * `cycles` times: a section on a pool of 2 waits behind another section and is aborted, then the
 * holder ends; two application loops keep the same pool busy all along.
 */
async function abortOnBusyPool(cycles: number): Promise<{ queries: number; interrupted: number; errors: unknown[] }> {
  const pool = db.connect({ poolMax: 2 });
  const stop = gate();
  const done = { queries: 0 };
  const apps = [application(pool, stop.opened, done), application(pool, stop.opened, done)];
  const errors: unknown[] = [];
  try {
    for (let i = 0; i < cycles; i++) {
      const release = await holdSection(`interrupt-busy-${i}`);
      const controller = new AbortController();
      let settled = false;
      const waiting = createLockManager({ knex: pool })
        .withWriteLock(`interrupt-busy-${i}`, async () => 'ran', {
          section: true,
          waitMs: 30_000,
          signal: controller.signal,
        })
        .then(
          () => undefined,
          (e: unknown) => e,
        )
        .finally(() => (settled = true));
      // Waiting on the held row, or already ended: under the negative control an earlier cycle's
      // unawaited KILL can end this section before it waits (its error is then recorded below).
      await expect.poll(async () => settled || (await lockWaits()) > 0, { timeout: 10_000 }).toBe(true);
      // The application keeps the pool busy around the abort: a few of its queries ran meanwhile.
      const before = done.queries;
      await expect.poll(() => done.queries, { interval: 10 }).toBeGreaterThanOrEqual(before + 4);
      controller.abort(new Error('stop'));
      await release();
      errors.push(await waiting);
    }
  } finally {
    stop.open();
  }
  const results = await Promise.all(apps);
  return {
    queries: results.reduce((n, r) => n + r.queries, 0),
    interrupted: results.reduce((n, r) => n + r.interrupted, 0),
    errors,
  };
}

const CYCLES = 15;

describe('an interrupted section wait on a busy shared pool', () => {
  it('interrupts no application query; the section rejects at once, its statement killed, its connection reused', async () => {
    const killed: number[] = [];
    testSwitches.section.onKill = (id) => killed.push(id);
    const { queries, interrupted, errors } = await abortOnBusyPool(CYCLES);
    for (const err of errors) expect(err).toBeInstanceOf(LockAbortedError);
    expect(queries).toBeGreaterThan(CYCLES);
    expect(interrupted).toBe(0);
    // Each KILL QUERY answered, on the thread of the section's own connection (reused from the pool).
    expect(killed.length).toBeGreaterThan(0);
  });

  it('negative control: KILL QUERY through the pool, unawaited, interrupts application queries', async () => {
    testSwitches.section.killThroughPool = true;
    const { interrupted } = await abortOnBusyPool(CYCLES);
    expect(interrupted).toBeGreaterThan(0);
  });

  it('a deadline ends the wait the same way: LockTimeoutError by waitMs, the holder still holding', async () => {
    const killed: number[] = [];
    testSwitches.section.onKill = (id) => killed.push(id);
    const release = await holdSection('interrupt-deadline');
    const started = performance.now();
    const err = await createLockManager({ knex: db.knex })
      .withWriteLock('interrupt-deadline', async () => 'ran', { section: true, waitMs: 300 })
      .catch((e: unknown) => e);
    const ms = performance.now() - started;
    await release();
    expect(err).toBeInstanceOf(LockTimeoutError);
    expect(ms).toBeGreaterThanOrEqual(300);
    expect(killed).toHaveLength(1);
  });
});

describe('a section whose signal aborted before its wait began', () => {
  // The signal aborts between two of the section's statements (here while its BEGIN runs): its next
  // wait is refused before it is sent, with nothing of the section's running on the connection. A
  // KILL QUERY sent then, unawaited, found the connection back in the pool running the next caller's
  // statement. The KILL's own connection is held back here until that statement waits on a row lock,
  // as a busy machine's slow connect does.
  it("rejects with LockAbortedError and interrupts no statement of the connection's next user", async () => {
    await db.knex.raw('CREATE TABLE IF NOT EXISTS interrupt_probe (id INT PRIMARY KEY) ENGINE=InnoDB');
    await db.knex.raw('INSERT IGNORE INTO interrupt_probe VALUES (1)');
    const pool = db.connect({ poolMax: 1 });
    await pool.raw('SELECT 1'); // the pool's one connection, opened before the KILL's is held back
    const client = pool.client as { acquireRawConnection(): Promise<unknown> };
    const open = client.acquireRawConnection.bind(client);
    const killerMayConnect = gate();
    let killerAsked = false;
    client.acquireRawConnection = async () => {
      killerAsked = true;
      await killerMayConnect.opened;
      return open();
    };
    const killAnswered = gate();
    testSwitches.section.onKill = () => killAnswered.open();
    const controller = new AbortController();
    pool.on('query', (q: { sql?: string }) => {
      if (/^(begin|start transaction)/i.test(q.sql ?? '')) controller.abort(new Error('stop'));
    });
    const err = await createLockManager({ knex: pool })
      .withWriteLock('interrupt-before-wait', async () => 'ran', {
        section: true,
        waitMs: 30_000,
        signal: controller.signal,
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LockAbortedError);

    // The next user of the pool's one connection waits on a row another transaction locked.
    const blocker = await db.knex.transaction();
    try {
      await blocker.raw('SELECT id FROM interrupt_probe WHERE id = 1 FOR UPDATE');
      const next = pool.raw('SELECT id FROM interrupt_probe WHERE id = 1 FOR UPDATE').then(
        () => 'answered',
        (e: unknown) => e,
      );
      await expect.poll(lockWaits, { timeout: 10_000 }).toBeGreaterThan(0);
      killerMayConnect.open();
      // A KILL on its way has landed once answered; none asked for, none can land.
      if (killerAsked) await killAnswered.opened;
      await blocker.commit();
      expect(await next).toBe('answered');
    } finally {
      if (!blocker.isCompleted()) await blocker.rollback();
    }
  });
});

describe('a section whose connection dies under its work', () => {
  it('paused past sectionIdleTimeoutMs, then running a statement: ConnectionLostError, nothing committed', async () => {
    await db.knex.raw('CREATE TABLE IF NOT EXISTS interrupt_effects (tag VARCHAR(32) PRIMARY KEY) ENGINE=InnoDB');
    const locks = createLockManager({ knex: db.knex, sectionIdleTimeoutMs: 1_000 });
    const err = await locks
      .withWriteLock(
        'interrupt-idle',
        async (trx) => {
          await trx.raw("INSERT INTO interrupt_effects VALUES ('idle')");
          const [rows] = (await trx.raw('SELECT CONNECTION_ID() AS id')) as unknown as [Array<{ id: number }>];
          // The server closes the idle connection after the bound: wait until it has.
          await expect.poll(() => threadAlive(Number(rows[0]!.id)), { timeout: 10_000 }).toBe(false);
          await trx.raw('SELECT 1');
        },
        { section: true },
      )
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectionLostError);
    const [rows] = (await db.knex.raw("SELECT COUNT(*) AS n FROM interrupt_effects WHERE tag = 'idle'")) as unknown as [
      Array<{ n: number }>,
    ];
    expect(Number(rows[0]!.n)).toBe(0);
  });

  it('killed mid-work: ConnectionLostError', async () => {
    const locks = createLockManager({ knex: db.knex });
    const err = await locks
      .withWriteLock(
        'interrupt-killed',
        async (trx) => {
          const [rows] = (await trx.raw('SELECT CONNECTION_ID() AS id')) as unknown as [Array<{ id: number }>];
          await db.knex.raw('KILL ?', [Number(rows[0]!.id)]);
          await trx.raw('SELECT 1');
        },
        { section: true },
      )
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectionLostError);
  });
});
