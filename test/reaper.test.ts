// Property 2 (docs/guarantees.md): a grant is released at most once and gives its count back once: a
// release after a reap changes nothing, and concurrent reapers reap each stale grant once.
// covers: src/admin/index.ts, src/admin/reap-and-purge.ts, src/sql/reap.ts, src/sql/purge.ts
import { describe, expect, it } from 'vitest';
import { createLockManager } from '../src/index.js';
import { reapStaleGrants, purgeReleasedGrants } from '../src/admin/index.js';
import { useTestDatabase } from './support/db.js';
import { backdate, backdateRelease, grantRow, invariantViolations, resourceRows } from './support/state.js';

const db = useTestDatabase(import.meta.filename);
const HOUR = 3_600_000;

/** The reference design's release (defect 5): gives the count back without checking the grant's status. */
async function referenceRelease(grantId: number, resource: string): Promise<void> {
  await db.knex.transaction(async (trx) => {
    await trx.raw(
      'UPDATE t_read_write_lock SET r_count = r_count - 1, version = version + 1 WHERE resource_id = ? AND r_count - 1 >= 0',
      [Buffer.from(resource)],
    );
    await trx.raw('UPDATE t_lock_log SET status = 2, version = version + 1 WHERE id = ?', [grantId]);
  });
}

describe('release after reap (defect 5 of the reference design)', () => {
  async function readerReapedWhileAnotherReads(resource: string) {
    const locks = createLockManager({ knex: db.knex });
    const paused = await locks.tryAcquireRead(resource);
    const other = await locks.tryAcquireRead(resource);
    await backdate(db.knex, paused!.id, HOUR);
    const reap = await reapStaleGrants(db.knex, { staleAfterMs: 60_000 });
    expect(reap.grants.map((g) => g.id)).toContain(paused!.id);
    return { locks, paused: paused!, other: other! };
  }

  it('a late release changes nothing: the other reader keeps its count and a writer stays out', async () => {
    const { locks, paused, other } = await readerReapedWhileAnotherReads('dr-1');
    expect(await paused.release()).toBe(false);
    expect((await locks.inspect('dr-1')).live.read).toBe(1);
    expect(await locks.tryAcquireWrite('dr-1')).toBeNull();
    expect(await invariantViolations(db.knex)).toEqual([]);
    await other.release();
  });

  it('negative control: the reference release gives the count back twice and lets a writer in beside a reader', async () => {
    const { locks, paused, other } = await readerReapedWhileAnotherReads('dr-2');
    await referenceRelease(paused.id, 'dr-2');
    const writer = await locks.tryAcquireWrite('dr-2');
    expect(writer).not.toBeNull(); // the check above would have caught this
    expect(await invariantViolations(db.knex)).not.toEqual([]);
    await writer!.release();
    // Leave no corrupt state behind for the other tests.
    await db.knex.raw('UPDATE t_lock_log SET status = 2 WHERE resource_id = ?', [Buffer.from('dr-2')]);
    await db.knex.raw('UPDATE t_read_write_lock SET w_count = 0, r_count = 0 WHERE resource_id = ?', [
      Buffer.from('dr-2'),
    ]);
    expect(other.id).toBeGreaterThan(paused.id);
  });
});

