// One contract in every mix of lock modes (docs/api.md, "The contract"), checked for every holder
// (a durable grant, a durable group, a section with history and without, a section group; writing
// and reading) against every
// caller (a try, each waiting call with waitMs, each with a signal):
// 1. a try answers at once, and a resource held by a section counts as held;
// 2. every wait ends by its waitMs and on its signal;
// 3. readers share across modes, and a waiting writer's intent holds new readers back in every mix.
// "At once" and "by its waitMs" are judged against the holder: each holder holds for HOLD_MS unless
// the test ends it, so a call that waited for the holder answers only after the holder ended. The
// negative controls run what the contract forbids through the same checks: the acquire procedure
// of migration 006 (which waits in InnoDB's lock queue), a reading section that locks the lock
// row, as before the gate, and a writer that marks its intent only with the lock row free at once (the
// acquire of migration 010), which a stream of readers holding the gate at every attempt starves.
// covers: src/lock/durable/durable-acquire.ts, src/lock/groups/group.ts, src/lock/sections/section-run.ts, src/lock/sections/section-take.ts, src/lock/waiting/wait.ts, src/sql/acquire.ts, src/sql/section.ts
import { afterEach, describe, expect, it } from 'vitest';
import type { Knex } from 'knex';
import {
  createLockManager,
  DatabaseUnreachableError,
  LockAbortedError,
  LockTimeoutError,
  type LockManager,
} from '../src/index.js';
import { PROCEDURES as V6 } from '../migrations/006_invoker_routines.js';
import { testSwitches } from '../src/test-switches.js';
import { acquirePooled, type PoolClient } from '../src/sql/connection.js';
import mysql from 'mysql2/promise';
import { databaseUrl } from '../harness/database.js';
import { CURRENT_PROCEDURES, frozen } from '../migrations/index.js';
import { DB_NOW } from '../src/sql/clock.js';
import { readGuard } from '../src/sql/decision.js';
import { gateNowait } from '../src/sql/acquire.js';
import { serverUrl, TEST_PROCEDURES, useTestDatabase } from './support/db.js';
import { invariantViolations } from './support/state.js';
import { lockWaitCount, waitsForALock } from './support/lock-waits.js';

const db = useTestDatabase(import.meta.filename);

afterEach(() => {
  testSwitches.section.lockRowShared = false;
});

/** How long a holder holds unless the test ends it: every bound below is far inside it. */
const HOLD_MS = 4_000;
/** The waitMs of the waiting callers. */
const WAIT_MS = 400;
/** When the signal of the aborted callers aborts; their waitMs is far longer. */
const ABORT_AFTER_MS = 200;

type Mode = 'write' | 'read';
const HOLDERS = ['durable', 'durable group', 'section', 'section without history', 'section group'] as const;
type HolderKind = (typeof HOLDERS)[number];
const WAITERS = [
  'acquire',
  'withLock',
  'withGrant',
  'acquireMany',
  'withLocks',
  'section',
  'section without history',
  'section group',
] as const;
type CallerKind = 'try' | (typeof WAITERS)[number];

let seq = 0;
function resource(label: string): string {
  return `${label}-${++seq}`;
}

function gate(): { open: () => void; opened: Promise<void> } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}

interface Held {
  /**
   * True once the holder began to end (its release or its section's commit is on its way): a call
   * answered before that did not wait for it.
   */
  ended(): boolean;
  end(): Promise<void>;
}

/** Takes `id` in `mode` as a holder of `kind`, held until end() or HOLD_MS. */
async function hold(locks: LockManager, kind: HolderKind, mode: Mode, id: string): Promise<Held> {
  let ended = false;
  if (kind === 'durable' || kind === 'durable group') {
    const held =
      kind === 'durable'
        ? await (mode === 'write' ? locks.acquireWrite(id) : locks.acquireRead(id))
        : await locks.acquireMany({ [mode]: [id, `${id}~`] });
    let release: Promise<void> | undefined;
    const end = (): Promise<void> => {
      ended = true;
      return (release ??= held.release().then(() => undefined));
    };
    const timer = setTimeout(() => void end(), HOLD_MS);
    return {
      ended: () => ended,
      end: () => {
        clearTimeout(timer);
        return end();
      },
    };
  }
  const inside = gate();
  const finish = gate();
  const work = async (): Promise<void> => {
    inside.open();
    await Promise.race([finish.opened, new Promise((r) => setTimeout(r, HOLD_MS))]);
    ended = true; // the commit follows
  };
  const one = { section: true, history: kind === 'section' } as const;
  const done =
    kind === 'section group'
      ? locks.withLocks({ [mode]: [id, `${id}~`] }, work, { section: true })
      : mode === 'write'
        ? locks.withWriteLock(id, work, one)
        : locks.withReadLock(id, work, one);
  await inside.opened;
  return {
    ended: () => ended,
    end: async () => {
      finish.open();
      await done;
    },
  };
}

