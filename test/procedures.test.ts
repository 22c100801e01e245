// Acquiring without stored procedures: migrate({ procedures: false }) creates the tables only, and
// managers acquire with plain statements — 'auto' when it finds no procedure, false always. The
// whole suite also runs this way (RWLOCK_TEST_PROCEDURES=off); this file checks the switch itself.
// covers: src/sql/acquire.ts, src/lock/durable/durable-acquire.ts, src/admin/migrate.ts
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectKnex } from '../harness/database.js';
import { createLockManager, InvalidOptionsError, SchemaMissingError } from '../src/index.js';
import { migrate } from '../src/admin/index.js';
import { useTestDatabase } from './support/db.js';
import { invariantViolations } from './support/state.js';

const without = useTestDatabase(`${import.meta.filename}-without`, { migrate: false });
const withProcedures = useTestDatabase(`${import.meta.filename}-with`, { procedures: true });
const user = `rwl_nx_${randomBytes(3).toString('hex')}`;
const password = randomBytes(9).toString('hex');
let noExecute: Knex;

async function rows<T>(db: Knex, sql: string): Promise<T[]> {
  return ((await db.raw(sql)) as unknown as [T[]])[0];
}

const routines = (db: Knex): Promise<Array<{ name: string }>> =>
  rows(db, 'SELECT ROUTINE_NAME AS name FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE()');

beforeAll(async () => {
  // A runtime user that may not run routines: only plain statements work for it.
  await withProcedures.knex.raw(`CREATE USER '${user}'@'%' IDENTIFIED BY '${password}'`);
  await withProcedures.knex.raw(
    `GRANT SELECT, INSERT, UPDATE ON \`${withProcedures.name}\`.t_lock_log TO '${user}'@'%'`,
  );
  await withProcedures.knex.raw(
    `GRANT SELECT, INSERT, UPDATE ON \`${withProcedures.name}\`.t_read_write_lock TO '${user}'@'%'`,
  );
  await withProcedures.knex.raw(
    `GRANT SELECT, INSERT, UPDATE ON \`${withProcedures.name}\`.t_lock_gate TO '${user}'@'%'`,
  );
  const url = new URL(withProcedures.url);
  url.username = user;
  url.password = password;
  noExecute = connectKnex(url.toString(), withProcedures.name, { poolMax: 4 });
});

afterAll(async () => {
  await noExecute?.destroy();
  await withProcedures.knex.raw(`DROP USER IF EXISTS '${user}'@'%'`);
});

describe('without stored procedures', () => {
  it('migrate({ procedures: false }) creates the tables and no routine, and is idempotent', async () => {
    expect((await migrate(without.knex, { procedures: false })).applied.length).toBeGreaterThan(0);
    expect(await routines(without.knex)).toEqual([]);
    expect(await migrate(without.knex, { procedures: false })).toEqual({ applied: [], repaired: [] });
    const tables = await rows<{ name: string }>(
      without.knex,
      "SELECT TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE 't\\_%' ORDER BY 1",
    );
    expect(tables.map((t) => t.name)).toEqual([
      't_lock_gate',
      't_lock_log',
      't_lock_release_note',
      't_read_write_lock',
    ]);
  });

  it("'auto' acquires with plain statements: readers share, a writer excludes, a fenced write commits", async () => {
    const locks = createLockManager({ knex: without.knex });
    const [r1, r2] = [await locks.acquireRead('auto'), await locks.acquireRead('auto')];
    expect(await locks.tryAcquireWrite('auto')).toBeNull();
    expect(await r1.release()).toBe(true);
    expect(await r2.release()).toBe(true);
    expect(await locks.withWriteLock('auto', async (_trx, g) => g.id)).toBeGreaterThan(0);
    expect((await locks.inspect('auto')).holders).toEqual([]);
    expect(await invariantViolations(without.knex)).toEqual([]);
  });

  it('8 readers of each of 50 never-used ids are all granted, as with the procedure', async () => {
    const locks = createLockManager({ knex: without.knex, procedures: false });
    let refused = 0;
    await Promise.all(
      Array.from({ length: 50 }, async (_, i) => {
        const grants = await Promise.all(Array.from({ length: 8 }, () => locks.tryAcquireRead(`fresh-${i}`)));
        refused += grants.filter((g) => g === null).length;
        await Promise.all(grants.map((g) => g?.release()));
      }),
    );
    expect(refused).toBe(0);
    expect(await invariantViolations(without.knex)).toEqual([]);
  });

  it('a manager that requires the procedure gets SchemaMissingError where there is none', async () => {
    await expect(
      createLockManager({ knex: without.knex, procedures: true }).tryAcquireWrite('required'),
    ).rejects.toBeInstanceOf(SchemaMissingError);
  });

  it('procedures: false never calls one: it works for a user who may not run routines, where the procedure path is refused', async () => {
    expect((await routines(withProcedures.knex)).map((r) => r.name)).toContain('rwlock_acquire');
    const plain = createLockManager({ knex: noExecute, procedures: false });
    const g = await plain.acquireWrite('no-execute');
    expect(await plain.withReadLock('other', async () => 'read')).toBe('read');
    expect(await g.release()).toBe(true);
    // The control: the same user through the procedure is refused (1370, execute command denied).
    await expect(
      createLockManager({ knex: noExecute, procedures: true }).tryAcquireWrite('no-execute'),
    ).rejects.toMatchObject({ code: 'ERR_RWLOCK_PRIVILEGE', cause: { errno: 1370 } });
    expect(await invariantViolations(withProcedures.knex)).toEqual([]);
  });

  it('bad values are refused with InvalidOptionsError before anything runs', async () => {
    for (const procedures of ['yes', 1, null]) {
      expect(() => createLockManager({ knex: without.knex, procedures: procedures as never })).toThrow(
        InvalidOptionsError,
      );
      await expect(migrate(without.knex, { procedures: procedures as never })).rejects.toBeInstanceOf(
        InvalidOptionsError,
      );
    }
  });
});
