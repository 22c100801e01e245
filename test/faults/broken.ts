// Deliberately broken variants of the lock's safety checks, for the negative controls only. Each
// copies one defect the design notes warn about; the checker must catch every one of them.
import type { Knex } from 'knex';
import type { AcquireOptions, Grant, LockManager } from '../../src/index.js';

type Result = [{ affectedRows: number }, unknown];
type Rows<T> = [T[], unknown];

/**
 * Release without the status check (reference defect 5): marks the row released and gives the
 * count back even if the reaper already did, so a late release steals another holder's count.
 */
export async function unguardedRelease(db: Knex, grant: Grant): Promise<void> {
  await db.transaction(async (trx) => {
    await trx.raw(
      `UPDATE t_lock_log SET status = 2, version = version + 1,
              released_at = COALESCE(released_at, UTC_TIMESTAMP(6)), released_by = COALESCE(released_by, 1) WHERE id = ?`,
      [grant.id],
    );
    if (grant.mode === 'write') {
      await trx.raw(
        'UPDATE t_read_write_lock SET w_count = 0, version = version + 1 WHERE w_count = 1 AND resource_id = ?',
        [Buffer.from(grant.resourceId)],
      );
    } else {
      await trx.raw(
        'UPDATE t_read_write_lock SET r_count = r_count - 1, version = version + 1 WHERE r_count > 0 AND resource_id = ?',
        [Buffer.from(grant.resourceId)],
      );
    }
  });
}

/** The reference article's step 4 fence: the business commits only if its grant row is still status 0. */
export async function referenceFence(trx: Knex.Transaction, grant: Grant): Promise<boolean> {
  const [res] = (await trx.raw('UPDATE t_lock_log SET status = 1, version = version + 1 WHERE id = ? AND status = 0', [
    grant.id,
  ])) as unknown as Result;
  return res.affectedRows === 1;
}

/**
 * A reference-style reaper: candidates read first, then each released by id alone, without the
 * status/version check, so a grant its holder released meanwhile has its count given back twice.
 * `delayMs` stands for a slow batch between the read and the updates.
 */
export async function referenceReap(db: Knex, staleAfterMs: number, delayMs: number): Promise<number[]> {
  const [rows] = (await db.raw(
    'SELECT id, resource_id, lock_type FROM t_lock_log WHERE status IN (0, 1) AND create_time < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND',
    [staleAfterMs * 1000],
  )) as unknown as Rows<{ id: number; resource_id: Buffer; lock_type: number }>;
  if (rows.length > 0 && delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
  const reaped: number[] = [];
  for (const row of rows) {
    await db.transaction(async (trx) => {
      const [res] = (await trx.raw(
        `UPDATE t_lock_log SET status = 2, version = version + 1,
                released_at = COALESCE(released_at, UTC_TIMESTAMP(6)), released_by = COALESCE(released_by, 2) WHERE id = ?`,
        [row.id],
      )) as unknown as Result;
      if (res.affectedRows !== 1) return;
      if (row.lock_type === 0)
        await trx.raw('UPDATE t_read_write_lock SET w_count = 0, version = version + 1 WHERE resource_id = ?', [
          row.resource_id,
        ]);
      else
        await trx.raw(
          'UPDATE t_read_write_lock SET r_count = r_count - 1, version = version + 1 WHERE r_count > 0 AND resource_id = ?',
          [row.resource_id],
        );
      reaped.push(Number(row.id));
    });
  }
  return reaped;
}

/**
 * A downgrade in two steps: the write grant released, then a read grant acquired. Between them the
 * resource is free, and a waiting writer can take it; `windowMs` stands for the time between.
 */
export async function splitDowngrade(
  locks: LockManager,
  grant: Grant,
  windowMs: number,
  options: AcquireOptions,
): Promise<Grant> {
  await grant.release();
  await new Promise((r) => setTimeout(r, windowMs));
  return locks.acquireRead(grant.resourceId, options);
}
