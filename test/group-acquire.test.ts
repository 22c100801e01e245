// A durable group's one-call acquire (migration 011): a free group is granted by one CALL and one
// commit, a refused one takes nothing before it falls back to one acquire per resource, exclusion
// holds against single-resource locks, and a lost reply is settled all or none.
// covers: src/lock/groups/group-acquire.ts, src/lock/groups/group.ts, src/sql/acquire-group.ts
import { afterEach, describe, expect, it } from 'vitest';
import type { Knex } from 'knex';
import { createLockManager, LockTimeoutError, type LockGroup, type LockManager } from '../src/index.js';
import { LIMITS } from '../src/options.js';
import { CURRENT_PROCEDURES } from '../migrations/index.js';
import { testSwitches } from '../src/test-switches.js';
import { TEST_PROCEDURES, useTestDatabase } from './support/db.js';
import { useProxiedKnex } from './support/proxy.js';
import { invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);
const via = useProxiedKnex(db);
/** A database whose group procedure commits the targets it took before the one refused. */
const partial = useTestDatabase(`${import.meta.filename}-partial`);
/** A database migrated to version 10 only: no group procedure. */
const v10 = useTestDatabase(`${import.meta.filename}-v10`);

afterEach(() => {
  testSwitches.group.afterOneCall = undefined;
});

type Counters = { calls: number; commits: number };

/**
 * The session's own counts of CALLs and of COMMIT statements (a procedure's own COMMIT among them),
 * on a knex of one connection. Handler_commit would count every autocommitted SELECT too.
 */
async function counters(k: Knex): Promise<Counters> {
  const [rows] = (await k.raw(
    "SHOW SESSION STATUS WHERE Variable_name IN ('Com_call_procedure', 'Com_commit')",
  )) as unknown as [Array<{ Variable_name: string; Value: string }>];
  const value = (name: string): number => Number(rows.find((r) => r.Variable_name === name)!.Value);
  return { calls: value('Com_call_procedure'), commits: value('Com_commit') };
}

/** What `run` cost the one connection of `k`, as the server counts it. */
async function cost(k: Knex, run: () => Promise<unknown>): Promise<Counters> {
  const before = await counters(k);
  await run();
  const after = await counters(k);
  return { calls: after.calls - before.calls, commits: after.commits - before.commits };
}

/** What the tables say of a resource: its counts, and its grant rows. */
async function tablesOf(k: Knex, id: string): Promise<{ w: number; r: number; logged: number }> {
  const [lock] = (await k.raw('SELECT w_count, r_count FROM t_read_write_lock WHERE resource_id = ?', [
    Buffer.from(id),
  ])) as unknown as [Array<{ w_count: number; r_count: number }>];
  const [log] = (await k.raw('SELECT COUNT(*) AS n FROM t_lock_log WHERE resource_id = ?', [
    Buffer.from(id),
  ])) as unknown as [Array<{ n: number }>];
  return { w: lock[0]?.w_count ?? 0, r: lock[0]?.r_count ?? 0, logged: Number(log[0]!.n) };
}

async function closeAll(...managers: LockManager[]): Promise<void> {
  await Promise.all(managers.map((m) => m.close()));
}

