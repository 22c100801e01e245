// withWriteGrant/withReadGrant beyond what each ORM's suite checks (test/orm): the scope it
// registers, nesting, a conflict run again under the same grant, work without a fence, bad options.
// covers: src/lock/manager/scoped-calls.ts, src/lock/fence/fenced.ts, src/lock/manager/nesting.ts
import { describe, expect, it } from 'vitest';
import { fromKnex } from '../src/adapters/index.js';
import { createLockManager, InvalidOptionsError, type Grant } from '../src/index.js';
import { useTestDatabase } from './support/db.js';
import { grantRow, invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);

async function grantsOf(resource: string): Promise<number> {
  const [rows] = (await db.knex.raw('SELECT COUNT(*) AS n FROM t_lock_log WHERE resource_id = ?', [
    Buffer.from(resource),
  ])) as unknown as [Array<{ n: number }>];
  return Number(rows[0]!.n);
}

describe('withWriteGrant and withReadGrant', () => {
  it('registers its scope: current() gives its grant and no knex transaction', async () => {
    const locks = createLockManager({ knex: db.knex });
    const seen = await locks.withReadGrant('wg-current', async (grant) => {
      const scope = locks.current('wg-current');
      return { same: scope?.grant === grant, trx: scope?.trx, innermost: locks.current()?.grant === grant };
    });
    expect(seen).toEqual({ same: true, trx: undefined, innermost: true });
    expect(locks.current()).toBeUndefined();
  });

  it('a nested scoped call on the same resource is refused with InvalidOptionsError, nothing acquired', async () => {
    const locks = createLockManager({ knex: db.knex });
    let outer: Grant | undefined;
    const errors = await locks.withWriteGrant('wg-nested', async (grant) => {
      outer = grant;
      return Promise.all([
        locks.withWriteGrant('wg-nested', () => Promise.resolve()).catch((e: unknown) => e),
        locks.withReadGrant('wg-nested', () => Promise.resolve()).catch((e: unknown) => e),
        // withWriteLock would join the enclosing transaction: there is no knex one to join.
        locks.withWriteLock('wg-nested', () => Promise.resolve()).catch((e: unknown) => e),
      ]);
    });
    for (const err of errors ?? []) expect(err).toBeInstanceOf(InvalidOptionsError);
    expect(errors).toHaveLength(3);
    expect(await grantsOf('wg-nested')).toBe(1);
    expect(await grantRow(db.knex, outer!.id)).toMatchObject({ status: 2, released_by: 1 });
    // Negative control: inside withWriteLock, a nested withWriteLock joins (no refusal).
    await expect(locks.withWriteLock('wg-join', () => locks.withWriteLock('wg-join', async () => 1))).resolves.toBe(1);
    // And withWriteGrant inside withWriteLock on the same resource is refused too.
    const inside = await locks.withWriteLock('wg-join', () =>
      locks.withWriteGrant('wg-join', () => Promise.resolve()).catch((e: unknown) => e),
    );
    expect(inside).toBeInstanceOf(InvalidOptionsError);
  });

  it('a deadlock in the work runs it again under the same grant, then commits', async () => {
    await db.knex.raw(`CREATE PROCEDURE IF NOT EXISTS wg_deadlock() SIGNAL SQLSTATE '40001'
      SET MYSQL_ERRNO = 1213, MESSAGE_TEXT = 'Deadlock found when trying to get lock; try restarting transaction'`);
    await db.knex.raw('CREATE TABLE IF NOT EXISTS wg_notes (tag VARCHAR(32)) ENGINE=InnoDB');
    const locks = createLockManager({ knex: db.knex });
    const ids: number[] = [];
    const value = await locks.withWriteGrant('wg-rerun', (grant) =>
      db.knex.transaction(async (trx) => {
        ids.push(grant.id);
        await trx.raw("INSERT INTO wg_notes VALUES ('wg-rerun')");
        if (ids.length === 1) await trx.raw('CALL wg_deadlock()');
        await grant.fence(fromKnex(trx));
        return ids.length;
      }),
    );
    expect(value).toBe(2);
    expect(new Set(ids).size).toBe(1);
    const [rows] = (await db.knex.raw("SELECT COUNT(*) AS n FROM wg_notes WHERE tag = 'wg-rerun'")) as unknown as [
      Array<{ n: number }>,
    ];
    expect(Number(rows[0]!.n)).toBe(1);
    expect(await grantRow(db.knex, ids[0]!)).toMatchObject({ status: 2, released_by: 1 });
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('work that never fences: its value is returned and the grant released', async () => {
    const locks = createLockManager({ knex: db.knex });
    let held: Grant | undefined;
    const value = await locks.withWriteGrant('wg-nofence', async (grant) => {
      held = grant;
      return 'done';
    });
    expect(value).toBe('done');
    expect(await grantRow(db.knex, held!.id)).toMatchObject({ status: 2, released_by: 1 });
    expect(await locks.tryAcquireWrite('wg-nofence')).not.toBeNull();
  });

  it('refuses isolationLevel, unknown keys, null options and a work that is no function, nothing acquired', async () => {
    const locks = createLockManager({ knex: db.knex });
    const bad: unknown[] = [{ isolationLevel: 'serializable' }, { wait: 1 }, null];
    for (const options of bad)
      await expect(
        locks.withWriteGrant('wg-bad', () => Promise.resolve(), options as { waitMs?: number }),
      ).rejects.toBeInstanceOf(InvalidOptionsError);
    await expect(locks.withReadGrant('wg-bad', 'work' as never)).rejects.toBeInstanceOf(InvalidOptionsError);
    expect(await grantsOf('wg-bad')).toBe(0);
  });
});
