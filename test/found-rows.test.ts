// Property 3 (docs/guarantees.md): results are identical with mysql2's default flags (CLIENT_FOUND_ROWS: affectedRows
// counts matched rows) and with flags: ['-FOUND_ROWS'] (affectedRows counts changed rows).
// covers: src/sql/acquire.ts, src/sql/release.ts, src/sql/extend.ts
import type { Knex } from 'knex';
import { describe, expect, it } from 'vitest';
import { createLockManager, LockLostError } from '../src/index.js';
import { reapStaleGrants } from '../src/admin/index.js';
import { useTestDatabase } from './support/db.js';
import { backdate, invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);

/** A fixed script of lock operations; returns what each step observed. */
async function transcript(knex: Knex, p: string): Promise<unknown[]> {
  const locks = createLockManager({ knex });
  const out: unknown[] = [];
  const w = await locks.tryAcquireWrite(`${p}a`);
  out.push(w !== null, await locks.tryAcquireWrite(`${p}a`), await locks.tryAcquireRead(`${p}a`));
  out.push(await w!.release(), await w!.release());
  const r1 = await locks.tryAcquireRead(`${p}a`);
  const r2 = await locks.tryAcquireRead(`${p}a`);
  out.push(r1 !== null, r2 !== null, await locks.tryAcquireWrite(`${p}a`));
  await backdate(knex, r1!.id, 3_600_000);
  const reaped = await reapStaleGrants(knex, { staleAfterMs: 60_000 });
  out.push(reaped.grants.filter((g) => g.resourceId.startsWith(p)).length);
  out.push(await r1!.release(), (await locks.inspect(`${p}a`)).live.read, await r2!.release(), await r2!.release());
  const g = await locks.tryAcquireWrite(`${p}b`);
  out.push(await locks.forceRelease(g!.id), await locks.forceRelease(g!.id), await g!.release());
  out.push(await locks.withWriteLock(`${p}c`, async () => 'committed'));
  out.push(
    await locks
      .withReadLock(`${p}c`, async (_trx, grant) => locks.forceRelease(grant.id))
      .catch((e: unknown) => e instanceof LockLostError),
  );
  const state = await locks.inspect(`${p}a`);
  out.push(state.live.write, state.live.read, state.holders.length);
  return out;
}

describe('CLIENT_FOUND_ROWS', () => {
  it('the same operations give the same results with default flags and with -FOUND_ROWS', async () => {
    const withFoundRows = await transcript(db.knex, 'fr-');
    const withoutFoundRows = await transcript(db.connect({ flags: ['-FOUND_ROWS'] }), 'nf-');
    expect(withoutFoundRows).toEqual(withFoundRows);
    expect(withFoundRows).toEqual([
      true,
      null,
      null,
      true,
      false,
      true,
      true,
      null,
      1,
      false,
      1,
      true,
      false,
      true,
      false,
      false,
      'committed',
      true,
      0,
      0,
      0,
    ]);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('negative control: the flag does change affectedRows for an UPDATE that leaves the row as it was', async () => {
    const locks = createLockManager({ knex: db.knex });
    await (await locks.tryAcquireWrite('flag-probe'))!.release();
    const sql = 'UPDATE t_read_write_lock SET w_count = 0 WHERE resource_id = ?';
    const id = [Buffer.from('flag-probe')];
    const [matched] = (await db.knex.raw(sql, id)) as unknown as [{ affectedRows: number }];
    const [changed] = (await db.connect({ flags: ['-FOUND_ROWS'] }).raw(sql, id)) as unknown as [
      { affectedRows: number },
    ];
    // A guarded UPDATE that did not bump version would read as success with one flag and failure with the other.
    expect([matched.affectedRows, changed.affectedRows]).toEqual([1, 0]);
  });
});