interface Answer {
  /** 'granted' (and released again), 'null' (a try refused), or the error. */
  outcome: 'granted' | 'null' | Error;
  ms: number;
  /** Whether the holder had ended when the answer came. */
  holderEnded: boolean;
  /** Whether the call's signal (if it had one) had aborted when the answer came. */
  signalAborted: boolean;
}

/** One call of `kind` on `id` in `mode`; a grant it gets is released at once. */
async function call(
  locks: LockManager,
  kind: CallerKind,
  mode: Mode,
  id: string,
  held: Held,
  options: { waitMs?: number; signal?: AbortSignal } = {},
): Promise<Answer> {
  const started = performance.now();
  const other = `${id}-other`;
  const ran = async (): Promise<'granted'> => 'granted';
  const run = async (): Promise<'granted' | 'null'> => {
    switch (kind) {
      case 'try': {
        const g = await (mode === 'write' ? locks.tryAcquireWrite(id) : locks.tryAcquireRead(id));
        await g?.release();
        return g ? 'granted' : 'null';
      }
      case 'acquire': {
        const g = await (mode === 'write' ? locks.acquireWrite(id, options) : locks.acquireRead(id, options));
        await g.release();
        return 'granted';
      }
      case 'withLock':
        return mode === 'write' ? locks.withWriteLock(id, ran, options) : locks.withReadLock(id, ran, options);
      case 'withGrant':
        await (mode === 'write' ? locks.withWriteGrant(id, ran, options) : locks.withReadGrant(id, ran, options));
        return 'granted';
      case 'acquireMany': {
        const group = await locks.acquireMany({ [mode]: [id, other] }, options);
        await group.release();
        return 'granted';
      }
      case 'withLocks':
        return locks.withLocks({ [mode]: [id, other] }, ran, options);
      case 'section':
      case 'section without history': {
        const o = { ...options, section: true, history: kind === 'section' };
        return mode === 'write' ? locks.withWriteLock(id, ran, o) : locks.withReadLock(id, ran, o);
      }
      case 'section group':
        return locks.withLocks({ [mode]: [id, other] }, ran, { ...options, section: true });
    }
  };
  const outcome = await run().catch((e: unknown) => (e instanceof Error ? e : new Error(String(e))));
  return {
    outcome,
    ms: performance.now() - started,
    holderEnded: held.ended(),
    signalAborted: options.signal?.aborted ?? false,
  };
}

/** One knex for the file, with room for a batch of holders and callers at once (a section holds a connection). */
let wide: Knex | undefined;
function wideKnex(): Knex {
  return (wide ??= db.connect({ poolMax: 40 }));
}

/** At most this many cases run side by side (each a holder and a caller, up to 4 connections). */
const BATCH = 7;

/** Runs `cases`, BATCH at a time, each on a resource of its own, each holder ended after its answer. */
async function runCases<T>(cases: Array<() => Promise<T>>): Promise<T[]> {
  const results: T[] = [];
  for (let i = 0; i < cases.length; i += BATCH)
    results.push(...(await Promise.all(cases.slice(i, i + BATCH).map((c) => c()))));
  return results;
}

describe('rule 1: a try answers at once, in every mix', () => {
  for (const kind of HOLDERS)
    for (const held of ['write', 'read'] as const)
      it(`holder: ${kind} ${held}; caller: tryAcquireWrite and tryAcquireRead`, async () => {
        const locks = createLockManager({ knex: wideKnex() });
        const answers = await runCases(
          (['write', 'read'] as const).map((mode) => async () => {
            const id = resource(`try-${kind}-${held}-${mode}`);
            const holder = await hold(locks, kind, held, id);
            const answer = await call(locks, 'try', mode, id, holder);
            await holder.end();
            return { mode, answer };
          }),
        );
        for (const { mode, answer } of answers) {
          // Answered while the holder still held: it did not wait for it.
          expect(answer.holderEnded, `${mode} try answered after the holder ended`).toBe(false);
          // Readers share (rule 3); anything else is held.
          expect(answer.outcome).toBe(held === 'read' && mode === 'read' ? 'granted' : 'null');
        }
      });
});

