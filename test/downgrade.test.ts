// Write→read downgrade and read→write try-upgrade, in place and atomic.
// covers: src/lock/durable/grant.ts, src/sql/mode.ts
import { describe, expect, it } from 'vitest';
import { createLockManager, LockLostError, ResourceKindError, type Grant, type LockManager } from '../src/index.js';
import { reapStaleGrants } from '../src/admin/index.js';
import { useTestDatabase } from './support/db.js';
import { backdate, invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);

async function logRow(id: number): Promise<{ lock_type: number; status: number; mode_changed_at: Date | null }> {
  const [rows] = (await db.knex.raw('SELECT lock_type, status, mode_changed_at FROM t_lock_log WHERE id = ?', [
    id,
  ])) as unknown as [Array<{ lock_type: number; status: number; mode_changed_at: Date | null }>];
  return rows[0]!;
}

/** Write grants of the resource created after grant `afterId`. */
async function writersSince(resource: string, afterId: number): Promise<number> {
  const [rows] = (await db.knex.raw(
    'SELECT COUNT(*) AS n FROM t_lock_log WHERE resource_id = ? AND id > ? AND lock_type = 0 AND (released_by IS NULL OR released_by <> 4)',
    [Buffer.from(resource), afterId],
  )) as unknown as [Array<{ n: number }>];
  return Number(rows[0]!.n);
}

/**
 * Downgrades `grant` with `downgrade` while a writer of another process tries to get in at the
 * moment `downgrade` offers (`between`); true when a writer got the lock while the holder went on
 * believing it held the resource.
 */
async function writerGotIn(
  resource: string,
  downgrade: (g: Grant, between: () => Promise<void>) => Promise<Grant>,
): Promise<boolean> {
  const locks = createLockManager({ knex: db.knex });
  const rival: LockManager = createLockManager({ knex: db.knex });
  const held = await locks.acquireWrite(resource);
  let rivalGrant: Grant | null = null;
  const reader = await downgrade(held, async () => {
    rivalGrant = await rival.tryAcquireWrite(resource);
  });
  rivalGrant ??= await rival.tryAcquireWrite(resource); // after the downgrade too
  const got = (await writersSince(resource, held.id)) > 0;
  await (rivalGrant as Grant | null)?.release();
  await reader.release();
  return got;
}

