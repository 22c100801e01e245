// Multi-resource locks (withLocks, acquireMany): one acquisition order, all or nothing, one fence
// statement covering every grant, exclusion with single-resource locks, a lost COMMIT reply.
// covers: src/lock/groups/group.ts, src/lock/manager/scoped-calls.ts, src/lock/fence/fenced.ts
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import diagnostics from 'node:diagnostics_channel';
import type { Knex } from 'knex';
import {
  ConnectionLostError,
  createLockManager,
  InvalidOptionsError,
  InvalidResourceIdError,
  LockAbortedError,
  LockLostError,
  LockTimeoutError,
  LockUpgradeError,
  type Grant,
  type LockGroup,
  type LockManager,
} from '../src/index.js';
import { fromKnex } from '../src/adapters/index.js';
import { CHANNELS } from '../src/observability/tracing-entry.js';
import { testSwitches } from '../src/test-switches.js';
import { BAD_RESOURCE_IDS } from './support/bad-resource-ids.js';
import { useTestDatabase } from './support/db.js';
import { useProxiedKnex } from './support/proxy.js';
import { grantRow, invariantViolations, snapshot } from './support/state.js';

const db = useTestDatabase(import.meta.filename);
const via = useProxiedKnex(db);

beforeAll(async () => {
  await db.knex.raw('CREATE TABLE loan (id VARCHAR(32) PRIMARY KEY, balance INT NOT NULL) ENGINE=InnoDB');
});

afterEach(() => {
  testSwitches.group.callerOrder = false;
  testSwitches.group.afterFirst = undefined;
});

async function loans(...ids: string[]): Promise<void> {
  for (const id of ids) await db.knex.raw('INSERT INTO loan VALUES (?, 100)', [id]);
}

async function balance(id: string): Promise<number> {
  const [rows] = (await db.knex.raw('SELECT balance FROM loan WHERE id = ?', [id])) as unknown as [
    Array<{ balance: number }>,
  ];
  return rows[0]!.balance;
}

/** Holders (grant ids) of each resource, as the resource rows and live grants say. */
async function holders(locks: LockManager, ...ids: string[]): Promise<number[][]> {
  return Promise.all(ids.map(async (id) => (await locks.inspect(id)).holders.map((h) => h.id)));
}

describe('withLocks and acquireMany: bad input', () => {
  it('refuses bad sets with a typed error before anything is written', async () => {
    const locks = createLockManager({ knex: db.knex });
    const before = await snapshot(db.knex);
    const work = async (): Promise<void> => undefined;
    const invalid: unknown[] = [
      { write: ['m:a'], read: ['m:a'] }, // the same id in both lists
      { write: ['m:a', 'm:a'] }, // a duplicate
      { read: ['m:b', 'm:b'] },
      {}, // empty
      { write: [], read: [] },
      null,
      undefined,
      'm:a',
      ['m:a'],
      { write: 'm:a' }, // not an array
      { write: ['m:a'], mode: 'write' }, // an unknown key
      { write: Array.from({ length: 65 }, (_, i) => `m:${i}`) }, // over LIMITS.maxGroupResources
    ];
    for (const sets of invalid) {
      await expect(locks.withLocks(sets as never, work), JSON.stringify(sets)).rejects.toBeInstanceOf(
        InvalidOptionsError,
      );
      await expect(locks.acquireMany(sets as never), JSON.stringify(sets)).rejects.toBeInstanceOf(InvalidOptionsError);
    }
    for (const [, bad] of BAD_RESOURCE_IDS) {
      await expect(locks.withLocks({ write: ['m:ok', bad as string] }, work)).rejects.toBeInstanceOf(
        InvalidResourceIdError,
      );
      await expect(locks.acquireMany({ read: ['m:ok', bad as string] })).rejects.toBeInstanceOf(InvalidResourceIdError);
    }
    await expect(locks.withLocks({ write: ['m:a'] }, work, { waitMs: -1 })).rejects.toBeInstanceOf(InvalidOptionsError);
    await expect(locks.withLocks({ write: ['m:a'] }, work, null as never)).rejects.toBeInstanceOf(InvalidOptionsError);
    await expect(locks.acquireMany({ write: ['m:a'] }, { isolationLevel: 'serializable' } as never)).rejects.toThrow(
      /^isolationLevel: unknown option of acquireMany/,
    );
    await expect(locks.acquireMany({ write: ['m:a'] }, { leaseMs: 10 })).rejects.toBeInstanceOf(InvalidOptionsError);
    await expect(locks.withLocks({ write: ['m:a'] }, 'work' as never)).rejects.toBeInstanceOf(InvalidOptionsError);
    expect(await snapshot(db.knex)).toBe(before);
  });
});

