// Leases for long jobs: Grant.extend() and withLock's leaseMs keep a live holder from being reaped,
// and a holder that stops extending is reaped as before.
// covers: src/lock/durable/lease.ts, src/sql/extend.ts
import { describe, expect, it } from 'vitest';
import { createLockManager, InvalidOptionsError, LockLostError } from '../src/index.js';
import { reapStaleGrants } from '../src/admin/index.js';
import { useTestDatabase } from './support/db.js';
import { backdate, grantRow, invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);
const HOUR = 3_600_000;

async function backdateLease(grantId: number, ms: number): Promise<void> {
  await db.knex.raw('UPDATE t_lock_log SET lease_until = lease_until - INTERVAL ? MICROSECOND WHERE id = ?', [
    ms * 1000,
    grantId,
  ]);
}

async function leaseUntil(grantId: number): Promise<number> {
  const [[row]] = (await db.knex.raw('SELECT UNIX_TIMESTAMP(lease_until) * 1000 AS t FROM t_lock_log WHERE id = ?', [
    grantId,
  ])) as unknown as [[{ t: string | null }]];
  return Number(row.t);
}

describe('Grant.extend', () => {
  it('an extended grant is not reaped however old, until its lease passes', async () => {
    const locks = createLockManager({ knex: db.knex });
    const g = await locks.tryAcquireWrite('long-job');
    await backdate(db.knex, g!.id, HOUR);
    expect(await g!.extend(60_000)).toBe(true);
    expect((await reapStaleGrants(db.knex, { staleAfterMs: 60_000 })).reaped).toBe(0);
    expect((await locks.inspect('long-job')).holders[0]).toMatchObject({ id: g!.id, stale: false });
    await backdateLease(g!.id, 61_000); // the holder stopped extending a minute ago
    const reaped = await reapStaleGrants(db.knex, { staleAfterMs: 60_000 });
    expect(reaped.grants.map((x) => x.id)).toEqual([g!.id]);
    expect(g!.signal.aborted).toBe(false); // the holder has not looked yet
    expect(await g!.extend(60_000)).toBe(false);
    expect(g!.signal.aborted).toBe(true);
    expect(await g!.release()).toBe(false);
  });

  it('an extension racing a reaper wins or loses as a whole: the reaper re-checks the version it read', async () => {
    const locks = createLockManager({ knex: db.knex });
    const g = await locks.tryAcquireRead('race-extend');
    await backdate(db.knex, g!.id, HOUR);
    const trx = await db.knex.transaction();
    let reaping: ReturnType<typeof reapStaleGrants> | undefined;
    try {
      // Hold the row as an extension in flight would; the reaper's candidate read still sees it stale.
      await trx.raw(
        'UPDATE t_lock_log SET lease_until = UTC_TIMESTAMP(6) + INTERVAL 1 MINUTE, version = version + 1 WHERE id = ?',
        [g!.id],
      );
      reaping = reapStaleGrants(db.knex, { staleAfterMs: 60_000, lockWaitTimeoutSec: 30 });
      // The reaper's locking read is blocked on the row (it can wait in the optimizer's const-row
      // read, which INNODB_LOCK_WAITS does not list, so look at the statement instead).
      await expect
        .poll(
          async () => {
            const [[r]] = (await db.knex.raw(
              "SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = ? AND INFO LIKE '%FOR UPDATE%' AND INFO NOT LIKE '%PROCESSLIST%' AND TIME >= 1",
              [db.name],
            )) as unknown as [[{ n: number }]];
            return Number(r.n);
          },
          { timeout: 20_000, interval: 200 },
        )
        .toBeGreaterThan(0);
    } finally {
      await trx.commit();
    }
    expect((await reaping)?.reaped).toBe(0);
    expect(await grantRow(db.knex, g!.id)).toMatchObject({ status: 0 });
    await g!.release();
  });

  it('rejects a bad duration without touching the grant', async () => {
    const locks = createLockManager({ knex: db.knex });
    const g = await locks.tryAcquireWrite('bad-extend');
    await expect(g!.extend(0)).rejects.toBeInstanceOf(InvalidOptionsError);
    await expect(g!.extend(1.5)).rejects.toThrow(/^ms must be an integer/);
    expect(await leaseUntil(g!.id)).toBe(0);
    await g!.release();
  });
});

describe('withWriteLock leaseMs', () => {
  /** Work that outlives the reaper's cutoff: it returns once the reaper has had its chance. */
  async function outliveCutoff(options: { leaseMs?: number }) {
    const locks = createLockManager({ knex: db.knex });
    let grantId = 0;
    const outcome = await locks
      .withWriteLock(
        'keepalive',
        async (trx, grant) => {
          grantId = grant.id;
          await trx.raw('SELECT 1');
          await backdate(db.knex, grant.id, HOUR);
          if (options.leaseMs) {
            // Wait for a renewal after the backdating, then let the reaper try.
            const seen = await leaseUntil(grant.id);
            await expect.poll(() => leaseUntil(grant.id), { timeout: 5_000 }).toBeGreaterThan(seen);
          }
          await reapStaleGrants(db.knex, { staleAfterMs: 60_000 });
          return grant.signal.aborted ? 'told-lost' : 'done';
        },
        options,
      )
      .catch((e: unknown) => e);
    return { outcome, grantId };
  }

  it('keeps a long but live holder from being reaped, and its commit goes through', async () => {
    const { outcome, grantId } = await outliveCutoff({ leaseMs: 600 });
    expect(outcome).toBe('done');
    expect(await grantRow(db.knex, grantId)).toMatchObject({ status: 2, released_by: 1 });
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('negative control: without leaseMs the same holder is reaped and its commit refused', async () => {
    const { outcome, grantId } = await outliveCutoff({});
    expect(outcome).toBeInstanceOf(LockLostError);
    expect(await grantRow(db.knex, grantId)).toMatchObject({ status: 2, released_by: 2 });
  });

  it('grant.signal aborts while work runs when the keep-alive finds the grant released by an operator', async () => {
    const locks = createLockManager({ knex: db.knex });
    const outcome = await locks
      .withWriteLock(
        'told',
        async (_trx, grant) => {
          await locks.forceRelease(grant.id);
          // The keep-alive may have noticed already: a listener added after the abort never runs.
          if (!grant.signal.aborted)
            await new Promise<void>((resolve) =>
              grant.signal.addEventListener('abort', () => resolve(), { once: true }),
            );
          return 'noticed';
        },
        { leaseMs: 90 },
      )
      .catch((e: unknown) => e);
    expect(outcome).toBeInstanceOf(LockLostError);
  });

  it('leaseMs is validated', async () => {
    const locks = createLockManager({ knex: db.knex });
    await expect(locks.withWriteLock('v', async () => 1, { leaseMs: 5 })).rejects.toThrow(
      /^leaseMs must be an integer from 30/,
    );
  });
});
