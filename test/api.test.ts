// covers: src/lock/manager/acquire-calls.ts, src/lock/durable/durable-acquire.ts, src/lock/durable/grant.ts, src/lock/durable/resource-id.ts, src/sql/acquire.ts, src/sql/release.ts, src/sql/mode.ts
import { describe, expect, it } from 'vitest';
import { createLockManager, LockAbortedError, LockTimeoutError } from '../src/index.js';
import { RELEASE_SQL } from '../src/sql/release.js';
import { resourceKey } from '../src/lock/durable/resource-id.js';
import { useTestDatabase } from './support/db.js';
import { invariantViolations, resourceRows } from './support/state.js';

const db = useTestDatabase(import.meta.filename);

describe('read-write semantics', () => {
  it('readers share a resource; a writer excludes readers and other writers', async () => {
    const locks = createLockManager({ knex: db.knex });
    const r1 = await locks.tryAcquireRead('loan-1');
    const r2 = await locks.tryAcquireRead('loan-1');
    expect(r1).not.toBeNull();
    expect(r2).not.toBeNull();
    expect(await locks.tryAcquireWrite('loan-1')).toBeNull();
    await r1!.release();
    expect(await locks.tryAcquireWrite('loan-1')).toBeNull();
    await r2!.release();
    const w = await locks.tryAcquireWrite('loan-1');
    expect(w).not.toBeNull();
    expect(await locks.tryAcquireWrite('loan-1')).toBeNull();
    expect(await locks.tryAcquireRead('loan-1')).toBeNull();
    expect(await w!.release()).toBe(true);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('grant ids are strictly increasing fencing tokens', async () => {
    const locks = createLockManager({ knex: db.knex });
    const ids: number[] = [];
    for (let i = 0; i < 5; i++) {
      const g = await locks.tryAcquireWrite(`fence-${i % 2}`);
      ids.push(g!.id);
      await g!.release();
    }
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('release is idempotent and says whether it released', async () => {
    const locks = createLockManager({ knex: db.knex });
    const g = await locks.tryAcquireWrite('idem');
    expect(await g!.release()).toBe(true);
    expect(await g!.release()).toBe(false);
    expect((await resourceRows(db.knex)).find((r) => r.resource === 'idem')).toMatchObject({ wCount: 0, rCount: 0 });
  });

  it('inspect lists live holders on the database clock', async () => {
    const locks = createLockManager({ knex: db.knex, owner: 'inspector-test' });
    const r = await locks.tryAcquireRead('inspect-me');
    const state = await locks.inspect('inspect-me');
    expect(state).toMatchObject({ resourceId: 'inspect-me', live: { write: 0, read: 1 }, writerWaiting: false });
    expect(state.holders).toHaveLength(1);
    expect(state.holders[0]).toMatchObject({ id: r!.id, mode: 'read', owner: 'inspector-test', stale: false });
    expect(state.holders[0]!.ageMs).toBeGreaterThanOrEqual(0);
    await r!.release();
    expect((await locks.inspect('inspect-me')).holders).toEqual([]);
    expect(await locks.inspect('never-used')).toMatchObject({ live: { write: 0, read: 0 }, holders: [] });
  });

  it('forceRelease releases a live grant as operator once', async () => {
    const locks = createLockManager({ knex: db.knex });
    const g = await locks.tryAcquireWrite('stuck');
    expect(await locks.forceRelease(g!.id)).toBe(true);
    expect(await locks.forceRelease(g!.id)).toBe(false);
    expect(await g!.release()).toBe(false);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('isLive reads the grant row: true while held; false once released by its holder, or by an operator (then signal aborts)', async () => {
    const locks = createLockManager({ knex: db.knex });
    const mine = await locks.tryAcquireWrite('is-live-1');
    expect(await mine!.isLive()).toBe(true);
    // Released by its holder on another Grant object for the same row: this one learns it from the row.
    await db.knex.raw(RELEASE_SQL, [1, 1, 0, mine!.id, resourceKey('is-live-1').toString('hex'), 0, mine!.token]);
    expect(await mine!.isLive()).toBe(false);
    expect(mine!.signal.aborted).toBe(false);
    expect(await mine!.release()).toBe(false);

    const taken = await locks.tryAcquireWrite('is-live-2');
    expect(await locks.forceRelease(taken!.id)).toBe(true);
    expect(await taken!.isLive()).toBe(false);
    expect(taken!.signal.aborted).toBe(true);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });
});

describe('waiting', () => {
  it('a waiting writer gets the lock when the holder releases', async () => {
    const locks = createLockManager({ knex: db.knex });
    const held = await locks.tryAcquireWrite('wait-1');
    const waiting = locks.acquireWrite('wait-1', { waitMs: 10_000 });
    let granted = false;
    void waiting.then(() => (granted = true));
    expect(await locks.tryAcquireWrite('wait-1')).toBeNull();
    expect(granted).toBe(false);
    await held!.release();
    const g = await waiting;
    expect(g.resourceId).toBe('wait-1');
    await g.release();
  });

  it('times out with LockTimeoutError and leaves nothing behind', async () => {
    const locks = createLockManager({ knex: db.knex });
    const held = await locks.tryAcquireWrite('wait-2');
    const started = performance.now();
    await expect(locks.acquireRead('wait-2', { waitMs: 150 })).rejects.toBeInstanceOf(LockTimeoutError);
    expect(performance.now() - started).toBeGreaterThanOrEqual(150);
    await held!.release();
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('never gives up before waitMs has passed on a monotonic clock, as the head of the queue or behind it', async () => {
    // Short waits, many of them: a deadline kept in whole milliseconds of the wall clock, or a
    // timer that fires early, ends some of these waits up to a millisecond short.
    const locks = createLockManager({ knex: db.knex });
    const held = await locks.tryAcquireWrite('wait-2b');
    const waited = async (mode: 'read' | 'write', waitMs: number): Promise<number> => {
      const started = performance.now();
      await expect(
        locks[mode === 'read' ? 'acquireRead' : 'acquireWrite']('wait-2b', { waitMs }),
      ).rejects.toBeInstanceOf(LockTimeoutError);
      return performance.now() - started;
    };
    for (let i = 0; i < 40; i++) {
      const waitMs = 3 + (i % 5);
      // The reader queues behind the writer, which outlasts it: it times out still waiting its turn.
      const [head, behind] = await Promise.all([waited('write', 3 * waitMs), waited('read', waitMs)]);
      expect(head).toBeGreaterThanOrEqual(3 * waitMs);
      expect(behind).toBeGreaterThanOrEqual(waitMs);
    }
    await held!.release();
  });

  it('an AbortSignal cancels the wait with an AbortError', async () => {
    const locks = createLockManager({ knex: db.knex });
    const held = await locks.tryAcquireWrite('wait-3');
    const controller = new AbortController();
    const waiting = locks.acquireWrite('wait-3', { waitMs: 30_000, signal: controller.signal });
    controller.abort(new Error('shutting down'));
    const err = await waiting.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LockAbortedError);
    expect((err as Error).name).toBe('AbortError');
    await expect(locks.acquireWrite('wait-3', { signal: AbortSignal.abort() })).rejects.toBeInstanceOf(
      LockAbortedError,
    );
    await held!.release();
    expect((await locks.inspect('wait-3')).holders).toEqual([]);
  });

  it('a waiting writer holds back new readers, so readers cannot starve it', async () => {
    const locks = createLockManager({ knex: db.knex, writerIntentMs: 5_000 });
    const reader = await locks.tryAcquireRead('wait-4');
    const writer = locks.acquireWrite('wait-4', { waitMs: 10_000 });
    await expect.poll(async () => (await locks.inspect('wait-4')).writerWaiting).toBe(true);
    expect(await locks.tryAcquireRead('wait-4')).toBeNull();
    await reader!.release();
    const w = await writer;
    await w.release();
    // The granted writer cleared its intent: readers are welcome again.
    const r = await locks.tryAcquireRead('wait-4');
    expect(r).not.toBeNull();
    await r!.release();
  });
});