describe('downgrade', () => {
  it('a write grant becomes a read grant in place: readers join at once, writers stay out, the log records it', async () => {
    const locks = createLockManager({ knex: db.knex });
    const other = createLockManager({ knex: db.knex });
    const g = await locks.acquireWrite('dg-1');
    expect(await other.tryAcquireRead('dg-1')).toBeNull();
    await g.downgrade();
    expect(g.mode).toBe('read');
    expect(await other.tryAcquireWrite('dg-1')).toBeNull();
    const r = await other.tryAcquireRead('dg-1');
    expect(r).not.toBeNull();
    expect(await locks.inspect('dg-1')).toMatchObject({ live: { write: 0, read: 2 } });
    expect(await logRow(g.id)).toMatchObject({ lock_type: 1, status: 0 });
    expect((await logRow(g.id)).mode_changed_at).toBeInstanceOf(Date);
    expect(await invariantViolations(db.knex)).toEqual([]);
    expect(await g.release()).toBe(true);
    expect(await r!.release()).toBe(true);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('no writer gets in during the downgrade', async () => {
    expect(
      await writerGotIn('dg-2', async (g) => {
        await g.downgrade();
        return g;
      }),
    ).toBe(false);
  });

  it('negative control: a downgrade as release-then-acquire lets a writer in, and the same check catches it', async () => {
    const locks = createLockManager({ knex: db.knex });
    expect(
      await writerGotIn('dg-3', async (g, between) => {
        await g.release();
        await between();
        return locks.acquireRead('dg-3', { waitMs: 0 }).catch(() => g);
      }),
    ).toBe(true);
  });

  it('a reader waiting in the same process is granted at once', async () => {
    const locks = createLockManager({ knex: db.knex, backoffMinMs: 60_000, backoffMaxMs: 60_000 });
    const g = await locks.acquireWrite('dg-4');
    // With a 60 s backoff, only the local wake-up can grant the waiting reader within the test.
    const waiting = locks.acquireRead('dg-4', { waitMs: 50_000 });
    await g.downgrade();
    const r = await waiting;
    expect(await locks.inspect('dg-4')).toMatchObject({ live: { write: 0, read: 2 } });
    await r.release();
    await g.release();
  });

  it('inside withWriteLock: readers of another manager get in while the callback goes on, see its writes only at the commit, and the fence releases the read grant', async () => {
    await db.knex.raw('CREATE TABLE IF NOT EXISTS dg_notes (v INT) ENGINE=InnoDB');
    const locks = createLockManager({ knex: db.knex });
    const other = createLockManager({ knex: db.knex });
    let id = 0;
    await locks.withWriteLock('dg-5', async (trx, grant) => {
      id = grant.id;
      await trx.raw('INSERT INTO dg_notes VALUES (1)');
      await grant.downgrade();
      const r = await other.tryAcquireRead('dg-5');
      expect(r).not.toBeNull();
      await r!.release();
      expect(await other.tryAcquireWrite('dg-5')).toBeNull();
      // The downgrade commits on its own connection; the callback's write commits only with the fence.
      const [seen] = (await db.knex.raw('SELECT COUNT(*) AS n FROM dg_notes')) as unknown as [Array<{ n: number }>];
      expect(Number(seen[0]!.n)).toBe(0);
    });
    expect(await logRow(id)).toMatchObject({ lock_type: 1, status: 2 });
    const [rows] = (await db.knex.raw('SELECT COUNT(*) AS n FROM dg_notes')) as unknown as [Array<{ n: number }>];
    expect(Number(rows[0]!.n)).toBe(1);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('a downgraded grant that goes stale is reaped as a read grant', async () => {
    const locks = createLockManager({ knex: db.knex });
    const g = await locks.acquireWrite('dg-6');
    await g.downgrade();
    await backdate(db.knex, g.id, 3_600_000);
    expect((await reapStaleGrants(db.knex, { staleAfterMs: 60_000 })).grants.map((x) => x.id)).toContain(g.id);
    expect(await invariantViolations(db.knex)).toEqual([]);
    await expect(g.downgrade()).rejects.toThrow(/read grant/);
    expect(await g.release()).toBe(false);
  });

  it('on a resource last used as a semaphore, the downgraded grant is a reader: a permit is refused beside it, a reader joins', async () => {
    const locks = createLockManager({ knex: db.knex });
    const other = createLockManager({ knex: db.knex });
    const permit = await locks.acquirePermit('dg-sem', { permits: 2 });
    await permit.release(); // idle, its row keeps permit_limit = 2 for the next holder to decide
    const g = await locks.acquireWrite('dg-sem');
    await g.downgrade();
    const [rows] = (await db.knex.raw('SELECT r_count, permit_limit FROM t_read_write_lock WHERE resource_id = ?', [
      Buffer.from('dg-sem'),
    ])) as unknown as [Array<{ r_count: number; permit_limit: number | null }>];
    expect(rows[0]).toEqual({ r_count: 1, permit_limit: null });
    await expect(other.tryAcquirePermit('dg-sem', { permits: 2 })).rejects.toBeInstanceOf(ResourceKindError);
    const reader = await other.tryAcquireRead('dg-sem');
    expect(reader).not.toBeNull();
    await reader!.release();

    // Negative control: the limit left on the row, as the downgrade left it before, mixes the kinds,
    // and the same calls show it (the permit granted beside the reader, the reader refused).
    await db.knex.raw('UPDATE t_read_write_lock SET permit_limit = 2 WHERE resource_id = ?', [Buffer.from('dg-sem')]);
    const mixed = await other.tryAcquirePermit('dg-sem', { permits: 2 });
    expect(mixed).not.toBeNull();
    await expect(other.tryAcquireRead('dg-sem')).rejects.toBeInstanceOf(ResourceKindError);
    await mixed!.release();
    await g.release();
  });

  it('downgrading a grant that was reaped throws LockLostError', async () => {
    const locks = createLockManager({ knex: db.knex });
    const g = await locks.acquireWrite('dg-7');
    await locks.forceRelease(g.id);
    await expect(g.downgrade()).rejects.toBeInstanceOf(LockLostError);
    expect(g.signal.aborted).toBe(true);
  });
});

describe('tryUpgrade', () => {
  it('the only reader becomes the writer; with another reader it is refused at once; a lost grant throws', async () => {
    const locks = createLockManager({ knex: db.knex });
    const other = createLockManager({ knex: db.knex });
    const a = await locks.acquireRead('up-1');
    const b = await other.acquireRead('up-1');
    expect(await a.tryUpgrade()).toBeNull();
    expect(a.mode).toBe('read');
    await b.release();
    expect(await a.tryUpgrade()).toBe(a);
    expect(a.mode).toBe('write');
    expect(await other.tryAcquireRead('up-1')).toBeNull();
    expect(await locks.inspect('up-1')).toMatchObject({ live: { write: 1, read: 0 } });
    expect(await invariantViolations(db.knex)).toEqual([]);
    expect(await a.release()).toBe(true);
    const c = await locks.acquireRead('up-1');
    await locks.forceRelease(c.id);
    await expect(c.tryUpgrade()).rejects.toBeInstanceOf(LockLostError);
  });
});
