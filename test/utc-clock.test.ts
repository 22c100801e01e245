// One clock whatever the session's time zone: every time the library writes or compares is the
// server's UTC, so an application pool whose sessions run at another `time_zone` than the
// reaper's moves no grant's age. Negative control: the same sessions with the pre-007 clock
// (NOW(6), the session's local time: migration 006's acquire routine and reaper test) reap a fresh
// grant, keep a crashed holder's, and leave a writer's intent in the readers' future.
// covers: src/sql/clock.ts, src/sql/reap.ts
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import knexFactory, { type Knex } from 'knex';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseMysqlUrl } from '../harness/database.js';
import { createLockManager, LockTimeoutError } from '../src/index.js';
import { reapStaleGrants } from '../src/admin/index.js';
import { CURRENT_PROCEDURES } from '../migrations/index.js';
import { PROCEDURES as V6 } from '../migrations/006_invoker_routines.js';
import { DB_NOW } from '../src/sql/clock.js';
import { STALE_SQL } from '../src/sql/reap.js';
import { useTestDatabase } from './support/db.js';
import { backdate } from './support/state.js';

const db = useTestDatabase(import.meta.filename);
/** The reaper's test as it was before migration 007: the session's local time. */
const PRE_007_STALE = STALE_SQL.replaceAll(DB_NOW, 'NOW(6)');
const CUTOFF_MS = 60_000;
const CRASHED_AGE_MS = 120_000;

async function rows<T>(k: Knex, sql: string, bindings: readonly unknown[] = []): Promise<T[]> {
  const [result] = (await k.raw(sql, bindings as Knex.RawBinding[])) as unknown as [T[]];
  return result;
}

function zoned(zone: string, poolMax = 4): Knex {
  return db.connect({ poolMax, afterCreate: `SET time_zone = '${zone}'` });
}