describe.skipIf(!TEST_PROCEDURES)('a free group: one acquire transaction', () => {
  it('a free two-resource group costs one CALL and the commits of one single acquire; fenced, the commits of withWriteLock', async () => {
    const one = db.connect({ poolMax: 1 });
    const locks = createLockManager({ knex: one });
    await (await locks.acquireWrite('ga:warm')).release();
    const single = await cost(one, () => locks.acquireWrite('ga:s').then((g) => g.release()));
    const group = await cost(one, () =>
      locks.acquireMany({ write: ['ga:a'], read: ['ga:b'] }).then((g) => g.release()),
    );
    expect(single).toEqual({ calls: 1, commits: 1 });
    expect(group).toEqual({ calls: 1, commits: 1 });
    const fencedSingle = await cost(one, () => locks.withWriteLock('ga:s', async () => undefined));
    const fencedGroup = await cost(one, () => locks.withLocks({ write: ['ga:a', 'ga:b'] }, async () => undefined));
    // withWriteLock: the acquire's CALL, then the fence's, which commits (migration 015). A group's
    // fence is one statement of its own before the COMMIT: the same commits, one CALL fewer.
    expect(fencedSingle).toEqual({ calls: 2, commits: 2 });
    expect(fencedGroup).toEqual({ calls: 1, commits: 2 });
    await locks.close();
  });

  it('the largest group (LIMITS.maxGroupResources, ids of 255 bytes) fits the one call', async () => {
    const one = db.connect({ poolMax: 1 });
    const locks = createLockManager({ knex: one });
    const ids = Array.from({ length: LIMITS.maxGroupResources }, (_, i) => `gm:${String(i).padStart(252, '0')}`);
    let group: LockGroup | undefined;
    expect(
      await cost(one, async () => {
        group = await locks.acquireMany({ write: ids.slice(1), read: ids.slice(0, 1) });
      }),
    ).toEqual({ calls: 1, commits: 1 });
    expect(new Set(group!.grants.map((g) => g.resourceId))).toEqual(new Set(ids));
    expect(await group!.release()).toBe(true);
    expect(await invariantViolations(db.knex)).toEqual([]);
    await locks.close();
  });

  it('control: without the group procedure the same group costs a CALL per resource', async () => {
    await v10.knex.raw('DROP PROCEDURE rwlock_acquire_group');
    const one = v10.connect({ poolMax: 1 });
    const locks = createLockManager({ knex: one });
    // The first group finds no procedure (a failed CALL) and remembers it.
    await (await locks.acquireMany({ write: ['gv:a', 'gv:b'] })).release();
    const fencedSingle = await cost(one, () => locks.withWriteLock('gv:s', async () => undefined));
    const fencedGroup = await cost(one, () => locks.withLocks({ write: ['gv:a', 'gv:b'] }, async () => undefined));
    expect(fencedSingle).toEqual({ calls: 2, commits: 2 });
    expect(fencedGroup).toEqual({ calls: 2, commits: 3 });
    await locks.close();
  });
});

/**
 * Holds `held` (after `free` in byte order), then asks for both: the one call, refused at `held`,
 * must leave `free` as it found it before the fallback takes it. What the tables said then.
 */
async function refusedTakesNothing(
  k: Knex,
  free: string,
  held: string,
  waitMs: number,
): Promise<{ atRefusal: Awaited<ReturnType<typeof tablesOf>> | undefined; outcome: unknown }> {
  const locks = createLockManager({ knex: k });
  const holder = createLockManager({ knex: k });
  const g = await holder.acquireWrite(held);
  let atRefusal: Awaited<ReturnType<typeof tablesOf>> | undefined;
  testSwitches.group.afterOneCall = async (granted) => {
    testSwitches.group.afterOneCall = undefined;
    if (!granted) atRefusal = await tablesOf(k, free);
  };
  const group = locks.acquireMany({ write: [free, held] }, { waitMs });
  await expect.poll(() => atRefusal !== undefined).toBe(true);
  await g.release();
  const outcome = await group.then((h) => h.release()).catch((e: unknown) => e);
  await closeAll(locks, holder);
  return { atRefusal, outcome };
}

