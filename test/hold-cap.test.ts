// A kept-ahead lease, on an acquired grant and capped: acquireWrite/acquireRead/acquireMany with leaseMs
// keep a live holder from being reaped until it releases; maxHoldMs stops the renewal at the cap, aborts
// grant.signal, and the grant goes stale as any other (negative control: without the cap the same holder
// is still leased past that point). A hung holder capped inside withWriteLock commits nothing once reaped.
// covers: src/lock/durable/lease.ts, src/lock/manager/acquire-calls.ts
import { describe, expect, it } from 'vitest';
import { createLockManager, DEFAULTS, InvalidOptionsError, LockLostError, type Grant } from '../src/index.js';
import { reapStaleGrants } from '../src/admin/index.js';
import { useTestDatabase } from './support/db.js';
import { backdate, grantRow, invariantViolations, snapshot } from './support/state.js';

const db = useTestDatabase(import.meta.filename);
const HOUR = 3_600_000;
/** The reaper's cutoff in these tests: grants are backdated an hour, so only a lease keeps them. */
const CUTOFF = { staleAfterMs: 60_000 };

/**
 * The lease's end and the grant's creation, in ms on the database clock, and whether it has passed
 * with the grace after it (then the grant is stale: src/sql/decision.ts, STALE_AT_SQL).
 */
async function lease(grantId: number): Promise<{ until: number; created: number; passed: boolean }> {
  const [[row]] = (await db.knex.raw(
    `SELECT UNIX_TIMESTAMP(lease_until) * 1000 AS until_ms, UNIX_TIMESTAMP(create_time) * 1000 AS created_ms,
            lease_until + INTERVAL ? MICROSECOND < UTC_TIMESTAMP(6) AS passed FROM t_lock_log WHERE id = ?`,
    [DEFAULTS.leaseGraceMs * 1000, grantId],
  )) as unknown as [[{ until_ms: string | null; created_ms: string; passed: number | null }]];
  return { until: Number(row.until_ms), created: Number(row.created_ms), passed: Number(row.passed) === 1 };
}

function aborted(grant: Grant): Promise<unknown> {
  return new Promise((resolve) =>
    grant.signal.addEventListener('abort', () => resolve(grant.signal.reason), { once: true }),
  );
}

/** Waits until the keep-alive has extended the lease again after `since`. */
async function renewedAfter(grantId: number, since: number): Promise<void> {
  await expect.poll(async () => (await lease(grantId)).until).toBeGreaterThan(since);
}

