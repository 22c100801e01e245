// Grant ids past 2^53 (t_lock_log ids are BIGINT; an explicit id inserted by hand or a large
// auto_increment_increment gets there). `Grant.id` is a number, which cannot hold such an id: the
// acquire refuses it with GrantIdRangeError and releases that grant by its token, so nothing is
// left live; the reaper names stale grants by their exact ids. Negative control: the pre-fix path,
// the id handled as a JS number, releases nothing and leaves the grant live, and a reaper that
// rounds reaps another grant's id.
// covers: src/lock/durable/durable-acquire.ts, src/sql/release.ts, src/sql/reap.ts
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { describe, expect, it } from 'vitest';
import { reapStaleGrants } from '../src/admin/index.js';
import { createLockManager, RwLockError } from '../src/index.js';
import { GrantIdRangeError } from '../src/errors.js';
import { withConnection } from '../src/sql/connection.js';
import { releaseGrant } from '../src/sql/release.js';
import { useTestDatabase } from './support/db.js';
import { invariantViolations } from './support/state.js';

const refused = useTestDatabase(`${import.meta.filename}-refused`);
const reaped = useTestDatabase(`${import.meta.filename}-reaped`);
const control = useTestDatabase(`${import.meta.filename}-control`);
/** 2^53 + 1: the first integer a JS number cannot hold (it reads as 2^53). */
const PAST = '9007199254740993';

async function rows<T>(k: Knex, sql: string, bindings: readonly unknown[] = []): Promise<T[]> {
  const [result] = (await k.raw(sql, bindings as Knex.RawBinding[])) as unknown as [T[]];
  return result;
}

/** A live write grant planted at an exact id with its resource's count, as a granted acquire leaves it. */
async function plantLive(k: Knex, id: string, resource: string, ageMs: number): Promise<Buffer> {
  const token = randomBytes(16);
  await k.raw('INSERT INTO t_read_write_lock (resource_id, w_count, r_count, version) VALUES (?, 1, 0, 1)', [
    Buffer.from(resource),
  ]);
  await k.raw(
    `INSERT INTO t_lock_log (id, resource_id, lock_type, status, create_time, version, owner, token)
     VALUES (CAST(? AS UNSIGNED), ?, 0, 0, UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND, 0, 'planted', ?)`,
    [id, Buffer.from(resource), ageMs * 1000, token],
  );
  return token;
}

async function statusOf(k: Knex, id: string): Promise<number | undefined> {
  const [row] = await rows<{ status: number }>(k, 'SELECT status FROM t_lock_log WHERE id = CAST(? AS UNSIGNED)', [id]);
  return row?.status;
}

describe('grant ids past 2^53', () => {
  it('an acquire given one refuses it with GrantIdRangeError, having released that grant: nothing is left live', async () => {
    await refused.knex.raw(`ALTER TABLE t_lock_log AUTO_INCREMENT = ${PAST}`);
    const locks = createLockManager({ knex: refused.knex });
    const err = await locks.acquireWrite('past-2^53', { waitMs: 0 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GrantIdRangeError);
    expect(err).toBeInstanceOf(RwLockError);
    expect(err).toMatchObject({ code: 'ERR_RWLOCK_GRANT_ID_RANGE', grantId: PAST, released: true });
    expect((err as Error).message).toContain('AUTO_INCREMENT');
    expect(await statusOf(refused.knex, PAST)).toBe(2);

    // Every later acquire, through every entry point, is refused the same way; the work never runs.
    let ran = false;
    await expect(locks.withReadLock('past-2^53', async () => void (ran = true))).rejects.toBeInstanceOf(
      GrantIdRangeError,
    );
    await expect(locks.tryAcquireRead('other')).rejects.toBeInstanceOf(GrantIdRangeError);
    expect(ran).toBe(false);
    const [live] = await rows<{ n: number | string }>(
      refused.knex,
      'SELECT COUNT(*) AS n FROM t_lock_log WHERE status = 0',
    );
    expect(Number(live!.n)).toBe(0);
    expect(await invariantViolations(refused.knex)).toEqual([]);

    // The remedy the error names: the rows past 2^53 - 1 deleted, the counter moved back; ids then fit.
    await refused.knex.raw('DELETE FROM t_lock_log WHERE id > 9007199254740991');
    await refused.knex.raw('ALTER TABLE t_lock_log AUTO_INCREMENT = 1');
    const g = await locks.acquireWrite('past-2^53', { waitMs: 0 });
    expect(Number.isSafeInteger(g.id)).toBe(true);
    expect(await g.release()).toBe(true);
  });

  it('the reaper reaps a stale grant past 2^53 by its exact id and leaves its live neighbour alone', async () => {
    // 2^53 + 3 rounds to 2^53 + 4 as a JS number: the neighbour's id.
    await plantLive(reaped.knex, '9007199254740995', 'stale-past', 3_600_000);
    await plantLive(reaped.knex, '9007199254740996', 'fresh-past', 0);
    const result = await reapStaleGrants(reaped.knex, { staleAfterMs: 60_000 });
    expect(result).toMatchObject({ reaped: 1, failed: 0, skipped: 0 });
    expect(result.grants[0]!.resourceId).toBe('stale-past');
    expect(await statusOf(reaped.knex, '9007199254740995')).toBe(2);
    expect(await statusOf(reaped.knex, '9007199254740996')).toBe(0);
    expect(await invariantViolations(reaped.knex)).toEqual([]);
  });

  it('negative control: the id as a JS number releases nothing and leaves the grant live; a rounding reaper misses it', async () => {
    const token = await plantLive(control.knex, PAST, 'control-past', 3_600_000);
    // What the acquire handed out before: Number(id), then the release statement with it.
    const released = await withConnection(control.knex, (conn) =>
      releaseGrant(conn, { id: Number(PAST), resource: Buffer.from('control-past'), mode: 'write', token }, 'holder'),
    );
    expect(released).toBe(false);
    expect(await statusOf(control.knex, PAST)).toBe(0);
    // The reaper's select-then-lock with ids as numbers: the locking read finds nothing at the rounded id.
    const [candidate] = await rows<{ id: number }>(control.knex, 'SELECT id FROM t_lock_log WHERE status = 0');
    expect(String(candidate!.id)).not.toBe(PAST);
    const locked = await rows<{ id: unknown }>(
      control.knex,
      'SELECT id FROM t_lock_log WHERE id IN (?) AND status = 0',
      [[candidate!.id]],
    );
    expect(locked).toEqual([]);
  });
});