describe('the library speaks one clock', () => {
  it('no statement or routine of the library reads a local clock: each uses DB_NOW', () => {
    const files = (dir: string): string[] =>
      readdirSync(dir).flatMap((name) => {
        const path = join(dir, name);
        return statSync(path).isDirectory() ? files(path) : path.endsWith('.ts') ? [path] : [];
      });
    // The one local reading left is DB_ROW_NOW's elapsed time within a statement (src/sql/clock.ts).
    const LOCAL = /(?<![.\w])(NOW|SYSDATE|CURDATE|CURTIME|LOCALTIME|LOCALTIMESTAMP|CURRENT_TIMESTAMP)\s*\(/;
    const offenders = [...files('src'), 'jobs/reaper.ts']
      .filter((f) => f !== join('src', 'sql', 'clock.ts'))
      .filter((f) => LOCAL.test(readFileSync(f, 'utf8')));
    expect(offenders).toEqual([]);
    for (const [name, ddl] of Object.entries(CURRENT_PROCEDURES)) {
      expect(ddl).not.toMatch(LOCAL);
      // rwlock_section_begin reads no clock itself: the take it calls does. rwlock_section_commit_bare
      // only commits: a section without history writes no time.
      if (name === 'rwlock_section_begin') expect(ddl).toContain('CALL rwlock_section_take(');
      else if (name === 'rwlock_section_commit_bare') expect(ddl).not.toMatch(/t_lock_log|t_read_write_lock/);
      else expect(ddl).toContain(DB_NOW);
    }
  });
});

// [application sessions' zone, reaper's zone]: 10 h either side, each way round.
const PAIRS = [
  ['+10:00', '+00:00'],
  ['-10:00', '+00:00'],
  ['+00:00', '+10:00'],
  ['+00:00', '-10:00'],
] as const;

describe.each(PAIRS)('application sessions at %s, the reaper at %s', (appZone, reaperZone) => {
  let app: Knex;
  let reaper: Knex;
  beforeAll(() => {
    app = zoned(appZone);
    reaper = zoned(reaperZone, 2);
  });

  it('no fresh or extended grant is reaped; a crashed holder is reaped past the cutoff, at its age', async () => {
    const started = performance.now();
    const tag = `${appZone}/${reaperZone}`;
    const locks = createLockManager({ knex: app });
    const fresh = await locks.acquireWrite(`fresh ${tag}`, { waitMs: 0 });
    const leased = await locks.acquireWrite(`leased ${tag}`, { waitMs: 0 });
    expect(await leased.extend(3_600_000)).toBe(true);
    // Older than the cutoff, kept by its lease.
    await backdate(db.knex, leased.id, CRASHED_AGE_MS);
    const crashed = await locks.acquireWrite(`crashed ${tag}`, { waitMs: 0 });
    await backdate(db.knex, crashed.id, CRASHED_AGE_MS);

    const result = await reapStaleGrants(reaper, { staleAfterMs: CUTOFF_MS });
    const elapsedMs = performance.now() - started;
    expect(result.grants.map((g) => g.id)).toEqual([crashed.id]);
    expect(result.grants[0]!.ageMs).toBeGreaterThanOrEqual(CRASHED_AGE_MS);
    expect(result.grants[0]!.ageMs).toBeLessThan(CRASHED_AGE_MS + elapsedMs + 1);
    // The reaper's createTime is the grant's instant, whatever either session's zone.
    expect(Math.abs(result.grants[0]!.createTime.getTime() + CRASHED_AGE_MS - Date.now())).toBeLessThan(
      elapsedMs + 1_000,
    );
    expect(await fresh.isLive()).toBe(true);
    expect(await leased.isLive()).toBe(true);
    expect(await crashed.isLive()).toBe(false);

    // What the operator API shows from the reaper's zone agrees.
    const { grants } = await createLockManager({ knex: reaper, staleAfterMs: CUTOFF_MS }).list({
      resourcePrefix: 'fresh ',
    });
    const listed = grants.find((g) => g.id === fresh.id)!;
    expect(listed.stale).toBe(false);
    expect(listed.ageMs).toBeGreaterThanOrEqual(0);
    expect(listed.ageMs).toBeLessThan(performance.now() - started + 1);
    expect(await fresh.release()).toBe(true);
    expect(await leased.release()).toBe(true);
  });

  it('a writer that gives up leaves its intent for writerIntentMs on the database clock, not in the readers’ future', async () => {
    const tag = `intent ${appZone}/${reaperZone}`;
    const intentMs = 1_000;
    const readers = createLockManager({ knex: reaper });
    const held = await readers.acquireRead(tag, { waitMs: 0 });
    const writer = createLockManager({ knex: app, writerIntentMs: intentMs });
    await expect(writer.acquireWrite(tag, { waitMs: 200 })).rejects.toBeInstanceOf(LockTimeoutError);
    const [mark] = await rows<{ ahead_us: number | string }>(
      reaper,
      `SELECT TIMESTAMPDIFF(MICROSECOND, ${DB_NOW}, w_wait_until) AS ahead_us FROM t_read_write_lock WHERE resource_id = ?`,
      [Buffer.from(tag)],
    );
    expect(Number(mark!.ahead_us)).toBeLessThanOrEqual(intentMs * 1000);
    // A new reader from the other zone gets in once the intent has run out.
    await expect
      .poll(async () => (await readers.tryAcquireRead(tag))?.release(), { timeout: intentMs + 10_000, interval: 100 })
      .toBe(true);
    expect(await held.release()).toBe(true);
  });

  it('a pool whose mysql2 `timezone` differs reads the same instants (history, inspect)', async () => {
    const before = Date.now();
    const locks = createLockManager({ knex: app });
    const g = await locks.acquireWrite(`instant ${appZone}/${reaperZone}`, { waitMs: 0 });
    const after = Date.now();
    const other = knexFactory({
      client: 'mysql2',
      connection: { ...parseMysqlUrl(db.url), database: db.name, timezone: '-07:00', dateStrings: true },
      pool: {
        min: 0,
        max: 1,
        afterCreate: (
          conn: { query(sql: string, cb: (err: Error | null) => void): void },
          done: (e: Error | null, c: unknown) => void,
        ) => conn.query(`SET time_zone = '${reaperZone}'`, (err) => done(err, conn)),
      },
    });
    try {
      const viewer = createLockManager({ knex: other });
      const [entry] = (await viewer.history(g.resourceId, { limit: 1 })).grants;
      const [holder] = (await viewer.inspect(g.resourceId)).holders;
      for (const t of [entry!.createTime, holder!.createTime]) {
        expect(t).toBeInstanceOf(Date);
        // The server and this process read one system clock; a millisecond of rounding either side.
        expect(t.getTime()).toBeGreaterThanOrEqual(before - 1);
        expect(t.getTime()).toBeLessThanOrEqual(after + 1);
      }
    } finally {
      await other.destroy();
    }
    expect(await g.release()).toBe(true);
  });
});

describe('negative control: the pre-007 clock (NOW(6)) in the same sessions', () => {
  let app: Knex;
  let reaper: Knex;
  const callOld = async (k: Knex, resource: string, mode: 0 | 1, intentMs = 0): Promise<number | null> => {
    const [sets] = (await k.raw('CALL rwlock_acquire_v6(?, ?, ?, ?, ?)', [
      Buffer.from(resource),
      mode,
      'control',
      randomBytes(16),
      intentMs,
    ])) as unknown as [[Array<{ id: number | null }>]];
    return sets[0]![0]!.id;
  };
  const staleBefore007 = async (id: number): Promise<boolean> =>
    (
      await rows<{ id: number }>(reaper, `SELECT id FROM t_lock_log WHERE id = ? AND status = 0 AND ${PRE_007_STALE}`, [
        id,
        CUTOFF_MS * 1000,
      ])
    ).length === 1;

  beforeAll(async () => {
    // Migration 006's routine under another name, beside the current one.
    await db.knex.raw('DROP PROCEDURE IF EXISTS rwlock_acquire_v6');
    await db.knex.raw(
      V6.rwlock_acquire!.replace('CREATE PROCEDURE rwlock_acquire(', 'CREATE PROCEDURE rwlock_acquire_v6('),
    );
    app = zoned('-10:00');
    reaper = zoned('+00:00', 2);
  });

  it('a fresh grant from sessions 10 h behind is stale to the reaper; the current clock says not', async () => {
    const id = (await callOld(app, 'control fresh', 0))!;
    expect(await staleBefore007(id)).toBe(true);
    const current = await createLockManager({ knex: app }).acquireWrite('control fresh current', { waitMs: 0 });
    const [row] = await rows<{ stale: number }>(reaper, `SELECT ${STALE_SQL} AS stale FROM t_lock_log WHERE id = ?`, [
      CUTOFF_MS * 1000,
      current.id,
    ]);
    expect(Number(row!.stale)).toBe(0);
    expect(await current.release()).toBe(true);
  });

  it('a crashed holder’s grant from sessions 10 h ahead is not stale to the reaper', async () => {
    const ahead = zoned('+10:00');
    const id = (await callOld(ahead, 'control crashed', 0))!;
    await backdate(db.knex, id, CRASHED_AGE_MS);
    expect(await staleBefore007(id)).toBe(false);
  });

  it('a writer 10 h ahead leaves its intent 10 h in the readers’ future', async () => {
    const ahead = zoned('+10:00');
    const resource = 'control intent';
    expect(await callOld(reaper, resource, 1)).not.toBeNull();
    expect(await callOld(ahead, resource, 0, 1_000)).toBeNull();
    const [mark] = await rows<{ ahead_us: number | string }>(
      reaper,
      'SELECT TIMESTAMPDIFF(MICROSECOND, NOW(6), w_wait_until) AS ahead_us FROM t_read_write_lock WHERE resource_id = ?',
      [Buffer.from(resource)],
    );
    expect(Number(mark!.ahead_us)).toBeGreaterThan(9 * 3_600_000_000);
  });
});
