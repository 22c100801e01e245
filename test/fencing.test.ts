// Property 4 (docs/guarantees.md): a holder whose grant is reaped while its business transaction runs has its business
// writes rolled back and gets LockLostError, while the next writer proceeds.
// covers: src/lock/fence/fenced.ts, src/lock/fence/fence-executor.ts, src/sql/release.ts
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { beforeAll, describe, expect, it } from 'vitest';
import { createLockManager, LockLostError, type Grant } from '../src/index.js';
import { RELEASE_SQL } from '../src/sql/release.js';
import { reapStaleGrants } from '../src/admin/index.js';
import { useTestDatabase } from './support/db.js';
import { backdate, grantRow, invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);

beforeAll(async () => {
  await db.knex.raw(
    'CREATE TABLE ledger (id INT AUTO_INCREMENT PRIMARY KEY, resource VARCHAR(64), grant_id BIGINT, amount INT) ENGINE=InnoDB',
  );
});

async function ledger(resource: string): Promise<Array<{ grant_id: number }>> {
  const [rows] = (await db.knex.raw('SELECT grant_id FROM ledger WHERE resource = ? ORDER BY id', [
    resource,
  ])) as unknown as [Array<{ grant_id: number }>];
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
    await locks.withWriteLock(
      resource,
      async (trx2, next) => {
        nextGrant = next.id;
        await trx2.raw('INSERT INTO ledger (resource, grant_id, amount) VALUES (?, ?, 100)', [resource, next.id]);
      },
      { waitMs: 5_000 },
    );
  }).then(
    (v) => v,
    (e: unknown) => e,
  );
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
    expect((await locks.inspect('fenced')).live.write).toBe(0);
  });

  it('the same holds under a read lock', async () => {
    const locks = createLockManager({ knex: db.knex });
    const { outcome, nextGrant } = await pausedHolderScenario('fenced-read', (business) =>
      locks.withReadLock('fenced-read', business),
    );
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
    const outcome = await locks
      .withWriteLock('forced', async (trx, grant) => {
        await trx.raw('INSERT INTO ledger (resource, grant_id, amount) VALUES (?, ?, 1)', ['forced', grant.id]);
        expect(await locks.forceRelease(grant.id)).toBe(true);
      })
      .catch((e: unknown) => e);
    expect(outcome).toBeInstanceOf(LockLostError);
    expect(await ledger('forced')).toEqual([]);
  });

  it('a business error rolls back and the grant is still released', async () => {
    const locks = createLockManager({ knex: db.knex });
    await expect(
      locks.withWriteLock('boom', async (trx, grant) => {
        await trx.raw('INSERT INTO ledger (resource, grant_id, amount) VALUES (?, ?, 1)', ['boom', grant.id]);
        throw new Error('bank said no');
      }),
    ).rejects.toThrow('bank said no');
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

// After a failover to an asynchronous replica that never received a grant, the new primary hands
// its id out again: same id, resource and mode, another holder's token. The old holder reaches the
// new primary with its handle; nothing it does may touch the new holder's grant.
describe('a grant id handed out again (failover to a replica that never had the grant)', () => {
  /** Makes the grant's row what the new primary holds: live, same id, another holder's token. */
  async function reissue(grant: Grant): Promise<void> {
    await db.knex.raw("UPDATE t_lock_log SET token = UNHEX(?), owner = 'new-holder' WHERE id = ?", [
      randomBytes(16).toString('hex'),
      grant.id,
    ]);
  }

  async function newHolderIntact(resource: string, grant: Grant): Promise<void> {
    expect(await grantRow(db.knex, grant.id)).toMatchObject({ status: 0 });
    expect((await createLockManager({ knex: db.knex }).inspect(resource)).holders).toEqual([
      expect.objectContaining({ id: grant.id, owner: 'new-holder' }),
    ]);
    expect(await invariantViolations(db.knex)).toEqual([]);
  }

  it("the old holder's fenced work is refused and rolled back; release, extend and downgrade leave the new grant alone", async () => {
    const locks = createLockManager({ knex: db.knex });
    let fenced: Grant | undefined;
    const outcome = await locks
      .withWriteLock('reissued', async (trx, grant) => {
        fenced = grant;
        await trx.raw('INSERT INTO ledger (resource, grant_id, amount) VALUES (?, ?, 1)', ['reissued', grant.id]);
        await reissue(grant);
      })
      .catch((e: unknown) => e);
    expect(outcome).toBeInstanceOf(LockLostError);
    expect(await ledger('reissued')).toEqual([]);
    await newHolderIntact('reissued', fenced!);

    for (const [resource, act] of [
      ['reissued-release', (g: Grant) => g.release()],
      ['reissued-extend', (g: Grant) => g.extend(60_000)],
      [
        'reissued-downgrade',
        (g: Grant) =>
          g.downgrade().then(
            () => 'downgraded',
            (e: unknown) => e,
          ),
      ],
    ] as const) {
      const g = (await locks.tryAcquireWrite(resource))!;
      await reissue(g);
      const result = await act(g);
      expect(result === false || result instanceof LockLostError, `${resource}: ${String(result)}`).toBe(true);
      await newHolderIntact(resource, g);
    }
  });

  it("negative control: the release statement without the token releases the new holder's grant", async () => {
    const locks = createLockManager({ knex: db.knex });
    const g = (await locks.tryAcquireWrite('reissued-control'))!;
    await reissue(g);
    const byIdOnly = RELEASE_SQL.replace(/ AND l\.token = UNHEX\(\?\)$/, '');
    expect(byIdOnly).not.toBe(RELEASE_SQL);
    const [result] = (await db.knex.raw(byIdOnly, [
      1,
      1,
      0,
      g.id,
      Buffer.from('reissued-control').toString('hex'),
      0,
    ])) as unknown as [{ affectedRows: number }];
    expect(result.affectedRows).toBe(2);
    expect(await grantRow(db.knex, g.id)).toMatchObject({ status: 2 });
  });
});