describe('rule 2: every wait ends by its waitMs and on its signal, in every mix', () => {
  for (const kind of HOLDERS)
    for (const held of ['write', 'read'] as const)
      it(`holder: ${kind} ${held}; callers: every waiting call with waitMs ${WAIT_MS}, and with a signal`, async () => {
        const locks = createLockManager({ knex: wideKnex() });
        const modes: Mode[] = held === 'write' ? ['write', 'read'] : ['write'];
        const cases = modes.flatMap((mode) =>
          WAITERS.flatMap((caller) =>
            (['waitMs', 'signal'] as const).map((bound) => async () => {
              const id = resource(`wait-${kind}-${held}-${caller}-${mode}-${bound}`);
              const holder = await hold(locks, kind, held, id);
              const options =
                bound === 'waitMs'
                  ? { waitMs: WAIT_MS }
                  : { waitMs: 30_000, signal: AbortSignal.timeout(ABORT_AFTER_MS) };
              const answer = await call(locks, caller, mode, id, holder, options);
              await holder.end();
              return { label: `${caller} ${mode} (${bound})`, bound, answer };
            }),
          ),
        );
        for (const { label, bound, answer } of await runCases(cases)) {
          expect(answer.holderEnded, `${label} answered only after the holder ended`).toBe(false);
          if (bound === 'waitMs') {
            expect(answer.outcome, label).toBeInstanceOf(LockTimeoutError);
            expect(answer.ms, label).toBeGreaterThanOrEqual(WAIT_MS);
          } else {
            expect(answer.outcome, label).toBeInstanceOf(LockAbortedError);
            // Not before the signal aborted. Its timer may fire a few ms short of ABORT_AFTER_MS by
            // performance.now() (Node's timers start from the event loop's cached clock, stale on a
            // busy loop): what the call promises is to end on the signal, not at a time.
            expect(answer.signalAborted, `${label} answered before its signal aborted`).toBe(true);
          }
        }
        expect(await invariantViolations(db.knex)).toEqual([]);
      });
});

describe('a wait that ended borrows no pool connection', () => {
  // A reader stopped at a gate a writing section holds tries again a few times within ~31 ms; a
  // signal that aborts during one of those pauses reaches the next try's ask for a connection
  // already aborted. That connection, lent to a wait that had ended, was never given back.
  it('a connection asked for with an aborted signal: LockAbortedError, and the pool lends nothing', async () => {
    const k = db.connect({ poolMax: 2 });
    const client = k.client as unknown as PoolClient;
    const pool = (k.client as { pool: { numUsed(): number; numFree(): number } }).pool;
    const aborted = AbortSignal.abort(new Error('ended'));
    for (let i = 0; i < 3; i++)
      await expect(
        acquirePooled(client, { signal: aborted, deadline: performance.now() + 1_000 }),
      ).rejects.toBeInstanceOf(LockAbortedError);
    // Had the pool been asked, it would have lent (or be creating) a connection by now: one that
    // works is still to be had, and none is lent.
    const conn = await acquirePooled(client, { deadline: performance.now() + 5_000 });
    await client.releaseConnection(conn);
    expect(pool.numUsed()).toBe(0);
  });

  it('readers behind a writing section, aborted while they re-try at its gate, leave the pool as they found it', async () => {
    const k = db.connect({ poolMax: 10 });
    const locks = createLockManager({ knex: k });
    const pool = (k.client as { pool: { numUsed(): number } }).pool;
    const id = resource('aborted-readers');
    const holder = await hold(locks, 'section', 'write', id);
    // Signals spread over the readers' pauses at the gate (the first of them are taken within ms).
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        call(locks, 'acquire', 'read', id, holder, { waitMs: 30_000, signal: AbortSignal.timeout(5 + i) }),
      ),
    );
    await holder.end();
    for (const a of answers) expect(a.outcome).toBeInstanceOf(LockAbortedError);
    await expect.poll(() => pool.numUsed(), { timeout: 5_000 }).toBe(0);
  });
});

