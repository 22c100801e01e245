// covers: src/sql/purge.ts, src/admin/reap-and-purge.ts
import { describe, expect, it } from 'vitest';
import { createLockManager, InvalidOptionsError, LIMITS } from '../src/index.js';
import { purgeReleasedGrants } from '../src/admin/index.js';
import { fromKnex } from '../src/adapters/index.js';
import type { DurableGrant } from '../src/lock/durable/grant.js';
import { newToken } from '../src/lock/durable/token.js';
import { acquireWithStatements } from '../src/sql/acquire.js';
import { errnoOf, ER_DUP_ENTRY, withConnection } from '../src/sql/connection.js';
import { purgeBatch } from '../src/sql/purge.js';
import { withdrawAcquire } from '../src/sql/withdraw.js';
import { useTestDatabase } from './support/db.js';
import { backdate, invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);
const DAY = 86_400_000;

// Settling a lost reply reads the grant row: a lost commit's settle finds it released by its holder,
// and a withdrawal's row keeps a late acquire of its token from ever being granted. A purge, whatever
// its retention, keeps every row released less than LIMITS.purgeFloorMs ago. The control purges with
// no floor, as purge did before, and shows each settle answering wrongly.

/** The old purge: the retention alone decides (no floor). */
function purgeWithoutFloor(retentionMs: number): Promise<number> {
  return withConnection(db.knex, async (conn) => (await purgeBatch(conn, retentionMs, 1_000, 0)).deleted);
}

async function rowExists(id: number): Promise<boolean> {
  const [rows] = (await db.knex.raw('SELECT id FROM t_lock_log WHERE id = ?', [id])) as unknown as [unknown[]];
  return rows.length === 1;
}

/** A write grant whose fenced commit committed (its reply, as far as the settle knows, was lost). */
async function committedGrant(resource: string): Promise<DurableGrant> {
  const locks = createLockManager({ knex: db.knex });
  const grant = (await locks.acquireWrite(resource)) as DurableGrant;
  await db.knex.transaction(async (trx) => {
    await trx.raw('DO 1'); // the business writes
    await grant.fence(fromKnex(trx));
  });
  // Created long ago, as a long hold's row is: any retention shorter than the hold selects it.
  await backdate(db.knex, grant.id, 8 * DAY);
  return grant;
}

/** A lost acquire's settling: a withdrawn row under the attempt's token. */
async function withdrawn(resource: string): Promise<{ token: Buffer; id: number }> {
  const token = newToken();
  await withConnection(db.knex, (conn) => withdrawAcquire(conn, Buffer.from(resource), 'write', token));
  const [rows] = (await db.knex.raw('SELECT id FROM t_lock_log WHERE token = ?', [token])) as unknown as [
    Array<{ id: number }>,
  ];
  const id = Number(rows[0]!.id);
  // A second old: past a retention of 1 ms whatever the server's clock resolution.
  await backdate(db.knex, id, 1_000);
  return { token, id };
}

/** The lost acquire's transaction reaching the server late: null when it was not granted. */
function lateAcquire(resource: string, token: Buffer): Promise<number | null | 'duplicate token'> {
  return withConnection(
    db.knex,
    async (conn) =>
      (await acquireWithStatements(conn, Buffer.from(resource), 'write', Buffer.from('late'), token, 0)).id,
  ).catch((err: unknown) => {
    if (errnoOf(err) === ER_DUP_ENTRY) return 'duplicate token' as const;
    throw err;
  });
}

describe('purge keeps every row a settle may still need, whatever retentionMs says', () => {
  it('a committed grant survives retentionMs 1, and its lost commit is settled as committed', async () => {
    const grant = await committedGrant('floor-commit');
    await purgeReleasedGrants(db.knex, { retentionMs: 1 });
    expect(await rowExists(grant.id)).toBe(true);
    expect(await grant.settleLostCommit()).toBe('committed');
  });

  it('control: purged without the floor, the same commit is reported lost', async () => {
    const grant = await committedGrant('floor-commit-control');
    expect(await purgeWithoutFloor(1)).toBeGreaterThanOrEqual(1);
    expect(await rowExists(grant.id)).toBe(false);
    // The business writes committed, yet the settle cannot see it: the caller would be told otherwise.
    expect(await grant.settleLostCommit()).toBe('lost');
  });

  it('a withdrawal survives retentionMs 1, and the late acquire of its token is never granted', async () => {
    const w = await withdrawn('floor-withdrawn');
    await purgeReleasedGrants(db.knex, { retentionMs: 1 });
    expect(await rowExists(w.id)).toBe(true);
    expect(await lateAcquire('floor-withdrawn', w.token)).toBe('duplicate token');
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('control: purged without the floor, the late acquire is granted after it was settled as never granted', async () => {
    const w = await withdrawn('floor-withdrawn-control');
    expect(await purgeWithoutFloor(1)).toBeGreaterThanOrEqual(1);
    expect(await rowExists(w.id)).toBe(false);
    const late = await lateAcquire('floor-withdrawn-control', w.token);
    expect(late).toEqual(expect.any(Number));
    await db.knex.raw('UPDATE t_lock_log SET status = 2 WHERE id = ?', [late]);
    await db.knex.raw("UPDATE t_read_write_lock SET w_count = 0 WHERE resource_id = 'floor-withdrawn-control'");
  });

  it('a row released longer ago than the floor and created before the retention is purged', async () => {
    const grant = await committedGrant('floor-old');
    await db.knex.raw('UPDATE t_lock_log SET released_at = released_at - INTERVAL ? MICROSECOND WHERE id = ?', [
      (LIMITS.purgeFloorMs + 60_000) * 1000,
      grant.id,
    ]);
    const young = await committedGrant('floor-young');
    const { purged } = await purgeReleasedGrants(db.knex, { retentionMs: 1 });
    expect(purged).toBeGreaterThanOrEqual(1);
    expect([await rowExists(grant.id), await rowExists(young.id)]).toEqual([false, true]);
  });
});

describe('the floor outlasts every settling', () => {
  it('resolveTimeoutMs is at most LIMITS.maxResolveTimeoutMs, well inside the floor', () => {
    expect(LIMITS.purgeFloorMs).toBeGreaterThan(2 * LIMITS.maxResolveTimeoutMs);
    expect(() => createLockManager({ knex: db.knex, resolveTimeoutMs: LIMITS.maxResolveTimeoutMs })).not.toThrow();
    expect(() => createLockManager({ knex: db.knex, resolveTimeoutMs: LIMITS.maxResolveTimeoutMs + 1 })).toThrow(
      InvalidOptionsError,
    );
  });
});
