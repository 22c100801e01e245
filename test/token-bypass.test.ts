// No routine releases a grant without its token, and none runs with more rights than its caller:
// the application's user cannot release a grant it does not hold, through the library's release
// statement or any routine in the schema. Negative control: the schema as of migration 005, whose
// definer-rights rwlock_release let a user with EXECUTE alone release any grant by id.
// covers: src/sql/release.ts, src/admin/migrate.ts
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectKnex } from '../harness/database.js';
import * as m006 from '../migrations/006_invoker_routines.js';
import * as m007 from '../migrations/007_utc_times.js';
import * as m008 from '../migrations/008_resource_gate.js';
import * as m010 from '../migrations/010_permits.js';
import { frozen } from '../migrations/index.js';
import { migrate } from '../src/admin/migrate.js';
import { createLockManager } from '../src/index.js';
import { withConnection } from '../src/sql/connection.js';
import { releaseGrant } from '../src/sql/release.js';
import { useTestDatabase } from './support/db.js';
import { invariantViolations } from './support/state.js';

// The routines are the subject: both databases have them whatever the lane.
const current = useTestDatabase(`${import.meta.filename}-current`, { procedures: true });
const at005 = useTestDatabase(`${import.meta.filename}-at005`, { procedures: true });
const suffix = randomBytes(3).toString('hex');
const password = randomBytes(9).toString('hex');
const users: string[] = [];
const clients: Knex[] = [];

async function rows<T>(k: Knex, sql: string, params: unknown[] = []): Promise<T[]> {
  return ((await k.raw(sql, params as Knex.RawBinding[])) as unknown as [T[]])[0];
}

/** The application's privileges with stored procedures (README, Privileges): routines run as the invoker. */
const APP_GRANTS = (db: string, user: string): string[] => [
  `GRANT EXECUTE ON \`${db}\`.* TO '${user}'@'%'`,
  `GRANT SELECT, INSERT, UPDATE ON \`${db}\`.t_lock_log TO '${user}'@'%'`,
  `GRANT SELECT, INSERT, UPDATE ON \`${db}\`.t_read_write_lock TO '${user}'@'%'`,
  `GRANT SELECT, INSERT, UPDATE ON \`${db}\`.t_lock_gate TO '${user}'@'%'`,
];
const EXECUTE_ONLY = (db: string, user: string): string[] => [`GRANT EXECUTE ON \`${db}\`.* TO '${user}'@'%'`];

/** A user with exactly `grants` on the database, and a knex connected as it. */
async function userWith(
  db: ReturnType<typeof useTestDatabase>,
  tag: string,
  grants: (db: string, user: string) => string[],
): Promise<Knex> {
  const user = `rwl_tb_${tag}_${suffix}`;
  await db.knex.raw(`CREATE USER '${user}'@'%' IDENTIFIED BY '${password}'`);
  users.push(user);
  for (const g of grants(db.name, user)) await db.knex.raw(g);
  const url = new URL(db.url);
  url.username = user;
  url.password = password;
  const k = connectKnex(url.toString(), db.name, { poolMax: 4 });
  clients.push(k);
  return k;
}

/** What a CALL of the retired id-only release, naming a grant by id, resource and mode, does. */
async function callIdOnlyRelease(k: Knex, id: number, resource: string): Promise<unknown> {
  return k.raw('CALL rwlock_release(?, ?, 0, 3, 0)', [id, Buffer.from(resource)]).then(
    (r) => (r as unknown as [Array<Array<{ released: number }>>])[0][0]![0]!.released,
    (e: { errno?: number }) => e.errno,
  );
}

async function status(k: Knex, id: number): Promise<number> {
  return Number((await rows<{ status: number }>(k, 'SELECT status FROM t_lock_log WHERE id = ?', [id]))[0]!.status);
}

let app: Knex;
let executeOnly: Knex;
let oldExecuteOnly: Knex;

beforeAll(async () => {
  // migration 005's routines: 016, 010, 008, 007 and 006 undone, and their bookkeeping rows with them.
  await frozen('016_writer_intent_gate').down(at005.knex);
  await m010.down(at005.knex);
  await m008.down(at005.knex);
  await m007.down(at005.knex);
  await m006.down(at005.knex);
  await at005.knex.raw(
    "DELETE FROM rwlock_migrations WHERE name IN ('006_invoker_routines', '007_utc_times', '008_resource_gate', '010_permits', '016_writer_intent_gate')",
  );
  app = await userWith(current, 'app', APP_GRANTS);
  executeOnly = await userWith(current, 'exec', EXECUTE_ONLY);
  oldExecuteOnly = await userWith(at005, 'oldexec', EXECUTE_ONLY);
});

afterAll(async () => {
  await Promise.all(clients.map((k) => k.destroy()));
  for (const u of users) await current.knex.raw(`DROP USER IF EXISTS '${u}'@'%'`);
});