describe('reapStaleGrants', () => {
  it('reaps only grants older than the cutoff on the database clock', async () => {
    const locks = createLockManager({ knex: db.knex });
    const old = await locks.tryAcquireWrite('age-old');
    const young = await locks.tryAcquireWrite('age-young');
    await backdate(db.knex, old!.id, 11 * 60_000);
    await backdate(db.knex, young!.id, 9 * 60_000);
    const result = await reapStaleGrants(db.knex); // default cutoff: 10 minutes
    expect(result.grants.map((g) => g.id)).toEqual([old!.id]);
    expect(result.grants[0]).toMatchObject({ resourceId: 'age-old', mode: 'write' });
    expect(result.grants[0]!.ageMs).toBeGreaterThan(11 * 60_000 - 1000);
    expect(await grantRow(db.knex, old!.id)).toMatchObject({ status: 2, released_by: 2 });
    expect(await grantRow(db.knex, young!.id)).toMatchObject({ status: 0 });
    await young!.release();
  });

  it('many reapers at once release each stale grant once and give each count back once', async () => {
    const locks = createLockManager({ knex: db.knex });
    const grants = [];
    for (let r = 0; r < 12; r++) {
      if (r % 3 === 0) grants.push(await locks.tryAcquireWrite(`many-${r}`));
      else for (let k = 0; k < 8; k++) grants.push(await locks.tryAcquireRead(`many-${r}`));
    }
    await db.knex.raw(
      "UPDATE t_lock_log SET create_time = create_time - INTERVAL 1 HOUR WHERE status = 0 AND resource_id LIKE 'many-%'",
    );
    const reapers = Array.from({ length: 6 }, () => db.connect({ poolMax: 2 }));
    const results = await Promise.all(reapers.map((k) => reapStaleGrants(k, { staleAfterMs: 60_000, batchSize: 7 })));
    const reapedIds = results.flatMap((r) => r.grants.map((g) => g.id));
    expect(reapedIds.length).toBe(grants.length);
    expect(new Set(reapedIds).size).toBe(grants.length);
    for (const row of await resourceRows(db.knex))
      if (row.resource.startsWith('many-')) expect(row).toMatchObject({ wCount: 0, rCount: 0 });
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('skips, without failing, a grant whose business transaction holds its row (1205), and reaps it next round', async () => {
    const locks = createLockManager({ knex: db.knex });
    const busy = await locks.tryAcquireWrite('busy');
    const free = await locks.tryAcquireWrite('free');
    await backdate(db.knex, busy!.id, HOUR);
    await backdate(db.knex, free!.id, HOUR);
    const trx = await db.knex.transaction();
    try {
      await trx.raw('SELECT id FROM t_lock_log WHERE id = ? FOR UPDATE', [busy!.id]); // as a committing fence would
      const first = await reapStaleGrants(db.knex, { staleAfterMs: 60_000 });
      expect(first.grants.map((g) => g.id)).toEqual([free!.id]);
      expect(first.skipped).toBe(1);
    } finally {
      await trx.rollback();
    }
    const second = await reapStaleGrants(db.knex, { staleAfterMs: 60_000 });
    expect(second.grants.map((g) => g.id)).toEqual([busy!.id]);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('purges released grants past the retention period and keeps live ones', async () => {
    const locks = createLockManager({ knex: db.knex });
    const done = await locks.tryAcquireWrite('purge');
    await done!.release();
    const live = await locks.tryAcquireRead('purge-live');
    await backdate(db.knex, done!.id, 8 * 24 * HOUR);
    await backdate(db.knex, live!.id, 8 * 24 * HOUR);
    // Released more than the purge floor ago too (test/purge.test.ts: a younger release is kept).
    await backdateRelease(db.knex, done!.id, 2 * 24 * HOUR);
    const { purged } = await purgeReleasedGrants(db.knex, { retentionMs: 7 * 24 * HOUR, batchSize: 1 });
    expect(purged).toBeGreaterThanOrEqual(1);
    const [rows] = (await db.knex.raw('SELECT id FROM t_lock_log WHERE id IN (?, ?)', [
      done!.id,
      live!.id,
    ])) as unknown as [Array<{ id: number }>];
    expect(rows.map((r) => Number(r.id))).toEqual([live!.id]);
    await live!.release();
  });
});

describe('reapStaleGrants with corrupt counts', () => {
  it('reports a grant whose counts disagree with the log and still reaps the rest', async () => {
    const locks = createLockManager({ knex: db.knex });
    const bad = await locks.tryAcquireRead('corrupt');
    const good = await locks.tryAcquireRead('fine');
    await db.knex.raw('UPDATE t_read_write_lock SET r_count = 0 WHERE resource_id = ?', [Buffer.from('corrupt')]);
    await backdate(db.knex, bad!.id, HOUR);
    await backdate(db.knex, good!.id, HOUR);
    const result = await reapStaleGrants(db.knex, { staleAfterMs: 60_000 });
    expect(result.grants.map((g) => g.id)).toEqual([good!.id]);
    expect(result.failed).toBe(1);
    expect(result.problems[0]).toMatch(new RegExp(`^grant ${bad!.id}: `));
    expect(await grantRow(db.knex, bad!.id)).toMatchObject({ status: 0 }); // nothing half-done
    await db.knex.raw('UPDATE t_lock_log SET status = 2 WHERE id = ?', [bad!.id]);
  });
});