describe('a wait for a pool connection that runs out is a timeout, not an unreachable database', () => {
  it('every waiting call on a busy pool ends with LockTimeoutError (waitedFor pool), never DatabaseUnreachableError', async () => {
    const k = db.connect({ poolMax: 2 });
    const locks = createLockManager({ knex: k });
    // Every connection of the pool lent to a transaction that stays open: the server is reachable.
    const busy = [await k.transaction(), await k.transaction()];
    try {
      // Not vacuous: the same wait for a connection, with no caller's timeout, is what was reported before.
      const client = k.client as unknown as PoolClient;
      await expect(acquirePooled(client, { deadline: performance.now() + 100 })).rejects.toBeInstanceOf(
        DatabaseUnreachableError,
      );
      const waitMs = 300;
      const id = resource('busy-pool');
      for (const run of [
        () => locks.acquireWrite(id, { waitMs }),
        () => locks.acquireRead(id, { waitMs }),
        () => locks.acquirePermit(id, { permits: 2, waitMs }),
        () => locks.acquireMany({ write: [id, `${id}-2`] }, { waitMs }),
        () => locks.withWriteLock(id, async () => 'ran', { waitMs, section: true }),
      ]) {
        const started = performance.now();
        const err = await run().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(LockTimeoutError);
        expect(err).not.toBeInstanceOf(DatabaseUnreachableError);
        expect((err as LockTimeoutError).waitedFor).toBe('pool');
        expect(String(((err as LockTimeoutError).cause as Error | undefined)?.message)).toMatch(/pool is busy/);
        expect(performance.now() - started).toBeGreaterThanOrEqual(waitMs);
      }
    } finally {
      for (const trx of busy) await trx.rollback();
    }
    // The server was there all along: the pool lends again, and the lock is free.
    const grant = await locks.acquireWrite(resource('busy-pool'), { waitMs: 5_000 });
    await grant.release();
  });
});

describe('rule 3: readers share across modes; a waiting writer holds new readers back in every mix', () => {
  for (const kind of HOLDERS)
    it(`holder: ${kind} read; callers: every reading call`, async () => {
      const locks = createLockManager({ knex: wideKnex() });
      const answers = await runCases(
        (['try', ...WAITERS] as const).map((caller) => async () => {
          const id = resource(`share-${kind}-${caller}`);
          const holder = await hold(locks, kind, 'read', id);
          const answer = await call(locks, caller, 'read', id, holder, { waitMs: HOLD_MS * 2 });
          await holder.end();
          return { caller, answer };
        }),
      );
      for (const { caller, answer } of answers) {
        expect(answer.outcome, caller).toBe('granted');
        expect(answer.holderEnded, `${caller} was granted only after the reading holder ended`).toBe(false);
      }
    });

  for (const holderKind of ['durable', 'section'] as const)
    for (const writer of ['acquire', 'section'] as const)
      it(`a ${writer} writer waiting behind a ${holderKind} reader holds back a durable try and a reading section, then gets in`, async () => {
        const locks = createLockManager({ knex: wideKnex(), writerIntentMs: HOLD_MS * 2 });
        const id = resource(`intent-${holderKind}-${writer}`);
        const holder = await hold(locks, holderKind, 'read', id);
        const waiting =
          writer === 'acquire'
            ? locks.acquireWrite(id, { waitMs: HOLD_MS * 3 }).then((g) => g.release())
            : locks.withWriteLock(id, async () => true, { section: true, waitMs: HOLD_MS * 3 });
        // Waiting: a durable writer's intent is marked on the row; a writing section waits in the gate's
        // lock queue, where InnoDB queues new readers behind it.
        await expect
          .poll(async () => (await locks.inspect(id)).writerWaiting || (await lockWaitCount(db.knex)) > 0, {
            timeout: HOLD_MS,
          })
          .toBe(true);
        expect(await locks.tryAcquireRead(id)).toBeNull();
        await expect(
          locks.withReadLock(id, async () => 'read', { section: true, waitMs: WAIT_MS }),
        ).rejects.toBeInstanceOf(LockTimeoutError);
        expect(holder.ended()).toBe(false);
        await holder.end();
        await waiting;
      });
});

