// Migration 007 converts the rows an earlier release wrote in its sessions' local time to UTC,
// once: a live grant written at time_zone '-10:00' keeps its age (not reaped, its holder still
// holds it). Negative control: the same rows left unconverted read as ten hours old and are
// reaped. (Rows on either side of a DST change: test/dst.test.ts.)
// covers: src/admin/migrate.ts
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { describe, expect, it } from 'vitest';
import { PROCEDURES as V6 } from '../migrations/006_invoker_routines.js';
import { MIGRATIONS } from '../migrations/index.js';
import { migrate, MIGRATION_TABLE_DDL } from '../src/admin/migrate.js';
import { reapStaleGrants } from '../src/admin/index.js';
import { createLockManager } from '../src/index.js';
import { TEST_PROCEDURES, useTestDatabase, type TestDatabase } from './support/db.js';

const ZONE = '-10:00';
const CUTOFF_MS = 60_000;
const converted = useTestDatabase(`${import.meta.filename}-converted`, { migrate: false });
const unconverted = useTestDatabase(`${import.meta.filename}-unconverted`, { migrate: false });
const routineOnly = useTestDatabase(`${import.meta.filename}-routine`, { procedures: true });

async function rows<T>(k: Knex, sql: string, bindings: readonly unknown[] = []): Promise<T[]> {
  const [result] = (await k.raw(sql, bindings as Knex.RawBinding[])) as unknown as [T[]];
  return result;
}

/**
 * The database as the previous release left it (migrations 001 to 006, recorded), with what its
 * statements wrote from sessions at ZONE: a live write grant leased for an hour, a resource row
 * holding it with a writer intent, a released grant with its release note. Returns the live grant.
 */
async function writtenByPreviousRelease(db: TestDatabase, local: Knex): Promise<{ id: number; token: Buffer }> {
  await db.knex.raw(MIGRATION_TABLE_DDL);
  for (const m of MIGRATIONS.slice(0, 6)) {
    await m.up(db.knex, { procedures: TEST_PROCEDURES });
    await db.knex.raw('INSERT INTO rwlock_migrations (name, batch, migration_time) VALUES (?, 1, CURRENT_TIMESTAMP)', [
      m.name,
    ]);
  }
  const token = randomBytes(16);
  await local.raw(
    "INSERT INTO t_read_write_lock (resource_id, w_count, r_count, w_wait_until, version) VALUES ('held', 1, 0, NOW(6) + INTERVAL 1 SECOND, 1)",
  );
  const [live] = (await local.raw(
    `INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, lease_until, version, owner, token)
     VALUES ('held', 0, 0, NOW(6), NOW(6) + INTERVAL 1 HOUR, 1, 'previous', ?)`,
    [token],
  )) as unknown as [{ insertId: number }];
  const [gone] = (await local.raw(
    `INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token, released_at, released_by)
     VALUES ('gone', 0, 2, NOW(6) - INTERVAL 1 MINUTE, 1, 'previous', ?, NOW(6), 1)`,
    [randomBytes(16)],
  )) as unknown as [{ insertId: number }];
  await local.raw('INSERT INTO t_lock_release_note (grant_id, released_at, released_by) VALUES (?, NOW(6), 1)', [
    gone.insertId,
  ]);
  return { id: live.insertId, token };
}

/** How far each time column is from the server's UTC now, to the nearest minute. */
async function minutesFromUtcNow(k: Knex): Promise<number[]> {
  const [r] = await rows<Record<string, number | string>>(
    k,
    `SELECT (SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(6), create_time) FROM t_lock_log WHERE resource_id = 'held') AS c,
            (SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(6), lease_until) FROM t_lock_log WHERE resource_id = 'held') AS l,
            (SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(6), released_at) FROM t_lock_log WHERE resource_id = 'gone') AS x,
            (SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(6), released_at) FROM t_lock_release_note) AS n,
            (SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(6), w_wait_until) FROM t_read_write_lock WHERE resource_id = 'held') AS w`,
  );
  return ['c', 'l', 'x', 'n', 'w'].map((k) => Math.round(Number(r![k]) / 60) + 0);
}

describe('migration 007 converts times written in a session zone', () => {
  it('rows written at -10:00 are shifted to UTC once; the live grant keeps its age and is not reaped', async () => {
    const local = converted.connect({ poolMax: 2, afterCreate: `SET time_zone = '${ZONE}'` });
    const live = await writtenByPreviousRelease(converted, local);
    expect(await minutesFromUtcNow(converted.knex)).toEqual([-600, -540, -600, -600, -600]);

    // Migrated from sessions at the zone the rows were written in, as docs/clock.md says.
    expect((await migrate(local, { procedures: TEST_PROCEDURES })).applied).toEqual([
      '007_utc_times',
      '008_resource_gate',
      '009_section_take',
      '010_permits',
      '011_group_acquire',
      '012_section_begin',
      '013_section_one_target',
      '014_section_history_choice',
      '015_fence_commit',
      '016_writer_intent_gate',
    ]);
    // Each column is now what its local time meant: the lease an hour ahead, everything else now.
    const after = await minutesFromUtcNow(converted.knex);
    expect(after).toEqual([0, 60, 0, 0, 0]);
    // Migrating again, from any zone, converts nothing twice.
    await migrate(converted.knex, { procedures: TEST_PROCEDURES });
    expect(await minutesFromUtcNow(converted.knex)).toEqual(after);

    const reaped = await reapStaleGrants(converted.knex, { staleAfterMs: CUTOFF_MS });
    expect(reaped.grants.map((g) => g.id)).not.toContain(live.id);
    const [holder] = (await createLockManager({ knex: converted.knex }).inspect('held')).holders;
    expect(holder!.id).toBe(live.id);
    expect(holder!.ageMs).toBeLessThan(CUTOFF_MS);
  });

  it('negative control: the same rows left in local time read ten hours old and the live grant is reaped', async () => {
    const local = unconverted.connect({ poolMax: 2, afterCreate: `SET time_zone = '${ZONE}'` });
    const live = await writtenByPreviousRelease(unconverted, local);
    // 007 recorded by hand before migrate(): the conversion is skipped, the routine still replaced.
    await unconverted.knex.raw(
      "INSERT INTO rwlock_migrations (name, batch, migration_time) VALUES ('007_utc_times', 2, CURRENT_TIMESTAMP)",
    );
    await migrate(local, { procedures: TEST_PROCEDURES });
    expect(await minutesFromUtcNow(unconverted.knex)).toEqual([-600, -540, -600, -600, -600]);
    const reaped = await reapStaleGrants(unconverted.knex, { staleAfterMs: CUTOFF_MS });
    expect(reaped.grants.map((g) => g.id)).toContain(live.id);
  });

  it('with `procedures: false`, an acquire routine an earlier migrate() created is still brought to UTC', async () => {
    await routineOnly.knex.raw('DROP PROCEDURE rwlock_acquire');
    await routineOnly.knex.raw(V6.rwlock_acquire!);
    await routineOnly.knex.raw("DELETE FROM rwlock_migrations WHERE name = '007_utc_times'");
    expect((await migrate(routineOnly.knex, { procedures: false })).applied).toEqual(['007_utc_times']);
    const [shown] = await rows<Record<string, string>>(routineOnly.knex, 'SHOW CREATE PROCEDURE rwlock_acquire');
    expect(shown!['Create Procedure']).toContain('UTC_TIMESTAMP(6)');
    expect(shown!['Create Procedure']).not.toMatch(/\bNOW\(/);
  });
});
