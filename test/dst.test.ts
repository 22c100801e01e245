// Spring-forward on a server whose zone observes DST (TZ=Europe/Berlin, time_zone=SYSTEM; its
// clock set across the transition with libfaketime): a live grant with a lease is not reaped, and
// its holder still holds it. Negative control: the pre-007 clock (migration 006's acquire routine,
// extension and reaper test, all NOW(6)) reads the same 30-second-old grant as an hour and a half
// minute old, its lease as run out, and reaps it. Migration 007 converts rows written on either
// side of the transition each with the offset then in force.
// covers: src/sql/clock.ts, src/sql/reap.ts, src/admin/migrate.ts
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectKnex, createDatabase } from '../harness/database.js';
import { PROCEDURES as V6 } from '../migrations/006_invoker_routines.js';
import { MIGRATIONS } from '../migrations/index.js';
import { migrate, MIGRATION_TABLE_DDL } from '../src/admin/migrate.js';
import { reapStaleGrants } from '../src/admin/index.js';
import { createLockManager } from '../src/index.js';
import { DB_NOW } from '../src/sql/clock.js';
import { STALE_SQL } from '../src/sql/reap.js';
import { TEST_PROCEDURES } from './support/db.js';
import { startDstServer, type DstServer } from './support/dst-server.js';

/** Europe/Berlin, 2027-03-28: 02:00 CET (UTC+1) becomes 03:00 CEST (UTC+2) at 01:00 UTC. */
const ZONE = 'Europe/Berlin';
const TRANSITION_UTC = Date.UTC(2027, 2, 28, 1, 0, 0);
const CUTOFF_MS = 600_000;
const LEASE_MS = 30 * 60_000;
const PRE_007_STALE = STALE_SQL.replaceAll(DB_NOW, 'NOW(6)');

let server: DstServer;
const knexes: Knex[] = [];

async function rows<T>(k: Knex, sql: string, bindings: readonly unknown[] = []): Promise<T[]> {
  const [result] = (await k.raw(sql, bindings as Knex.RawBinding[])) as unknown as [T[]];
  return result;
}

async function database(name: string): Promise<Knex> {
  await createDatabase(server.url, name);
  const k = connectKnex(server.url, name, { poolMax: 6 });
  knexes.push(k);
  return k;
}

/** The server's clock: UTC, and its local offset now (seconds). */
async function serverClock(k: Knex): Promise<{ utcMs: number; offsetS: number }> {
  const [row] = await rows<{ utc_us: number | string; off: number | string }>(
    k,
    `SELECT TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', ${DB_NOW}) AS utc_us,
            TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), NOW()) AS off`,
  );
  return { utcMs: Number(row!.utc_us) / 1000, offsetS: Number(row!.off) };
}

/** Sets the server's clock and waits until it reads at least `utcMs`. */
async function moveClock(k: Knex, utcMs: number): Promise<void> {
  server.setClock(utcMs);
  await expect
    .poll(async () => (await serverClock(k)).utcMs, { timeout: 10_000, interval: 200 })
    .toBeGreaterThanOrEqual(utcMs);
}

beforeAll(async () => {
  // Two minutes before the transition: time to start and create a grant before it.
  server = await startDstServer(ZONE, TRANSITION_UTC - 120_000);
}, 240_000);

afterAll(async () => {
  await Promise.all(knexes.map((k) => k.destroy()));
  await server?.stop();
});

