// Reentrancy in Node's terms: within the async context of a withWriteLock/withReadLock, a nested
// call on the same resource and manager joins the enclosing grant and transaction; an upgrade is
// refused at once; the pool is checked before a nested call could wait on it forever.
// covers: src/lock/manager/nesting.ts, src/lock/context/enclosing-fences.ts, src/lock/manager/call-options.ts
import { describe, expect, it } from 'vitest';
import { createLockManager, LockUpgradeError, PoolTooSmallError } from '../src/index.js';
import { useTestDatabase } from './support/db.js';
import { invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);

async function grantsOf(resource: string): Promise<number> {
  const [rows] = (await db.knex.raw('SELECT COUNT(*) AS n FROM t_lock_log WHERE resource_id = ?', [
    Buffer.from(resource),
  ])) as unknown as [Array<{ n: number }>];
  return Number(rows[0]!.n);
}

async function noteCount(tag: string): Promise<number> {
  const [rows] = (await db.knex.raw('SELECT COUNT(*) AS n FROM notes WHERE tag = ?', [tag])) as unknown as [
    Array<{ n: number }>,
  ];
  return Number(rows[0]!.n);
}

describe('reentrant scoped calls', () => {
  it('a nested withWriteLock or withReadLock on the same resource joins the outer grant and transaction', async () => {
    await db.knex.raw('CREATE TABLE IF NOT EXISTS notes (tag VARCHAR(32)) ENGINE=InnoDB');
    const locks = createLockManager({ knex: db.knex });
    const seen: Array<{ trx: unknown; grant: number }> = [];
    const value = await locks.withWriteLock('re-1', async (trx, grant) => {
      seen.push({ trx, grant: grant.id });
      await trx.raw("INSERT INTO notes VALUES ('re-1')");
      const inner = await locks.withWriteLock(
        're-1',
        async (trx2, grant2) => {
          seen.push({ trx: trx2, grant: grant2.id });
          await trx2.raw("INSERT INTO notes VALUES ('re-1')");
          return locks.withReadLock(
            're-1',
            async (trx3, grant3) => {
              seen.push({ trx: trx3, grant: grant3.id });
              return 'inner';
            },
            { waitMs: 60_000 },
          );
        },
        { waitMs: 60_000 },
      );
      // Not committed yet: the inner calls committed nothing of their own.
      expect(await noteCount('re-1')).toBe(0);
      return inner;
    });
    expect(value).toBe('inner');
    expect(new Set(seen.map((s) => s.trx)).size).toBe(1);
    expect(new Set(seen.map((s) => s.grant)).size).toBe(1);
    expect(await grantsOf('re-1')).toBe(1);
    expect(await noteCount('re-1')).toBe(2);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('nested reads inside a read join too', async () => {
    const locks = createLockManager({ knex: db.knex });
    const ids = await locks.withReadLock('re-2', async (_trx, outer) =>
      locks.withReadLock('re-2', async (_trx2, inner) => [outer.id, inner.id]),
    );
    expect(ids[0]).toBe(ids[1]);
    expect(await grantsOf('re-2')).toBe(1);
  });

  it('a nested write inside a read is refused at once with LockUpgradeError, and nothing is granted', async () => {
    const locks = createLockManager({ knex: db.knex });
    const err = await locks
      .withReadLock('re-3', async () => locks.withWriteLock('re-3', async () => 'never', { waitMs: 60_000 }))
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(LockUpgradeError);
    expect((err as LockUpgradeError).code).toBe('ERR_RWLOCK_UPGRADE');
    expect(await grantsOf('re-3')).toBe(1);
    expect((await locks.inspect('re-3')).holders).toEqual([]);
  });

  it('an error in the nested work rolls back the whole outer transaction', async () => {
    await db.knex.raw('CREATE TABLE IF NOT EXISTS notes (tag VARCHAR(32)) ENGINE=InnoDB');
    const locks = createLockManager({ knex: db.knex });
    const boom = new Error('inner failed');
    await expect(
      locks.withWriteLock('re-4', async (trx) => {
        await trx.raw("INSERT INTO notes VALUES ('re-4')");
        await locks.withWriteLock('re-4', async () => {
          throw boom;
        });
      }),
    ).rejects.toBe(boom);
    expect(await noteCount('re-4')).toBe(0);
    expect((await locks.inspect('re-4')).holders).toEqual([]);
  });

  it('outside the context nothing joins: concurrent calls from the same manager take turns with grants of their own', async () => {
    const locks = createLockManager({ knex: db.knex });
    const intervals: Array<{ id: number; start: number; end: number }> = [];
    await Promise.all(
      Array.from({ length: 4 }, () =>
        locks.withWriteLock('re-5', async (_trx, grant) => {
          const start = performance.now();
          await new Promise((r) => setTimeout(r, 20));
          intervals.push({ id: grant.id, start, end: performance.now() });
        }),
      ),
    );
    expect(new Set(intervals.map((i) => i.id)).size).toBe(4);
    intervals.sort((a, b) => a.start - b.start);
    for (let i = 1; i < intervals.length; i++)
      expect(intervals[i]!.start).toBeGreaterThanOrEqual(intervals[i - 1]!.end);
    expect(await grantsOf('re-5')).toBe(4);
  });

  it('another manager does not join: its explicit attempt inside the scope is refused', async () => {
    const locks = createLockManager({ knex: db.knex });
    const other = createLockManager({ knex: db.knex });
    const attempt = await locks.withWriteLock('re-6', async () => other.tryAcquireWrite('re-6'));
    expect(attempt).toBeNull();
  });
});

describe('pool sizing', () => {
  it('a nested call on another resource, or a lease keep-alive, on a pool too small fails at once with PoolTooSmallError', async () => {
    const one = db.connect({ poolMax: 1 });
    const locks = createLockManager({ knex: one });
    const nested = await locks
      .withWriteLock('pool-a', async () => locks.withWriteLock('pool-b', async () => 'never'))
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(nested).toBeInstanceOf(PoolTooSmallError);
    expect(nested).toMatchObject({ needed: 2, poolMax: 1 });
    await expect(locks.withWriteLock('pool-c', async () => 'never', { leaseMs: 60_000 })).rejects.toBeInstanceOf(
      PoolTooSmallError,
    );
    // The same on the same resource joins, and needs no second connection.
    expect(await locks.withWriteLock('pool-a', async () => locks.withReadLock('pool-a', async () => 'joined'))).toBe(
      'joined',
    );
    const two = createLockManager({ knex: db.connect({ poolMax: 2 }) });
    expect(await two.withWriteLock('pool-a', async () => two.withWriteLock('pool-b', async () => 'nested'))).toBe(
      'nested',
    );
  });
});