describe('the bound of rule 3: writing sections in a stream that never pauses', () => {
  // A durable acquire takes the gate without waiting; writing sections wait for it in InnoDB's queue,
  // which hands it from one to the next at each commit. While writing sections keep that queue
  // non-empty, the gate is never free at a durable acquire's attempt, and a writer's intent cannot be
  // marked on a lock row the section holding the gate has locked: durable writers and readers wait out
  // their waitMs (rule 2 holds; rule 3's "cannot starve" does not reach this mix). A writing section
  // joins the queue and is served in it. docs/api.md states this bound.
  it('durable acquires wait out their waitMs, and are granted once the stream pauses; a writing section is served in it', async () => {
    const locks = createLockManager({ knex: wideKnex() });
    const id = resource('section-stream');
    const never: Held = { ended: () => false, end: async () => {} };
    let streaming = true;
    let committed = 0;
    const STREAMS = 3;
    const stream = async (): Promise<void> => {
      while (streaming)
        await locks.withWriteLock(
          id,
          async () => {
            await new Promise((r) => setTimeout(r, 40));
            committed++;
          },
          { section: true, waitMs: 30_000 },
        );
    };
    const streams = Array.from({ length: STREAMS }, stream);
    try {
      await expect.poll(() => committed, { interval: 20 }).toBeGreaterThanOrEqual(STREAMS);
      const before = committed;
      const durable = await Promise.all(
        (['write', 'read'] as const).map((mode) => call(locks, 'acquire', mode, id, never, { waitMs: WAIT_MS * 3 })),
      );
      for (const answer of durable) {
        expect(answer.outcome).toBeInstanceOf(LockTimeoutError);
        expect(answer.ms).toBeGreaterThanOrEqual(WAIT_MS * 3);
      }
      // The stream ran all along: sections committed while the durable acquires were refused.
      expect(committed - before).toBeGreaterThan(STREAMS);
      // A writing section joins InnoDB's queue for the gate and gets its turn within the stream.
      const queued = await call(locks, 'section', 'write', id, never, { waitMs: HOLD_MS * 2 });
      expect(queued.outcome).toBe('granted');
    } finally {
      streaming = false;
      await Promise.all(streams);
    }
    // The stream paused: the next attempt is granted.
    const after = await locks.acquireWrite(id, { waitMs: WAIT_MS });
    await after.release();
  });
});

