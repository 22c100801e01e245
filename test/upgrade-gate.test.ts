// tryUpgrade beside a reading section. A reading section holds the resource's gate shared and never
// counts itself in r_count, so the counts alone would let the one durable reader become a writer
// while the section reads: the upgrade takes the gate without waiting, and a held gate refuses it at
// once. Negative control: the upgrade as one guarded UPDATE of the counts (before the gate), which
// the same check catches turning the reader into a writer inside the section.
// covers: src/lock/durable/grant.ts, src/sql/mode.ts
import { describe, expect, it } from 'vitest';
import { createLockManager, type Grant } from '../src/index.js';
import { hex, query, withConnection } from '../src/sql/connection.js';
import { DB_NOW } from '../src/sql/clock.js';
import { LOCK_TYPE, STATUS } from '../src/types.js';
import type { DurableGrant } from '../src/lock/durable/grant.js';
import { useTestDatabase } from './support/db.js';
import { invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);

/** Runs `during` while a reading section holds `id`; the section ends when `during` has. */
async function whileReadSectionHolds<T>(id: string, during: () => Promise<T>): Promise<T> {
  const locks = createLockManager({ knex: db.knex });
  let result!: T;
  await locks.withReadLock(
    id,
    async () => {
      result = await during();
    },
    { section: true },
  );
  return result;
}

/** The upgrade before the gate: the counts decide alone. */
async function upgradeByCountsAlone(grant: Grant): Promise<boolean> {
  const ref = (grant as DurableGrant).ref;
  return withConnection(db.knex, async (conn) => {
    const r = await query<{ affectedRows: number }>(
      conn,
      `UPDATE t_lock_log l JOIN t_read_write_lock r ON r.resource_id = l.resource_id
          SET l.lock_type = ${LOCK_TYPE.write}, l.mode_changed_at = ${DB_NOW}, l.version = l.version + 1,
              r.w_count = 1, r.r_count = 0, r.version = r.version + 1
        WHERE l.id = ? AND l.resource_id = UNHEX(?) AND l.lock_type = ${LOCK_TYPE.read} AND l.status = ${STATUS.live}
          AND l.token = UNHEX(?) AND r.w_count = 0 AND r.r_count = 1`,
      [ref.id, hex(ref.resource), hex(ref.token)],
    );
    return r.affectedRows === 2;
  });
}

describe('tryUpgrade while a reading section runs', () => {
  it('is refused at once, and the reader stays a reader; after the section it upgrades', async () => {
    const locks = createLockManager({ knex: db.knex });
    const reader = await locks.acquireRead('up-gate');
    const during = await whileReadSectionHolds('up-gate', async () => {
      const started = performance.now();
      const upgraded = await reader.tryUpgrade();
      return { upgraded, ms: performance.now() - started, mode: reader.mode };
    });
    expect(during.upgraded).toBeNull();
    expect(during.mode).toBe('read');
    expect(await reader.tryUpgrade()).toBe(reader);
    expect(reader.mode).toBe('write');
    expect(await reader.release()).toBe(true);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('negative control: an upgrade by the counts alone makes the reader a writer inside the section', async () => {
    const locks = createLockManager({ knex: db.knex });
    const reader = await locks.acquireRead('up-gate-control');
    const upgraded = await whileReadSectionHolds('up-gate-control', () => upgradeByCountsAlone(reader));
    expect(upgraded).toBe(true);
    // Put the row back as a reader's, so the grant can be released as one.
    await db.knex.raw(
      `UPDATE t_lock_log l JOIN t_read_write_lock r ON r.resource_id = l.resource_id
          SET l.lock_type = ${LOCK_TYPE.read}, r.w_count = 0, r.r_count = 1 WHERE l.id = ?`,
      [reader.id],
    );
    expect(await reader.release()).toBe(true);
  });
});