describe.skipIf(!TEST_PROCEDURES)('a refused group: nothing taken, then the fallback', () => {
  it('one resource held: the call leaves the free one untaken and unlogged; the fallback is granted once the holder releases', async () => {
    const { atRefusal, outcome } = await refusedTakesNothing(db.knex, 'gr:a', 'gr:b', 10_000);
    expect(atRefusal).toEqual({ w: 0, r: 0, logged: 0 });
    expect(outcome).toBe(true);
    expect(await tablesOf(db.knex, 'gr:a')).toEqual({ w: 0, r: 0, logged: 1 });
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('negative control: a procedure that commits the takes before the refusal is caught by the same check', async () => {
    const body = CURRENT_PROCEDURES.rwlock_acquire_group!;
    const broken = body.replace("    ROLLBACK;\n    SET v_ids = '';", "    COMMIT;\n    SET v_ids = '';");
    expect(broken).not.toBe(body);
    await partial.knex.raw('DROP PROCEDURE rwlock_acquire_group');
    await partial.knex.raw(broken);
    const { atRefusal, outcome } = await refusedTakesNothing(partial.knex, 'gp:a', 'gp:b', 300);
    expect(atRefusal).not.toEqual({ w: 0, r: 0, logged: 0 });
    expect(atRefusal).toEqual({ w: 1, r: 0, logged: 1 });
    // The take it kept holds the free resource against the group's own fallback.
    expect(outcome).toBeInstanceOf(LockTimeoutError);
  });
});

describe('exclusion: groups beside single-resource locks', () => {
  it('a write group and a single writer on one of its resources never overlap; both finish', async () => {
    const a = createLockManager({ knex: db.knex });
    const b = createLockManager({ knex: db.connect() });
    let inside = 0;
    let overlaps = 0;
    const enter = async (): Promise<void> => {
      if (++inside > 1) overlaps++;
      await new Promise((r) => setImmediate(r));
      inside--;
    };
    const rounds = 25;
    await Promise.all([
      (async () => {
        for (let i = 0; i < rounds; i++) await a.withLocks({ write: ['gx:1', 'gx:2'] }, enter, { waitMs: 20_000 });
      })(),
      (async () => {
        for (let i = 0; i < rounds; i++) await b.withWriteLock('gx:2', enter, { waitMs: 20_000 });
      })(),
    ]);
    expect(overlaps).toBe(0);
    expect(await tablesOf(db.knex, 'gx:2')).toMatchObject({ w: 0, r: 0, logged: rounds * 2 });
    expect(await invariantViolations(db.knex)).toEqual([]);
    await closeAll(a, b);
  });

  it('a read group shares with a reader at once; a write group is refused at once beside it, holding nothing', async () => {
    const locks = createLockManager({ knex: db.knex });
    const reader = await locks.acquireRead('gs:1');
    let granted: boolean | undefined;
    testSwitches.group.afterOneCall = async (g) => {
      granted = g;
    };
    const group = await locks.acquireMany({ read: ['gs:1', 'gs:2'] }, { waitMs: 0 });
    expect(granted).toBe(TEST_PROCEDURES ? true : undefined);
    expect(await tablesOf(db.knex, 'gs:1')).toMatchObject({ w: 0, r: 2 });
    await expect(locks.acquireMany({ write: ['gs:0', 'gs:1'] }, { waitMs: 0 })).rejects.toBeInstanceOf(
      LockTimeoutError,
    );
    expect(await tablesOf(db.knex, 'gs:0')).toMatchObject({ w: 0, r: 0 });
    await group.release();
    await reader.release();
    expect(await invariantViolations(db.knex)).toEqual([]);
    await locks.close();
  });
});

describe.skipIf(!TEST_PROCEDURES)('a lost reply of the group call: all or none', () => {
  it('lost after the server ran it: the first token is a duplicate, every grant is read back by token', async () => {
    const locks = createLockManager({ knex: via.knex, resolveTimeoutMs: 10_000 });
    const cut = via.proxy.armOnce(/CALL rwlock_acquire_group/, 'before-reply');
    const group = await locks.acquireMany({ write: ['gl:a'], read: ['gl:b'] }, { waitMs: 5_000 });
    await cut;
    expect((await locks.inspect('gl:a')).holders.map((h) => h.id)).toEqual([group.grants[0]!.id]);
    expect((await locks.inspect('gl:b')).holders.map((h) => h.id)).toEqual([group.grants[1]!.id]);
    expect(await tablesOf(db.knex, 'gl:a')).toEqual({ w: 1, r: 0, logged: 1 });
    expect(await group.release()).toBe(true);
    expect(await invariantViolations(db.knex)).toEqual([]);
    await locks.close();
  });

  it('lost before the server ran it: the first token is withdrawn, nothing was granted, the next call is', async () => {
    const locks = createLockManager({ knex: via.knex, resolveTimeoutMs: 10_000 });
    const cut = via.proxy.armOnce(/CALL rwlock_acquire_group/, 'before-forward');
    const group = await locks.acquireMany({ write: ['gw:a', 'gw:b'] }, { waitMs: 5_000 });
    await cut;
    // The withdrawn row under the lost call's first token, and the granted call's row.
    expect(await tablesOf(db.knex, 'gw:a')).toEqual({ w: 1, r: 0, logged: 2 });
    expect(await tablesOf(db.knex, 'gw:b')).toEqual({ w: 1, r: 0, logged: 1 });
    expect(await group.release()).toBe(true);
    expect(await invariantViolations(db.knex)).toEqual([]);
    await locks.close();
  });
});