describe('rule 3 against a stream of durable readers: the gate is held at every attempt of the writer', () => {
  const DEFAULT_ACQUIRE = CURRENT_PROCEDURES.rwlock_acquire!;
  afterEach(async () => {
    testSwitches.acquire.intentNeedsRowAtOnce = false;
    if (TEST_PROCEDURES) await installAcquire(DEFAULT_ACQUIRE);
  });
  async function installAcquire(body: string): Promise<void> {
    await db.knex.raw('DROP PROCEDURE IF EXISTS rwlock_acquire');
    await db.knex.raw(body);
  }

  /**
   * A reader's acquire as rwlock_acquire runs it, left open: its transaction takes the gate shared, then
   * sends the read guard, which waits while another transaction has the lock row.
   */
  async function readerAcquire(
    id: string,
  ): Promise<{ thread: number; guard: Promise<number>; commit(): Promise<void> }> {
    const conn = await mysql.createConnection(databaseUrl(serverUrl(), db.name));
    const [[version]] = (await conn.query('SELECT VERSION() AS v')) as unknown as [[{ v: string }]];
    await conn.query('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
    await conn.query('START TRANSACTION');
    const [taken] = (await conn.query(gateNowait('read', /mariadb/i.test(version.v)), [
      Buffer.from(id),
    ])) as unknown as [unknown[]];
    expect(taken).toHaveLength(1);
    const guard = conn
      .query(readGuard('?', ''), [Buffer.from(id)])
      .then(([r]) => (r as { affectedRows: number }).affectedRows);
    return {
      thread: conn.threadId,
      guard,
      commit: async () => {
        await guard;
        await conn.query('COMMIT');
        await conn.end();
      },
    };
  }

  async function intentMarked(id: string): Promise<boolean> {
    const [rows] = (await db.knex.raw(
      `SELECT w_wait_until > ${DB_NOW} AS live FROM t_read_write_lock WHERE resource_id = ?`,
      [Buffer.from(id)],
    )) as unknown as [Array<{ live: number | null }>];
    return Number(rows[0]?.live ?? 0) === 1;
  }

  /**
   * Readers' acquires one after another, each taking the gate and queueing its guard before the one
   * before commits, so that the gate and the lock row are held at every instant: at each step, once the
   * waiting writer has made an attempt since the last (or waits on a lock), the next reader comes and
   * the oldest commits. Answers whether the writer's intent was marked within `steps` steps, and the
   * guard of the first reader after the mark (0: it held back).
   */
  async function stream(label: string, steps: number): Promise<{ marked: boolean; heldBack: number | null }> {
    const id = resource(label);
    const k = db.connect({ poolMax: 1 });
    const client = k.client as {
      acquireConnection(): Promise<{ threadId: number; addCommand(cmd: unknown): unknown }>;
      releaseConnection(conn: unknown): Promise<void>;
    };
    const writerConn = await client.acquireConnection();
    await client.releaseConnection(writerConn);
    let commands = 0;
    const send = writerConn.addCommand.bind(writerConn);
    writerConn.addCommand = (cmd) => {
      commands++;
      return send(cmd);
    };
    const locks = createLockManager({ knex: k, writerIntentMs: 60_000 });
    await (await locks.acquireRead(id)).release(); // the gate and the lock row exist
    let current = await readerAcquire(id);
    expect(await current.guard).toBe(1);
    const granted: number[] = [1];
    const writer = locks.acquireWrite(id, { waitMs: 60_000 });
    let marked = false;
    let heldBack: number | null = null;
    try {
      for (let step = 0; step < steps && !marked; step++) {
        const before = commands;
        await expect
          .poll(async () => commands > before || (await waitsForALock(db.knex, writerConn.threadId)))
          .toBe(true);
        const next = await readerAcquire(id);
        await expect.poll(() => waitsForALock(db.knex, next.thread)).toBe(true);
        await current.commit();
        current = next;
        granted.push(await next.guard);
        marked = await intentMarked(id);
        if (marked) heldBack = granted.at(-1)!;
      }
    } finally {
      await current.commit();
      const held = granted.reduce((a, b) => a + b, 0);
      await db.knex.raw('UPDATE t_read_write_lock SET r_count = r_count - ? WHERE resource_id = ?', [
        held,
        Buffer.from(id),
      ]);
      // The stream ended: the writer is served either way.
      await (await writer).release();
      await k.destroy();
    }
    return { marked, heldBack };
  }

  it('a waiting writer marks its intent while the stream runs, and the next reader holds back for it', async () => {
    const { marked, heldBack } = await stream('reader-stream', 20);
    expect(marked).toBe(true);
    expect(heldBack).toBe(0);
  });

  it('negative control: a writer that marks its intent only with the lock row free at once never does', async () => {
    if (TEST_PROCEDURES) await installAcquire(frozen('010_permits').PROCEDURES.rwlock_acquire!);
    else testSwitches.acquire.intentNeedsRowAtOnce = true;
    const { marked } = await stream('reader-stream-control', 8);
    expect(marked).toBe(false);
  });
});

describe('negative controls: the same checks catch what the contract forbids', () => {
  /** Migration 006's acquire, under another name: it waits on the lock row in InnoDB's queue. */
  async function installV6(k: Knex): Promise<void> {
    await k.raw('DROP PROCEDURE IF EXISTS rwlock_acquire_v6');
    await k.raw(V6.rwlock_acquire!.replace('CREATE PROCEDURE rwlock_acquire(', 'CREATE PROCEDURE rwlock_acquire_v6('));
  }

  it("migration 006's acquire, behind a writing section, answers only when the section ended", async () => {
    const k = wideKnex();
    await installV6(k);
    const locks = createLockManager({ knex: k });
    const id = resource('control-v6');
    const holder = await hold(locks, 'section', 'write', id);
    const started = performance.now();
    const [result] = (await k.raw('CALL rwlock_acquire_v6(?, 0, CONVERT(? USING utf8mb4), ?, 0)', [
      Buffer.from(id),
      Buffer.from('control'),
      Buffer.from('v6-control-token'),
    ])) as unknown as [Array<Array<{ id: number | null }>>];
    const holderEnded = holder.ended();
    const ms = performance.now() - started;
    await holder.end();
    // The check of rule 1 and rule 2 fails: the answer came after the holder ended, as a grant.
    expect(holderEnded).toBe(true);
    expect(result[0]![0]!.id).not.toBeNull();
    expect(ms).toBeGreaterThan(WAIT_MS);
    await k.raw('DELETE FROM t_lock_log WHERE token = ?', [Buffer.from('v6-control-token')]);
    await k.raw('UPDATE t_read_write_lock SET w_count = 0 WHERE resource_id = ?', [Buffer.from(id)]);
  });

  it('a reading section that locks the lock row: a durable reader does not share with it', async () => {
    const locks = createLockManager({ knex: wideKnex() });
    testSwitches.section.lockRowShared = true;
    const id = resource('control-locking-read');
    const holder = await hold(locks, 'section', 'read', id);
    const answer = await call(locks, 'try', 'read', id, holder);
    await holder.end();
    // Rule 1 (and 3) fails: the try was answered only once the section had ended.
    expect(answer.holderEnded).toBe(true);
  });
});