describe('spring-forward on a server whose zone observes DST', () => {
  it('a live grant with a 30-minute lease is not reaped; the pre-007 clock reaps it', async () => {
    const k = await database(`rwl_dst_${randomBytes(3).toString('hex')}`);
    await migrate(k, { procedures: TEST_PROCEDURES });
    await k.raw('DROP PROCEDURE IF EXISTS rwlock_acquire_v6');
    await k.raw(V6.rwlock_acquire!.replace('CREATE PROCEDURE rwlock_acquire(', 'CREATE PROCEDURE rwlock_acquire_v6('));

    const before = await serverClock(k);
    expect(before.offsetS).toBe(3600); // CET
    const locks = createLockManager({ knex: k });
    const grant = await locks.acquireWrite('dst-live', { waitMs: 0 });
    expect(await grant.extend(LEASE_MS)).toBe(true);
    // The same grant by the pre-007 library: migration 006's routine, its extension statement.
    const [sets] = (await k.raw('CALL rwlock_acquire_v6(?, 0, ?, ?, 0)', [
      Buffer.from('dst-control'),
      'control',
      randomBytes(16),
    ])) as unknown as [[Array<{ id: number }>]];
    const controlId = sets[0]![0]!.id;
    await k.raw(
      'UPDATE t_lock_log SET lease_until = NOW(6) + INTERVAL ? MICROSECOND, version = version + 1 WHERE id = ?',
      [LEASE_MS * 1000, controlId],
    );
    const granted = await serverClock(k);
    expect(granted.utcMs).toBeLessThan(TRANSITION_UTC);

    await moveClock(k, TRANSITION_UTC + 2_000);
    const after = await serverClock(k);
    expect(after.offsetS).toBe(7200); // CEST: the transition happened
    const realAgeMs = after.utcMs - granted.utcMs;

    // The pre-007 reaper's test takes the control grant: about an hour older than it is.
    const [control] = await rows<{ age_s: number | string; stale: number }>(
      k,
      `SELECT TIMESTAMPDIFF(SECOND, create_time, NOW(6)) AS age_s, ${PRE_007_STALE} AS stale FROM t_lock_log WHERE id = ?`,
      [CUTOFF_MS * 1000, controlId],
    );
    expect(Number(control!.stale)).toBe(1);
    expect(Number(control!.age_s) * 1000).toBeGreaterThan(3_600_000 + realAgeMs - 2_000);

    // The reaper of this release: nothing of the live grant is stale.
    const reaped = await reapStaleGrants(k, { staleAfterMs: CUTOFF_MS });
    expect(reaped.grants.map((g) => g.id)).not.toContain(grant.id);
    const listed = (await locks.list()).grants.find((g) => g.id === grant.id)!;
    // Granted after `before` was read: no older than the server's clock since then.
    expect(listed.ageMs).toBeLessThanOrEqual((await serverClock(k)).utcMs - before.utcMs + 1);
    expect(listed.stale).toBe(false);
    expect(listed.leaseUntil!.getTime() - listed.createTime.getTime()).toBeGreaterThanOrEqual(LEASE_MS - 1_000);
    expect(await grant.isLive()).toBe(true);
    expect(await grant.release()).toBe(true);
  }, 180_000);
});

describe('migration 007 on a server whose zone observes DST', () => {
  it('converts rows written on either side of the transition each with its own offset, once', async () => {
    const k = await database(`rwl_dst_conv_${randomBytes(3).toString('hex')}`);
    // The database as the previous release left it: migrations 001 to 006, recorded.
    await k.raw(MIGRATION_TABLE_DDL);
    for (const m of MIGRATIONS.slice(0, 6)) {
      await m.up(k, { procedures: TEST_PROCEDURES });
      await k.raw('INSERT INTO rwlock_migrations (name, batch, migration_time) VALUES (?, 1, CURRENT_TIMESTAMP)', [
        m.name,
      ]);
    }
    // Local times as NOW(6) wrote them: 01:59 CET (00:59 UTC) and 03:01 CEST (01:01 UTC).
    const local = { before: '2027-03-28 01:59:00.250000', after: '2027-03-28 03:01:00.500000' };
    for (const [name, t] of Object.entries(local))
      await k.raw(
        `INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token, released_at, released_by)
         VALUES (?, 0, 2, ?, 1, '', ?, ?, 0)`,
        [Buffer.from(`conv-${name}`), t, randomBytes(16), t],
      );
    const read = async (): Promise<Record<string, string>> =>
      Object.fromEntries(
        (
          await rows<{ r: Buffer; c: string; x: string }>(
            k,
            `SELECT resource_id AS r, DATE_FORMAT(create_time, '%Y-%m-%d %H:%i:%s.%f') AS c,
                    DATE_FORMAT(released_at, '%Y-%m-%d %H:%i:%s.%f') AS x FROM t_lock_log`,
          )
        ).flatMap((row) => [
          [`${row.r.toString()} create`, row.c],
          [`${row.r.toString()} released`, row.x],
        ]),
      );
    expect((await migrate(k, { procedures: TEST_PROCEDURES })).applied).toEqual([
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
    const utc = {
      'conv-before create': '2027-03-28 00:59:00.250000',
      'conv-before released': '2027-03-28 00:59:00.250000',
      'conv-after create': '2027-03-28 01:01:00.500000',
      'conv-after released': '2027-03-28 01:01:00.500000',
    };
    expect(await read()).toEqual(utc);
    // Again, and the repair path that runs every migration's `up` once more: not shifted twice.
    await migrate(k, { procedures: TEST_PROCEDURES });
    await k.raw('ALTER TABLE t_lock_log DROP INDEX ix_lock_log_resource');
    expect((await migrate(k, { procedures: TEST_PROCEDURES })).repaired).toContain('t_lock_log.ix_lock_log_resource');
    expect(await read()).toEqual(utc);
  }, 180_000);
});