describe('leaseMs on acquireWrite, acquireRead and acquireMany', () => {
  it('keeps an acquired grant leased until it is released', async () => {
    const locks = createLockManager({ knex: db.knex });
    // Renewed every 500 ms, 1.5 s ahead: the reap below comes well within the second the lease has left.
    const writer = await locks.acquireWrite('kept-w', { leaseMs: 1_500 });
    const reader = await locks.acquireRead('kept-r', { leaseMs: 1_500 });
    const group = await locks.acquireMany({ write: ['kept-g1', 'kept-g2'] }, { leaseMs: 1_500 });
    const grants = [writer, reader, ...group.grants];
    await Promise.all(
      grants.map(async (g) => {
        await backdate(db.knex, g.id, HOUR);
        await renewedAfter(g.id, (await lease(g.id)).until);
      }),
    );
    expect((await reapStaleGrants(db.knex, CUTOFF)).reaped).toBe(0);
    await writer.release();
    await reader.release();
    await group.release();
    for (const g of grants) expect(await grantRow(db.knex, g.id)).toMatchObject({ status: 2, released_by: 1 });
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('negative control: acquired without leaseMs, the same grant is reaped', async () => {
    const locks = createLockManager({ knex: db.knex });
    const g = await locks.acquireWrite('unkept');
    await backdate(db.knex, g.id, HOUR);
    expect((await reapStaleGrants(db.knex, CUTOFF)).grants.map((r) => r.id)).toEqual([g.id]);
  });
});

describe('maxHoldMs', () => {
  const LEASE_MS = 1_500;
  const CAP_MS = 3_000;

  it('stops the renewal at the cap: signal aborts with a TimeoutError, the lease runs out, the reaper releases it', async () => {
    const locks = createLockManager({ knex: db.knex });
    const g = await locks.acquireWrite('capped', { leaseMs: LEASE_MS, maxHoldMs: CAP_MS });
    const reason = await aborted(g);
    expect(reason).toMatchObject({ name: 'TimeoutError' });
    expect(String((reason as Error).message)).toMatch(/reached maxHoldMs \(3000 ms\)/);
    await backdate(db.knex, g.id, HOUR);
    await expect.poll(async () => (await lease(g.id)).passed, { timeout: LEASE_MS + 5_000 }).toBe(true);
    expect((await reapStaleGrants(db.knex, CUTOFF)).grants.map((r) => r.id)).toEqual([g.id]);
    expect(await g.release()).toBe(false);
  });

  it('negative control: without the cap the same holder is still leased after the cap and a lease have passed', async () => {
    const locks = createLockManager({ knex: db.knex });
    const g = await locks.acquireWrite('uncapped', { leaseMs: LEASE_MS });
    const { created } = await lease(g.id);
    await renewedAfter(g.id, created + CAP_MS + LEASE_MS);
    await backdate(db.knex, g.id, HOUR);
    expect((await reapStaleGrants(db.knex, CUTOFF)).reaped).toBe(0);
    expect(g.signal.aborted).toBe(false);
    expect(await g.release()).toBe(true);
  });

  it('a hung holder inside withWriteLock: the cap aborts its signal, the reaper takes the grant, its commit is refused', async () => {
    const locks = createLockManager({ knex: db.knex });
    await db.knex.raw('CREATE TABLE IF NOT EXISTS cap_effects (tag VARCHAR(64) PRIMARY KEY) ENGINE=InnoDB');
    let grantId = 0;
    const outcome = await locks
      .withWriteLock(
        'hung',
        async (trx, grant) => {
          grantId = grant.id;
          await trx.raw('INSERT INTO cap_effects (tag) VALUES (?)', ['hung']);
          await aborted(grant); // the work would go on forever: the cap is what ends its hold
          await backdate(db.knex, grant.id, HOUR);
          await expect.poll(async () => (await lease(grant.id)).passed, { timeout: LEASE_MS + 5_000 }).toBe(true);
          expect((await reapStaleGrants(db.knex, CUTOFF)).reaped).toBe(1);
          return 'finished';
        },
        { leaseMs: LEASE_MS, maxHoldMs: CAP_MS },
      )
      .catch((e: unknown) => e);
    expect(outcome).toBeInstanceOf(LockLostError);
    expect(await grantRow(db.knex, grantId)).toMatchObject({ status: 2, released_by: 2 });
    const [rows] = (await db.knex.raw("SELECT tag FROM cap_effects WHERE tag = 'hung'")) as unknown as [unknown[]];
    expect(rows).toEqual([]);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });
});

describe('bad leaseMs and maxHoldMs', () => {
  const cases: Array<[string, (l: ReturnType<typeof createLockManager>) => Promise<unknown>, RegExp]> = [
    ['maxHoldMs without leaseMs', (l) => l.acquireWrite('opt', { maxHoldMs: 1_000 }), /^maxHoldMs needs leaseMs/],
    [
      'negative maxHoldMs',
      (l) => l.acquireRead('opt', { leaseMs: 100, maxHoldMs: -1 }),
      /^maxHoldMs must be an integer/,
    ],
    [
      'NaN maxHoldMs',
      (l) => l.withWriteLock('opt', async () => 1, { leaseMs: 100, maxHoldMs: NaN }),
      /^maxHoldMs must/,
    ],
    [
      'maxHoldMs above a timer',
      (l) => l.withWriteGrant('opt', async () => 1, { leaseMs: 100, maxHoldMs: 2 ** 31 }),
      /^maxHoldMs must be an integer from 1 to 2147483647/,
    ],
    ['leaseMs below the minimum on acquireWrite', (l) => l.acquireWrite('opt', { leaseMs: 10 }), /^leaseMs must/],
    ['leaseMs of 1.5 on acquireMany', (l) => l.acquireMany({ write: ['opt'] }, { leaseMs: 1.5 }), /^leaseMs must/],
    [
      'maxHoldMs on a section',
      (l) => l.withWriteLock('opt', async () => 1, { section: true, maxHoldMs: 5 }),
      /^maxHoldMs/,
    ],
  ];
  it.each(cases)('%s: InvalidOptionsError naming the option, nothing written', async (_name, call, message) => {
    const locks = createLockManager({ knex: db.knex });
    const before = await snapshot(db.knex);
    const err = await call(locks).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(InvalidOptionsError);
    expect((err as Error).message).toMatch(message);
    expect(await snapshot(db.knex)).toBe(before);
  });
});
