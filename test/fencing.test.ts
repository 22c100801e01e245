// Property 4: a holder whose grant is reaped while its business transaction runs has its business
// writes rolled back and gets LockLostError, while the next writer proceeds.
import type { Knex } from 'knex';
import { beforeAll, describe, expect, it } from 'vitest';
import { createLockManager, LockLostError, reapStaleGrants, type Grant } from '../src/index.js';
import { useTestDatabase } from './support/db.js';
import { backdate, grantRow, invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);

beforeAll(async () => {
  await db.knex.raw('CREATE TABLE ledger (id INT AUTO_INCREMENT PRIMARY KEY, resource VARCHAR(64), grant_id BIGINT, amount INT) ENGINE=InnoDB');
});

async function ledger(resource: string): Promise<Array<{ grant_id: number }>> {
  const [rows] = (await db.knex.raw('SELECT grant_id FROM ledger WHERE resource = ? ORDER BY id', [resource])) as unknown as [Array<{ grant_id: number }>];
  return rows.map((r) => ({ grant_id: Number(r.grant_id) }));
}

/**
 * The holder writes its business row, then "pauses": meanwhile its grant is backdated and reaped
 * and the next writer takes the lock and commits. Then the holder resumes and tries to commit.
 */
async function pausedHolderScenario(
  resource: string,
  runHolder: (business: (trx: Knex.Transaction, grant: Grant) => Promise<void>) => Promise<unknown>,
): Promise<{ outcome: unknown; holderGrant: number; nextGrant: number }> {
  const locks = createLockManager({ knex: db.knex });
  let holderGrant = 0;
  let nextGrant = 0;
  const outcome = await runHolder(async (trx, grant) => {
    holderGrant = grant.id;
    await trx.raw('INSERT INTO ledger (resource, grant_id, amount) VALUES (?, ?, 100)', [resource, grant.id]);
    // The pause: the reaper and the next writer act while this transaction is open.
    await backdate(db.knex, grant.id, 3_600_000);
    const reaped = await reapStaleGrants(db.knex, { staleAfterMs: 60_000 });
    expect(reaped.grants.map((g) => g.id)).toContain(grant.id);
    await locks.withWriteLock(resource, async (trx2, next) => {
      nextGrant = next.id;
      await trx2.raw('INSERT INTO ledger (resource, grant_id, amount) VALUES (?, ?, 100)', [resource, next.id]);
    }, { waitMs: 5_000 });
  }).then((v) => v, (e: unknown) => e);
  return { outcome, holderGrant, nextGrant };
}

describe('fencing', () => {
  it('the reaped holder gets LockLostError, its business write is rolled back, the next writer committed', async () => {
    const locks = createLockManager({ knex: db.knex });
    const { outcome, holderGrant, nextGrant } = await pausedHolderScenario('fenced', (business) =>
      locks.withWriteLock('fenced', business),
    );
    expect(outcome).toBeInstanceOf(LockLostError);
    expect((outcome as LockLostError).grantId).toBe(holderGrant);
    expect(nextGrant).toBeGreaterThan(holderGrant);
    expect(await ledger('fenced')).toEqual([{ grant_id: nextGrant }]);
    expect(await grantRow(db.knex, holderGrant)).toMatchObject({ status: 2, released_by: 2 });
    expect(await invariantViolations(db.knex)).toEqual([]);
    expect((await locks.inspect('fenced')).wCount).toBe(0);
  });

  it('the same holds under a read lock', async () => {
    const locks = createLockManager({ knex: db.knex });
    const { outcome, nextGrant } = await pausedHolderScenario('fenced-read', (business) => locks.withReadLock('fenced-read', business));
    expect(outcome).toBeInstanceOf(LockLostError);
    expect(await ledger('fenced-read')).toEqual([{ grant_id: nextGrant }]);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('negative control: without the fence the paused holder commits stale work after the next writer', async () => {
    const locks = createLockManager({ knex: db.knex });
    const { outcome, holderGrant, nextGrant } = await pausedHolderScenario('unfenced', async (business) => {
      const grant = await locks.acquireWrite('unfenced');
      try {
        await db.knex.transaction((trx) => business(trx, grant)); // business commit not fenced
      } finally {
        await grant.release();
      }
    });
    expect(outcome).toBeUndefined(); // no error: the stale holder never learns
    // What the fence prevents: the reaped holder's write committed beside the next writer's.
    expect((await ledger('unfenced')).map((r) => r.grant_id).sort()).toEqual([holderGrant, nextGrant].sort());
  });

  it('an operator forceRelease fences the holder the same way', async () => {
    const locks = createLockManager({ knex: db.knex });
    const outcome = await locks.withWriteLock('forced', async (trx, grant) => {
      await trx.raw('INSERT INTO ledger (resource, grant_id, amount) VALUES (?, ?, 1)', ['forced', grant.id]);
      expect(await locks.forceRelease(grant.id)).toBe(true);
    }).catch((e: unknown) => e);
    expect(outcome).toBeInstanceOf(LockLostError);
    expect(await ledger('forced')).toEqual([]);
  });

  it('a business error rolls back and the grant is still released', async () => {
    const locks = createLockManager({ knex: db.knex });
    await expect(locks.withWriteLock('boom', async (trx, grant) => {
      await trx.raw('INSERT INTO ledger (resource, grant_id, amount) VALUES (?, ?, 1)', ['boom', grant.id]);
      throw new Error('bank said no');
    })).rejects.toThrow('bank said no');
    expect(await ledger('boom')).toEqual([]);
    expect((await locks.inspect('boom')).holders).toEqual([]);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('the release rides inside the business commit: the grant row is released by the holder, once', async () => {
    const locks = createLockManager({ knex: db.knex });
    let id = 0;
    const value = await locks.withWriteLock('rides', async (trx, grant) => {
      id = grant.id;
      await trx.raw('INSERT INTO ledger (resource, grant_id, amount) VALUES (?, ?, 1)', ['rides', grant.id]);
      return 'paid';
    });
    expect(value).toBe('paid');
    expect(await grantRow(db.knex, id)).toMatchObject({ status: 2, released_by: 1, version: 1 });
    expect(await ledger('rides')).toEqual([{ grant_id: id }]);
  });
});