describe('the current schema', () => {
  it('has its routines, rwlock_acquire, rwlock_acquire_group, rwlock_acquire_permit, rwlock_fence_commit and the section begin, take and commit, each with the invoker’s rights', async () => {
    const routines = await rows<{ name: string; security: string }>(
      current.knex,
      'SELECT ROUTINE_NAME AS name, SECURITY_TYPE AS security FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() ORDER BY 1',
    );
    expect(routines).toEqual(
      [
        'rwlock_acquire',
        'rwlock_acquire_group',
        'rwlock_acquire_permit',
        'rwlock_fence_commit',
        'rwlock_section_begin',
        'rwlock_section_begin_bare',
        'rwlock_section_begin_one',
        'rwlock_section_commit',
        'rwlock_section_commit_bare',
        'rwlock_section_commit_one',
        'rwlock_section_take',
      ].map((name) => ({
        name,
        security: 'INVOKER',
      })),
    );
  });

  it('the application role (no SELECT on rwlock_migrations: the schema version is not checked) acquires and releases its own grants, on first use too', async () => {
    const locks = createLockManager({ knex: app, procedures: true });
    for (const mode of ['write', 'read'] as const) {
      const id = `own-${mode}-${randomBytes(4).toString('hex')}`;
      const g = mode === 'write' ? await locks.acquireWrite(id) : await locks.acquireRead(id);
      expect(await locks.withReadLock(`${id}-fenced`, async () => 'ran')).toBe('ran');
      expect(await g.release()).toBe(true);
    }
  });

  it('the application role cannot release a grant whose token it does not hold, by any path', async () => {
    const holder = createLockManager({ knex: current.knex, owner: 'holder' });
    const g = (await holder.tryAcquireWrite('victim'))!;
    // The library's release statement, with the right id, resource and mode but another token.
    for (const token of [randomBytes(16), Buffer.alloc(16)]) {
      expect(
        await withConnection(app, (conn) =>
          releaseGrant(conn, { id: g.id, resource: Buffer.from('victim'), mode: 'write', token }, 'operator'),
        ),
      ).toBe(false);
    }
    // The id-only routine is gone, for this user and for one with EXECUTE alone.
    expect(await callIdOnlyRelease(app, g.id, 'victim')).toBe(1305);
    expect(await callIdOnlyRelease(executeOnly, g.id, 'victim')).toBe(1305);
    // The one routine left acquires; with EXECUTE alone it is refused (no table privilege), so it
    // can neither take a grant it could not release nor reach the tables through the definer.
    const viaAcquire = await executeOnly
      .raw('CALL rwlock_acquire(?, 0, ?, ?, 0)', [Buffer.from('victim-2'), Buffer.from('x'), randomBytes(16)])
      .then(
        () => 'ran',
        (e: { errno?: number }) => e.errno,
      );
    expect(viaAcquire).toBe(1142);
    expect(await status(current.knex, g.id)).toBe(0);
    expect((await holder.inspect('victim')).holders.map((h) => h.id)).toEqual([g.id]);
    expect(await g.release()).toBe(true);
    expect(await invariantViolations(current.knex)).toEqual([]);
  });
});

describe('negative control: the schema as of migration 005', () => {
  it('a user with EXECUTE alone releases any grant by id through rwlock_release; migrate() removes that path', async () => {
    // This version's client refuses a schema that old: the grant is taken as a client of its day did.
    const [sets] = (await at005.knex.raw('CALL rwlock_acquire(?, 0, CONVERT(? USING utf8mb4), ?, 0)', [
      Buffer.from('victim'),
      Buffer.from('holder'),
      randomBytes(16),
    ])) as unknown as [Array<Array<{ id: number }>>];
    const g = { id: Number(sets[0]![0]!.id) };
    expect(await callIdOnlyRelease(oldExecuteOnly, g.id, 'victim')).toBe(1);
    expect(await status(at005.knex, g.id)).toBe(2);
    // No token, and no release note saying who did it.
    expect(await rows(at005.knex, 'SELECT * FROM t_lock_release_note WHERE grant_id = ?', [g.id])).toEqual([]);

    expect(await migrate(at005.knex)).toEqual({
      applied: ['006_invoker_routines', '007_utc_times', '008_resource_gate', '010_permits', '016_writer_intent_gate'],
      repaired: [],
    });
    const holder = createLockManager({ knex: at005.knex, owner: 'holder' });
    const again = (await holder.tryAcquireWrite('victim'))!;
    expect(await callIdOnlyRelease(oldExecuteOnly, again.id, 'victim')).toBe(1305);
    expect(await status(at005.knex, again.id)).toBe(0);
    expect(await again.release()).toBe(true);
  });
});
