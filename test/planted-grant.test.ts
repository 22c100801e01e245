// What the application role can do with its own SQL (issue 31, point 9): plant a grant leased to
// 2099, or dated in 2099, that blocks its resource for good. The library never dates a grant further
// ahead than its longest lease (LIMITS.maxTimerMs), so the reaper's test of staleness takes such a
// row as stale on its next run. Control: a grant under the longest lease the library can write is
// not reaped, and the former test of staleness misses the planted ones.
// covers: src/sql/reap.ts, src/admin/reap-and-purge.ts
import { describe, expect, it } from 'vitest';
import { createLockManager, LIMITS } from '../src/index.js';
import { reapStaleGrants } from '../src/admin/index.js';
import { LOCK_TYPE, STATUS } from '../src/types.js';
import { useTestDatabase } from './support/db.js';
import { backdate, invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);

/** A live write grant written by hand, as the application role may: the log row and its count. */
async function plant(resource: string, createTime: string, leaseUntil: string | null): Promise<number> {
  const id = Buffer.from(resource);
  await db.knex.raw('INSERT INTO t_read_write_lock (resource_id, w_count, r_count, version) VALUES (?, 1, 0, 1)', [id]);
  const [result] = (await db.knex
    .raw(
      `INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, lease_until, version, owner, token)
     VALUES (?, ${LOCK_TYPE.write}, ${STATUS.live}, ${createTime}, ${leaseUntil ?? 'NULL'}, 0, 'planted', RANDOM_BYTES(16))`,
      [id],
    )
    .catch(() =>
      // MySQL has RANDOM_BYTES; MariaDB before 10.10 does not: a token from the id is as unique here.
      db.knex.raw(
        `INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, lease_until, version, owner, token)
       VALUES (?, ${LOCK_TYPE.write}, ${STATUS.live}, ${createTime}, ${leaseUntil ?? 'NULL'}, 0, 'planted', UNHEX(MD5(?)))`,
        [id, resource],
      ),
    )) as unknown as [{ insertId: number }];
  return Number(result.insertId);
}

/** The reaper's test of staleness before this change: a lease of any date protected its grant. */
const FORMER_STALE_SQL =
  '(create_time < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND AND (lease_until IS NULL OR lease_until < UTC_TIMESTAMP(6)))';

async function staleByFormerTest(id: number): Promise<boolean> {
  const [rows] = (await db.knex.raw(`SELECT ${FORMER_STALE_SQL} AS stale FROM t_lock_log WHERE id = ?`, [
    60_000_000,
    id,
  ])) as unknown as [Array<{ stale: number }>];
  return Number(rows[0]!.stale) === 1;
}

describe('a grant planted by hand', () => {
  it('leased to 2099, or created in 2099: the next reaper run takes it, and list() calls it stale', async () => {
    const leased = await plant('planted-1', 'UTC_TIMESTAMP(6) - INTERVAL 120 SECOND', "'2099-01-01 00:00:00'");
    const future = await plant('planted-2', "'2099-01-01 00:00:00'", null);
    const locks = createLockManager({ knex: db.knex, staleAfterMs: 60_000 });
    const listed = await locks.list({ staleOnly: true });
    expect(listed.grants.map((g) => g.id)).toEqual(expect.arrayContaining([leased, future]));
    const reaped = await reapStaleGrants(db.knex, { staleAfterMs: 60_000 });
    expect(reaped.grants.map((g) => g.id).sort((a, b) => a - b)).toEqual([leased, future]);
    // Both resources are free again.
    for (const id of ['planted-1', 'planted-2']) {
      const g = await locks.tryAcquireWrite(id);
      expect(g).not.toBeNull();
      await g!.release();
    }
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('control: a grant under the longest lease the library writes is not reaped, and the former test missed the planted ones', async () => {
    const locks = createLockManager({ knex: db.knex });
    const g = (await locks.tryAcquireWrite('planted-3'))!;
    expect(await g.extend(LIMITS.maxTimerMs)).toBe(true);
    await backdate(db.knex, g.id, 3_600_000);
    const planted = await plant('planted-4', 'UTC_TIMESTAMP(6) - INTERVAL 120 SECOND', "'2099-01-01 00:00:00'");
    const reaped = await reapStaleGrants(db.knex, { staleAfterMs: 60_000 });
    expect(reaped.grants.map((r) => r.id)).toEqual([planted]);
    expect(await g.isLive()).toBe(true);
    expect(await g.release()).toBe(true);
    const again = await plant('planted-5', 'UTC_TIMESTAMP(6) - INTERVAL 120 SECOND', "'2099-01-01 00:00:00'");
    expect(await staleByFormerTest(again)).toBe(false);
    expect(await createLockManager({ knex: db.knex }).forceRelease(again)).toBe(true);
  });
});
