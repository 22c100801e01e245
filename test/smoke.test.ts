import { describe, expect, it } from 'vitest';
import { createLockManager, reapStaleGrants } from '../src/index.js';
import { useTestDatabase } from './support/db.js';

const db = useTestDatabase(import.meta.filename);

describe('smoke', () => {
  it('grants, excludes, releases', async () => {
    const locks = createLockManager({ knex: db.knex });
    const w = await locks.tryAcquireWrite('loan-1');
    expect(w).not.toBeNull();
    expect(await locks.tryAcquireRead('loan-1')).toBeNull();
    expect(await w!.release()).toBe(true);
    expect(await w!.release()).toBe(false);
    const r1 = await locks.tryAcquireRead('loan-1');
    const r2 = await locks.tryAcquireRead('loan-1');
    expect(r1!.id).toBeLessThan(r2!.id);
    expect(await locks.tryAcquireWrite('loan-1')).toBeNull();
    const state = await locks.inspect('loan-1');
    expect(state.rCount).toBe(2);
    const out = await locks.withWriteLock('loan-2', async (trx, g) => (await trx.raw('SELECT ? AS x', [g.id]))[0][0].x);
    expect(typeof out).toBe('number');
    await r1!.release();
    await r2!.release();
    expect(await reapStaleGrants(db.knex, { staleAfterMs: 1 })).toMatchObject({ reaped: 0 });
  });
});
