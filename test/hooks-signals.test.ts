// An onLockLost hook may reject with anything, and many waiters may share one AbortSignal: neither
// may crash the process, make release() fail, or leak listeners and waiters.
// covers: src/sql/abort.ts, src/lock/waiting/wait.ts, src/lock/durable/grant.ts
import { getEventListeners } from 'node:events';
import type { Knex } from 'knex';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLockManager, LockAbortedError } from '../src/index.js';
import { useTestDatabase } from './support/db.js';

const db = useTestDatabase(import.meta.filename);

async function rows<T>(k: Knex, sql: string, params: unknown[] = []): Promise<T[]> {
  return ((await k.raw(sql, params as Knex.RawBinding[])) as unknown as [T[]])[0];
}

/** Process warnings and unhandled rejections seen while a test runs. */
let warnings: Error[] = [];
let unhandled: unknown[] = [];
const onWarning = (w: Error): void => void warnings.push(w);
const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
beforeEach(() => {
  warnings = [];
  unhandled = [];
  process.on('warning', onWarning);
  process.on('unhandledRejection', onUnhandled);
});
afterEach(() => {
  process.off('warning', onWarning);
  process.off('unhandledRejection', onUnhandled);
});

/** A value whose String() throws, and a Proxy on which even `instanceof` throws. */
const unprintable: Array<[string, () => unknown]> = [
  ['Object.create(null)', () => Object.create(null)],
  [
    'a Proxy whose every trap throws',
    () =>
      new Proxy(
        {},
        {
          get: () => {
            throw new Error('get');
          },
          getPrototypeOf: () => {
            throw new Error('proto');
          },
        },
      ),
  ],
];

describe('onLockLost hook errors', () => {
  for (const [name, value] of unprintable) {
    for (const how of ['rejects', 'throws'] as const) {
      it(`a hook that ${how} with ${name} is reported as a warning; release() resolves false`, async () => {
        const hook =
          how === 'rejects'
            ? () => Promise.reject(value())
            : () => {
                throw value();
              };
        const locks = createLockManager({ knex: db.knex, onLockLost: hook });
        const id = `hook:${how}:${name}`;
        const g = (await locks.tryAcquireWrite(id))!;
        expect(await createLockManager({ knex: db.knex }).forceRelease(g.id)).toBe(true);
        expect(await g.release()).toBe(false);
        await expect
          .poll(() => warnings.filter((w) => w.name === 'MysqlRwlockWarning').map((w) => w.message))
          .toEqual([
            `onLockLost threw for grant ${g.id}: ${name === 'Object.create(null)' ? '[object Object]' : 'a value that cannot be shown'}`,
          ]);
        // Unhandled rejections are delivered before the warning's tick: none came.
        expect(unhandled).toEqual([]);
        // The lock itself is free again.
        const again = (await locks.tryAcquireWrite(id))!;
        expect(await again.release()).toBe(true);
      });
    }
  }
});

describe('one AbortSignal shared by many waiters', () => {
  it('1,000 waiters on one signal: one abort listener, no MaxListenersExceededWarning; abort wakes and removes them all', async () => {
    const resources = Array.from({ length: 10 }, (_, i) => `shared-signal:${i}`);
    const holder = createLockManager({ knex: db.knex, owner: 'holder' });
    const held = await Promise.all(resources.map(async (r) => (await holder.tryAcquireWrite(r))!));
    const waiters = createLockManager({ knex: db.knex, owner: 'waiter' });
    const controller = new AbortController();
    const { signal } = controller;
    const calls = Array.from({ length: 1000 }, (_, i) =>
      waiters.acquireWrite(resources[i % 10]!, { waitMs: 120_000, signal }),
    );
    const settled = Promise.allSettled(calls);
    // Every queue's head has tried once (a refused write marks writer intent); the 99 behind each
    // head sleep from the moment they joined.
    await expect
      .poll(
        async () =>
          (
            await rows<{ n: number }>(
              db.knex,
              `SELECT COUNT(*) AS n FROM t_read_write_lock WHERE resource_id IN (${resources.map(() => '?').join(', ')}) AND w_wait_until IS NOT NULL`,
              resources,
            )
          ).at(0)?.n,
      )
      .toBe(10);
    expect(getEventListeners(signal, 'abort')).toHaveLength(1);
    // A warning is emitted on the next tick after the listener that exceeds the limit is added.
    await new Promise((resolve) => setImmediate(resolve));
    expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning').map((w) => w.message)).toEqual([]);

    controller.abort(new Error('shutdown'));
    const outcomes = await settled;
    expect(outcomes.filter((o) => o.status === 'rejected' && o.reason instanceof LockAbortedError)).toHaveLength(1000);
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
    // Nothing was granted to the aborted waiters, and their queues are empty: once the holder
    // releases, a new waiter of this manager is head at once and granted.
    expect(
      (
        await rows<{ n: number }>(db.knex, "SELECT COUNT(*) AS n FROM t_lock_log WHERE owner = 'waiter' AND status = 0")
      )[0]!.n,
    ).toBe(0);
    for (const g of held) expect(await g.release()).toBe(true);
    for (const r of resources) {
      const g = await waiters.acquireWrite(r, { waitMs: 30_000 });
      expect(await g.release()).toBe(true);
    }
    expect(unhandled).toEqual([]);
  });

  it('a waiter that leaves (here: timed out) unsubscribes; the one still waiting is aborted', async () => {
    const holder = createLockManager({ knex: db.knex, owner: 'holder' });
    const locks = createLockManager({ knex: db.knex, owner: 'leaver' });
    const controller = new AbortController();
    const { signal } = controller;
    const heldA = (await holder.tryAcquireWrite('leave:a'))!;
    const heldB = (await holder.tryAcquireWrite('leave:b'))!;
    const short = locks.acquireWrite('leave:a', { waitMs: 200, signal });
    const granted = locks.acquireRead('leave:b', { waitMs: 120_000, signal });
    await expect(short).rejects.toMatchObject({ code: 'ERR_RWLOCK_TIMEOUT' });
    // The other waiter is granted: with neither waiting, nothing may listen to the signal. (While one
    // waits, the count is not a steady 1: between its attempts it listens, during one it does not.)
    expect(await heldB.release()).toBe(true);
    expect(await (await granted).release()).toBe(true);
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
    const long = locks.acquireRead('leave:a', { waitMs: 120_000, signal });
    await expect.poll(() => getEventListeners(signal, 'abort').length).toBe(1);
    controller.abort();
    await expect(long).rejects.toBeInstanceOf(LockAbortedError);
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
    expect(await heldA.release()).toBe(true);
  });
});