describe('withLocks: a transfer between two loans', () => {
  it('commits the work and releases every grant in one commit; grants are sorted by id bytes', async () => {
    await loans('loan:2', 'loan:10');
    const locks = createLockManager({ knex: db.knex });
    let grants: readonly Grant[] = [];
    const value = await locks.withLocks(
      { write: ['loan:2', 'loan:10'] },
      async (trx, g) => {
        grants = g;
        await trx.raw('UPDATE loan SET balance = balance - 30 WHERE id = ?', ['loan:2']);
        await trx.raw('UPDATE loan SET balance = balance + 30 WHERE id = ?', ['loan:10']);
        // leaseMs keeps every grant's lease ahead while the work runs.
        for (const id of ['loan:2', 'loan:10']) expect((await locks.inspect(id)).holders[0]!.leaseUntil).not.toBeNull();
        return 'moved';
      },
      { leaseMs: 60_000 },
    );
    expect(value).toBe('moved');
    // '1' (0x31) sorts before '2' (0x32): byte order, not the caller's.
    expect(grants.map((g) => [g.resourceId, g.mode])).toEqual([
      ['loan:10', 'write'],
      ['loan:2', 'write'],
    ]);
    expect([await balance('loan:2'), await balance('loan:10')]).toEqual([70, 130]);
    for (const g of grants) expect(await grantRow(db.knex, g.id)).toMatchObject({ status: 2, released_by: 1 });
    expect(await holders(locks, 'loan:2', 'loan:10')).toEqual([[], []]);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('takes each resource in its mode: a read grant shares with readers, a write grant excludes', async () => {
    const locks = createLockManager({ knex: db.knex });
    const other = createLockManager({ knex: db.connect() });
    await locks.withLocks({ write: ['x:claim'], read: ['x:loan'] }, async (_trx, grants) => {
      expect(grants.map((g) => g.mode)).toEqual(['write', 'read']);
      const reader = await other.tryAcquireRead('x:loan');
      expect(reader).not.toBeNull();
      await reader!.release();
      expect(await other.tryAcquireWrite('x:loan')).toBeNull();
      expect(await other.tryAcquireRead('x:claim')).toBeNull();
    });
    // A single-resource holder excludes a group that names its resource.
    const single = await other.acquireWrite('x:loan');
    await expect(locks.acquireMany({ write: ['x:claim'], read: ['x:loan'] }, { waitMs: 0 })).rejects.toBeInstanceOf(
      LockTimeoutError,
    );
    await single.release();
    expect(await holders(locks, 'x:claim', 'x:loan')).toEqual([[], []]);
  });
});

describe('ordering', () => {
  it('crosswise groups {A,B} and {B,A} from two managers finish without deadlock or timeout', async () => {
    await loans('o:a', 'o:b');
    const first = createLockManager({ knex: db.knex });
    const second = createLockManager({ knex: db.connect() });
    const rounds = 25;
    const run = (locks: LockManager, ids: string[]): Promise<void[]> =>
      Promise.all(
        Array.from({ length: rounds }, () =>
          locks.withLocks(
            { write: ids },
            async (trx) => {
              await trx.raw('UPDATE loan SET balance = balance + 1 WHERE id IN (?, ?)', ids);
            },
            // Every operation can wait behind all the others: the bound is generous, not the point.
            { waitMs: 30_000 },
          ),
        ),
      );
    // Read groups share the resources, so their fences meet on the same resource rows: a deadlock
    // there is rolled back and run again under the same grants.
    const readers = (locks: LockManager, ids: string[]): Promise<number[]> =>
      Promise.all(
        Array.from({ length: rounds }, () =>
          locks.withLocks({ read: ids }, async (_trx, grants) => grants.length, { waitMs: 30_000 }),
        ),
      );
    await Promise.all([
      run(first, ['o:a', 'o:b']),
      run(second, ['o:b', 'o:a']),
      readers(first, ['o:a', 'o:b']),
      readers(second, ['o:b', 'o:a']),
    ]);
    expect([await balance('o:a'), await balance('o:b')]).toEqual([100 + 2 * rounds, 100 + 2 * rounds]);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('negative control: taken in the caller order, the same crosswise pair deadlocks until waitMs', async () => {
    testSwitches.group.callerOrder = true;
    // Both groups hold their first resource before either asks for its second: the crosswise hold
    // that byte order rules out.
    let arrived = 0;
    let bothHoldFirst!: () => void;
    const barrier = new Promise<void>((resolve) => (bothHoldFirst = resolve));
    testSwitches.group.afterFirst = async () => {
      if (++arrived === 2) bothHoldFirst();
      await barrier;
    };
    const first = createLockManager({ knex: db.knex });
    const second = createLockManager({ knex: db.connect() });
    const waitMs = 1_000;
    const started = performance.now();
    const outcomes = await Promise.all([
      first.acquireMany({ write: ['n:a', 'n:b'] }, { waitMs }).catch((e: unknown) => e),
      second.acquireMany({ write: ['n:b', 'n:a'] }, { waitMs }).catch((e: unknown) => e),
    ]);
    const elapsed = performance.now() - started;
    // Neither could go on until one gave up at its waitMs and released its first resource; the
    // other may then have been granted (in the time it had left), or timed out too.
    const timeouts = outcomes.filter((o) => o instanceof LockTimeoutError);
    expect(timeouts.length).toBeGreaterThanOrEqual(1);
    expect(elapsed).toBeGreaterThanOrEqual(waitMs);
    for (const o of outcomes) if (!(o instanceof LockTimeoutError)) await (o as LockGroup).release();
    // All or nothing: the one that gave up left nothing held.
    expect(await holders(first, 'n:a', 'n:b')).toEqual([[], []]);
  });
});

describe('all or nothing', () => {
  it('a timeout on the second resource releases the first: nothing is left held', async () => {
    const locks = createLockManager({ knex: db.knex });
    const other = createLockManager({ knex: db.connect() });
    const blocker = await other.acquireWrite('t:b');
    let firstHeld: number[] = [];
    testSwitches.group.afterFirst = async () => {
      // The negative control: while it waits for t:b, the group does hold t:a.
      firstHeld = (await other.inspect('t:a')).holders.map((h) => h.id);
    };
    const err = await locks.acquireMany({ write: ['t:a', 't:b'] }, { waitMs: 300 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LockTimeoutError);
    expect(err).toMatchObject({ resourceId: 't:b', waitMs: 300 });
    expect(firstHeld).toHaveLength(1);
    expect(await grantRow(db.knex, firstHeld[0]!)).toMatchObject({ status: 2, released_by: 1 });
    expect(await holders(locks, 't:a', 't:b')).toEqual([[], [blocker.id]]);
    await blocker.release();
  });

  it('an abort while waiting for the second resource releases the first', async () => {
    const locks = createLockManager({ knex: db.knex });
    const other = createLockManager({ knex: db.connect() });
    const blocker = await other.acquireRead('u:b');
    const abort = new AbortController();
    let firstHeld: number[] = [];
    testSwitches.group.afterFirst = async () => {
      firstHeld = (await other.inspect('u:a')).holders.map((h) => h.id);
      abort.abort(new Error('caller gave up'));
    };
    const err = await locks
      .withLocks({ write: ['u:a', 'u:b'] }, async () => 'never', { waitMs: 30_000, signal: abort.signal })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LockAbortedError);
    expect(firstHeld).toHaveLength(1);
    expect(await holders(locks, 'u:a', 'u:b')).toEqual([[], [blocker.id]]);
    await blocker.release();
  });
});

describe('the one fence statement covers every grant', () => {
  it('the second grant force-released before the fence: LockLostError naming it, nothing written', async () => {
    await loans('f:1', 'f:2');
    const locks = createLockManager({ knex: db.knex });
    const operator = createLockManager({ knex: db.connect() });
    let grants: readonly Grant[] = [];
    const err = await locks
      .withLocks({ write: ['f:1', 'f:2'] }, async (trx, g) => {
        grants = g;
        await trx.raw('UPDATE loan SET balance = balance - 50 WHERE id = ?', ['f:1']);
        await trx.raw('UPDATE loan SET balance = balance + 50 WHERE id = ?', ['f:2']);
        expect(await operator.forceRelease(g[1]!.id, { reason: 'test' })).toBe(true);
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LockLostError);
    expect((err as LockLostError).grantId).toBe(grants[1]!.id);
    expect(grants[1]!.signal.aborted).toBe(true);
    expect(grants[0]!.signal.aborted).toBe(false);
    expect([await balance('f:1'), await balance('f:2')]).toEqual([100, 100]);
    expect(await grantRow(db.knex, grants[0]!.id)).toMatchObject({ status: 2, released_by: 1 });
    expect(await holders(locks, 'f:1', 'f:2')).toEqual([[], []]);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('negative control: a fence that checks only the first grant would commit the same transaction', async () => {
    await loans('g:1', 'g:2');
    const locks = createLockManager({ knex: db.knex });
    const operator = createLockManager({ knex: db.connect() });
    const transfer = async (fence: (trx: Knex.Transaction, group: LockGroup) => Promise<void>): Promise<unknown> => {
      const group = await locks.acquireMany({ write: ['g:1', 'g:2'] });
      try {
        await db.knex.transaction(async (trx) => {
          await trx.raw('UPDATE loan SET balance = balance - 50 WHERE id = ?', ['g:1']);
          await trx.raw('UPDATE loan SET balance = balance + 50 WHERE id = ?', ['g:2']);
          expect(await operator.forceRelease(group.grants[1]!.id)).toBe(true);
          await fence(trx, group);
        });
        group.committed();
        return 'committed';
      } catch (e) {
        await group.release();
        return e;
      }
    };
    expect(await transfer((trx, group) => group.fence(fromKnex(trx)))).toBeInstanceOf(LockLostError);
    expect([await balance('g:1'), await balance('g:2')]).toEqual([100, 100]);
    // The first grant's own fence is what a check of the first grant only would be: it commits.
    expect(await transfer((trx, group) => group.grants[0]!.fence(fromKnex(trx)))).toBe('committed');
    expect([await balance('g:1'), await balance('g:2')]).toEqual([50, 150]);
    expect(await holders(locks, 'g:1', 'g:2')).toEqual([[], []]);
  });

  it('a fence of a group with a grant already released refuses before sending anything', async () => {
    const locks = createLockManager({ knex: db.knex });
    const group = await locks.acquireMany({ write: ['h:1'], read: ['h:2'] });
    await group.grants[1]!.release();
    let sent = 0;
    await expect(
      group.fence(async () => {
        sent++;
        return 4;
      }),
    ).rejects.toBeInstanceOf(LockLostError);
    expect(sent).toBe(0);
    expect(await group.release()).toBe(false);
    expect(group.settled).toBe(true);
  });
});

describe('reentrancy inside withLocks', () => {
  it('a nested call on held resources joins in the same or a weaker mode, and is refused otherwise', async () => {
    const locks = createLockManager({ knex: db.knex });
    await locks.withLocks({ write: ['r:a'], read: ['r:b'] }, async (trx, grants) => {
      await locks.withWriteLock('r:a', async (inner, grant) => {
        expect(inner).toBe(trx);
        expect(grant).toBe(grants[0]);
      });
      await locks.withReadLock('r:b', async (inner, grant) => {
        expect(inner).toBe(trx);
        expect(grant).toBe(grants[1]);
      });
      await locks.withLocks({ read: ['r:b', 'r:a'] }, async (inner, joined) => {
        expect(inner).toBe(trx);
        expect(joined).toEqual(grants);
      });
      await expect(locks.withWriteLock('r:b', async () => undefined)).rejects.toBeInstanceOf(LockUpgradeError);
      await expect(locks.withLocks({ write: ['r:b'] }, async () => undefined)).rejects.toBeInstanceOf(LockUpgradeError);
      // Some held, some not: it could neither join one transaction nor wait safely.
      await expect(locks.withLocks({ write: ['r:a', 'r:c'] }, async () => undefined)).rejects.toBeInstanceOf(
        InvalidOptionsError,
      );
      // None held: a group of its own, on a connection of its own.
      await locks.withLocks({ write: ['r:c', 'r:d'] }, async (inner) => {
        expect(inner).not.toBe(trx);
      });
    });
    expect(await holders(locks, 'r:a', 'r:b', 'r:c', 'r:d')).toEqual([[], [], [], []]);
  });
});

describe('a lost COMMIT reply', () => {
  it('reply lost after the server committed: settled as committed, every grant released once', async () => {
    await loans('c:1', 'c:2');
    const locks = createLockManager({ knex: via.knex, resolveTimeoutMs: 10_000 });
    let cut: Promise<string> | undefined;
    let grants: readonly Grant[] = [];
    const value = await locks.withLocks({ write: ['c:1', 'c:2'] }, async (trx, g) => {
      grants = g;
      // Armed once the locks are held, so it is the business COMMIT that is cut.
      cut = via.proxy.armOnce(/^COMMIT/i, 'before-reply');
      await trx.raw('UPDATE loan SET balance = balance - 10 WHERE id = ?', ['c:1']);
      await trx.raw('UPDATE loan SET balance = balance + 10 WHERE id = ?', ['c:2']);
      return 'paid';
    });
    expect(await cut).toMatch(/^COMMIT/i);
    expect(value).toBe('paid');
    expect([await balance('c:1'), await balance('c:2')]).toEqual([90, 110]);
    for (const g of grants) expect(await grantRow(db.knex, g.id)).toMatchObject({ status: 2, released_by: 1 });
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('COMMIT never reached the server: ConnectionLostError, nothing committed, every grant released', async () => {
    await loans('d:1', 'd:2');
    const locks = createLockManager({ knex: via.knex, resolveTimeoutMs: 10_000 });
    let grants: readonly Grant[] = [];
    const err = await locks
      .withLocks({ write: ['d:1'], read: ['d:2'] }, async (trx, g) => {
        grants = g;
        void via.proxy.armOnce(/^COMMIT/i, 'before-forward');
        await trx.raw('UPDATE loan SET balance = balance - 10 WHERE id = ?', ['d:1']);
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectionLostError);
    expect(await balance('d:1')).toBe(100);
    for (const g of grants) expect(await grantRow(db.knex, g.id)).toMatchObject({ status: 2, released_by: 1 });
    expect(await invariantViolations(db.knex)).toEqual([]);
  });
});

describe('tracing of a group', () => {
  it('one acquire and one fence event per grant; a refused group fence fails the fence event of each', async () => {
    const seen: Array<{ channel: string; resourceId: unknown; error: unknown }> = [];
    const undo: Array<() => void> = [];
    for (const name of [CHANNELS.acquire, CHANNELS.fence]) {
      const tc = diagnostics.tracingChannel<unknown, Record<string, unknown>>(name);
      const none = (): void => undefined;
      const handlers = {
        start: none,
        end: none,
        asyncStart: none,
        error: none,
        asyncEnd: (c: Record<string, unknown>) =>
          void seen.push({ channel: name, resourceId: c.resourceId, error: c.error }),
      };
      tc.subscribe(handlers);
      undo.push(() => tc.unsubscribe(handlers));
    }
    try {
      const locks = createLockManager({ knex: db.knex });
      const operator = createLockManager({ knex: db.connect() });
      await locks.withLocks({ write: ['tr:2', 'tr:1'] }, async () => undefined);
      expect(seen).toEqual([
        { channel: CHANNELS.acquire, resourceId: 'tr:1', error: undefined },
        { channel: CHANNELS.acquire, resourceId: 'tr:2', error: undefined },
        { channel: CHANNELS.fence, resourceId: 'tr:2', error: undefined },
        { channel: CHANNELS.fence, resourceId: 'tr:1', error: undefined },
      ]);
      seen.length = 0;
      await expect(
        locks.withLocks({ write: ['tr:1', 'tr:2'] }, async (_trx, g) => {
          await operator.forceRelease(g[1]!.id);
        }),
      ).rejects.toBeInstanceOf(LockLostError);
      const fences = seen.filter((e) => e.channel === CHANNELS.fence);
      expect(fences.map((e) => e.resourceId).sort()).toEqual(['tr:1', 'tr:2']);
      for (const e of fences) expect(e.error).toBeInstanceOf(LockLostError);
    } finally {
      for (const u of undo) u();
    }
  });
});

describe('withLocks as a one-commit section', () => {
  it('takes every row in byte order in one transaction, logs each as a section, and leaves nothing held', async () => {
    await loans('s:2', 's:10');
    const locks = createLockManager({ knex: db.knex });
    let grants: readonly Grant[] = [];
    const value = await locks.withLocks(
      { write: ['s:2'], read: ['s:10'] },
      async (trx, g) => {
        grants = g;
        await trx.raw('UPDATE loan SET balance = balance - 5 WHERE id = ?', ['s:2']);
        // A nested call on a resource the section holds joins it.
        await locks.withReadLock('s:10', async (inner, grant) => {
          expect(inner).toBe(trx);
          expect(grant).toBe(g[0]);
        });
        return 'ok';
      },
      { section: true },
    );
    expect(value).toBe('ok');
    expect(grants.map((g) => [g.resourceId, g.mode])).toEqual([
      ['s:10', 'read'],
      ['s:2', 'write'],
    ]);
    expect(await balance('s:2')).toBe(95);
    for (const id of ['s:2', 's:10']) {
      const { grants: logged } = await locks.history(id);
      expect(logged.map((g) => g.releasedBy)).toEqual(['section']);
    }
    expect(await holders(locks, 's:2', 's:10')).toEqual([[], []]);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('crosswise section groups from two managers all commit; a durable holder makes one time out, holding nothing', async () => {
    await loans('sx:a', 'sx:b');
    const first = createLockManager({ knex: db.knex });
    const second = createLockManager({ knex: db.connect() });
    const rounds = 15;
    const run = (locks: LockManager, ids: string[]): Promise<void[]> =>
      Promise.all(
        Array.from({ length: rounds }, () =>
          locks.withLocks(
            { write: ids },
            async (trx) => {
              await trx.raw('UPDATE loan SET balance = balance + 1 WHERE id IN (?, ?)', ids);
            },
            { section: true, waitMs: 30_000 },
          ),
        ),
      );
    await Promise.all([run(first, ['sx:a', 'sx:b']), run(second, ['sx:b', 'sx:a'])]);
    expect([await balance('sx:a'), await balance('sx:b')]).toEqual([100 + 2 * rounds, 100 + 2 * rounds]);

    const durable = await second.acquireWrite('sx:b');
    let ran = false;
    const err = await first
      .withLocks(
        { write: ['sx:a', 'sx:b'] },
        async () => {
          ran = true;
        },
        { section: true, waitMs: 300 },
      )
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LockTimeoutError);
    expect(ran).toBe(false);
    // The section's take of sx:a rolled back with it: a durable writer gets it at once.
    const after = await second.tryAcquireWrite('sx:a');
    expect(after).not.toBeNull();
    await after!.release();
    await durable.release();
    expect(await invariantViolations(db.knex)).toEqual([]);
  });
});
