// A schema that is not the one this version needs: migrate() notices a procedure left at another
// definition and replaces it; lock managers refuse a database whose migrations stop short of what
// they need, and a column narrowed or a procedure re-signed by hand, with a typed error naming the fix.
// covers: src/sql/schema-version.ts, src/admin/migrate.ts
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Knex } from 'knex';
import { describe, expect, it } from 'vitest';
import * as m001 from '../migrations/001_lock_tables.js';
import * as m002 from '../migrations/002_acquire_v2.js';
import * as m006 from '../migrations/006_invoker_routines.js';
import * as m009 from '../migrations/009_section_take.js';
import * as m012 from '../migrations/012_section_begin.js';
import { CURRENT_PROCEDURES, frozen, MIGRATIONS } from '../migrations/index.js';
import { migrate, normaliseRoutine } from '../src/admin/migrate.js';
import { createLockManager, SchemaMissingError } from '../src/index.js';
import { SchemaOutdatedError } from '../src/errors.js';
import { TEST_PROCEDURES, useTestDatabase } from './support/db.js';
import { invariantViolations } from './support/state.js';

/** Migration 009's to 015's routines, which the file's databases have beside rwlock_acquire. */
const SECTION_PROCEDURES = [
  ...Object.keys(frozen('015_fence_commit').PROCEDURES),
  ...Object.keys(m009.PROCEDURES),
  ...Object.keys(m012.PROCEDURES),
  ...Object.keys(frozen('013_section_one_target').PROCEDURES),
  ...Object.keys(frozen('014_section_history_choice').PROCEDURES),
].sort();

const fresh = useTestDatabase(`${import.meta.filename}-fresh`, { migrate: false });
const procs = useTestDatabase(`${import.meta.filename}-procs`, { procedures: true });
const behind = useTestDatabase(`${import.meta.filename}-behind`, { procedures: true });
const narrowed = useTestDatabase(`${import.meta.filename}-narrowed`);
const plainSql = useTestDatabase(`${import.meta.filename}-plain`, { migrate: false });

/** sql/schema.sql's statements, as the mysql client splits them (DELIMITER lines honoured). */
function schemaStatements(): string[] {
  const out: string[] = [];
  let delimiter = ';';
  let current = '';
  for (const line of readFileSync('sql/schema.sql', 'utf8').split('\n')) {
    const d = /^DELIMITER\s+(\S+)\s*$/.exec(line);
    if (d) {
      delimiter = d[1]!;
      continue;
    }
    if (line.startsWith('--') && current.trim() === '') continue;
    current += `${line}\n`;
    if (current.trimEnd().endsWith(delimiter)) {
      out.push(current.trimEnd().slice(0, -delimiter.length).trim());
      current = '';
    }
  }
  return out;
}

async function rows<T>(k: Knex, sql: string, params: unknown[] = []): Promise<T[]> {
  return ((await k.raw(sql, params as Knex.RawBinding[])) as unknown as [T[]])[0];
}

async function shownAcquire(k: Knex): Promise<string> {
  const [row] = await rows<Record<string, string>>(k, 'SHOW CREATE PROCEDURE rwlock_acquire');
  return row!['Create Procedure']!;
}

async function replaceAcquire(k: Knex, ddl: string): Promise<void> {
  await k.raw('DROP PROCEDURE IF EXISTS rwlock_acquire');
  await k.raw(ddl);
}

/** Readers of never-used ids, 8 at once per id: how many were refused (none should be). */
async function refusedReaders(k: Knex, tag: string): Promise<number> {
  const locks = createLockManager({ knex: k, procedures: true });
  let refused = 0;
  await Promise.all(
    Array.from({ length: 5 }, async (_, i) => {
      const grants = await Promise.all(Array.from({ length: 8 }, () => locks.tryAcquireRead(`${tag}-${i}`)));
      refused += grants.filter((g) => g === null).length;
      await Promise.all(grants.map((g) => g?.release()));
    }),
  );
  return refused;
}

describe('migrate() and the procedures it keeps current', () => {
  it('a fresh migrate applies every migration; the next finds nothing to repair (the server prints the procedure as created)', async () => {
    expect(await migrate(fresh.knex, { procedures: TEST_PROCEDURES })).toEqual({
      applied: MIGRATIONS.map((m) => m.name),
      repaired: [],
    });
    expect(await migrate(fresh.knex, { procedures: TEST_PROCEDURES })).toEqual({ applied: [], repaired: [] });
    if (TEST_PROCEDURES)
      expect(normaliseRoutine(await shownAcquire(fresh.knex))).toBe(
        normaliseRoutine(CURRENT_PROCEDURES.rwlock_acquire!),
      );
  });

  it("rwlock_acquire left at migration 001's body is replaced and listed in `repaired`", async () => {
    await replaceAcquire(procs.knex, m001.PROCEDURES.rwlock_acquire!);
    expect(await migrate(procs.knex)).toEqual({ applied: [], repaired: ['rwlock_acquire'] });
    expect(normaliseRoutine(await shownAcquire(procs.knex))).toBe(normaliseRoutine(CURRENT_PROCEDURES.rwlock_acquire!));
    // The symptom of failure 9: first users of a resource refused. None now.
    expect(await refusedReaders(procs.knex, 'after-repair')).toBe(0);
    expect(await migrate(procs.knex)).toEqual({ applied: [], repaired: [] });
  });

  it("version 2's body (definer rights), a body edited by hand and another signature are each replaced", async () => {
    const variants = [
      m002.PROCEDURES.rwlock_acquire!,
      CURRENT_PROCEDURES.rwlock_acquire!.replace(
        'SELECT v_id AS id, v_busy AS busy, v_mixed AS mixed;',
        'SELECT v_id AS id, v_busy AS busy, v_mixed AS mixed, 1 AS edited;',
      ),
      CURRENT_PROCEDURES.rwlock_acquire!.replace(
        'IN p_intent_ms INT UNSIGNED)',
        'IN p_intent_ms INT UNSIGNED, IN p_extra INT)',
      ),
    ];
    for (const ddl of variants) {
      expect(normaliseRoutine(ddl)).not.toBe(normaliseRoutine(CURRENT_PROCEDURES.rwlock_acquire!));
      await replaceAcquire(procs.knex, ddl);
      expect(await migrate(procs.knex)).toEqual({ applied: [], repaired: ['rwlock_acquire'] });
      expect(normaliseRoutine(await shownAcquire(procs.knex))).toBe(
        normaliseRoutine(CURRENT_PROCEDURES.rwlock_acquire!),
      );
    }
  });

  it('the retired id-only rwlock_release, created again, is dropped and listed', async () => {
    await procs.knex.raw(m001.PROCEDURES.rwlock_release!);
    expect(await migrate(procs.knex)).toEqual({ applied: [], repaired: ['rwlock_release'] });
    const left = await rows<{ n: string }>(
      procs.knex,
      'SELECT ROUTINE_NAME AS n FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() ORDER BY 1',
    );
    expect(left.map((r) => r.n)).toEqual([
      'rwlock_acquire',
      'rwlock_acquire_group',
      'rwlock_acquire_permit',
      ...SECTION_PROCEDURES,
    ]);
  });
});

describe('replacing procedures: one home', () => {
  it('no migration nor migrate() drops and creates a procedure but through replaceProcedures', () => {
    const files = [
      ...readdirSync('migrations').map((f) => join('migrations', f)),
      ...readdirSync('src/admin').map((f) => join('src/admin', f)),
    ].filter((f) => f.endsWith('.ts') && f !== join('migrations', 'procedures.ts'));
    // A DROP PROCEDURE statement whose next statement is not another DROP: a drop-and-create of its own.
    const own = /DROP PROCEDURE IF EXISTS[^\n]*\);\s*\n\s*await \w+\.raw\((?![`'"]DROP)/;
    expect(files.filter((f) => own.test(readFileSync(f, 'utf8')))).toEqual([]);
    // The check finds the loop the migrations used to repeat (negative control).
    const loop =
      'for (const [name, ddl] of Object.entries(PROCEDURES)) {\n    await knex.raw(`DROP PROCEDURE IF EXISTS ${name}`);\n    await knex.raw(ddl);\n  }';
    expect(own.test(loop)).toBe(true);
  });

  it("released migrations install what they did: 002's acquire over 001's, then 006's, which drops the id-only release", async () => {
    await replaceAcquire(procs.knex, m001.PROCEDURES.rwlock_acquire!);
    await procs.knex.raw(m001.PROCEDURES.rwlock_release!);
    await m002.up(procs.knex);
    expect(normaliseRoutine(await shownAcquire(procs.knex))).toBe(normaliseRoutine(m002.PROCEDURES.rwlock_acquire!));
    await m006.up(procs.knex);
    expect(normaliseRoutine(await shownAcquire(procs.knex))).toBe(normaliseRoutine(m006.PROCEDURES.rwlock_acquire!));
    const left = await rows<{ n: string }>(
      procs.knex,
      'SELECT ROUTINE_NAME AS n FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() ORDER BY 1',
    );
    // The permit, section and fence routines are migrations 009's to 015's, from this database's first migrate(), untouched.
    expect(left.map((r) => r.n)).toEqual([
      'rwlock_acquire',
      'rwlock_acquire_group',
      'rwlock_acquire_permit',
      ...SECTION_PROCEDURES,
    ]);
    // 006's down puts back version 5's routines; its up, again, the current ones.
    await m006.down(procs.knex);
    expect(normaliseRoutine(await shownAcquire(procs.knex))).toBe(normaliseRoutine(m002.PROCEDURES.rwlock_acquire!));
    await m006.up(procs.knex);
    // A later migration redefines it: migrate() puts the current definition back, and then has nothing to do.
    await migrate(procs.knex);
    expect(normaliseRoutine(await shownAcquire(procs.knex))).toBe(normaliseRoutine(CURRENT_PROCEDURES.rwlock_acquire!));
    expect(await migrate(procs.knex)).toEqual({ applied: [], repaired: [] });
  });
});

describe('a database older than this version needs', () => {
  it('acquires are refused with SchemaOutdatedError naming migrate() and the missing migrations; nothing is written; migrate() fixes it', async () => {
    // An app upgraded without migrating: the database as migration 001 left it, bookkeeping included.
    await behind.knex.raw("DELETE FROM rwlock_migrations WHERE name <> '001_lock_tables'");
    await replaceAcquire(behind.knex, m001.PROCEDURES.rwlock_acquire!);
    const logged = async (): Promise<number> =>
      Number((await rows<{ n: number }>(behind.knex, 'SELECT COUNT(*) AS n FROM t_lock_log'))[0]!.n);
    const before = await logged();
    const k = behind.connect({ poolMax: 4 });
    for (const procedures of [true, false] as const) {
      const locks = createLockManager({ knex: k, procedures });
      const err = await locks.tryAcquireRead('behind').then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(SchemaOutdatedError);
      expect(err).toBeInstanceOf(SchemaMissingError);
      expect((err as SchemaOutdatedError).code).toBe('ERR_RWLOCK_SCHEMA_MISSING');
      expect((err as Error).message).toMatch(
        /migrations not applied: 002_acquire_v2, 003_mode_changes, 004_release_notes, 005_history_index, 006_invoker_routines, 007_utc_times, 008_resource_gate, 009_section_take, 010_permits\): run migrate\(db\)/,
      );
      await expect(locks.withWriteLock('behind', async () => 'ran')).rejects.toBeInstanceOf(SchemaOutdatedError);
    }
    expect(await logged()).toBe(before);
    expect((await migrate(behind.knex)).applied).toEqual(MIGRATIONS.slice(1).map((m) => m.name));
    // The same knex, checked again now: granted, and every first reader too.
    expect(await createLockManager({ knex: k }).withReadLock('behind', async () => 'ran')).toBe('ran');
    expect(await refusedReaders(k, 'after-migrate')).toBe(0);
    expect(await invariantViolations(behind.knex)).toEqual([]);
  });
});

describe('a schema applied from sql/schema.sql', () => {
  it('records its migrations as migrate() does: migrate() finds nothing to do, and the check works', async () => {
    for (let round = 0; round < 2; round++)
      for (const statement of schemaStatements()) await plainSql.knex.raw(statement);
    const recorded = await rows<{ name: string }>(plainSql.knex, 'SELECT name FROM rwlock_migrations ORDER BY id');
    expect(recorded.map((r) => r.name)).toEqual(MIGRATIONS.map((m) => m.name));
    expect(
      await createLockManager({ knex: plainSql.connect({ poolMax: 2 }) }).withWriteLock('plain', async () => 'ran'),
    ).toBe('ran');
    await plainSql.knex.raw("DELETE FROM rwlock_migrations WHERE name = '003_mode_changes'");
    await expect(
      createLockManager({ knex: plainSql.connect({ poolMax: 2 }) }).tryAcquireWrite('plain'),
    ).rejects.toThrow(/migrations not applied: 003_mode_changes/);
    expect(await migrate(plainSql.knex, { procedures: TEST_PROCEDURES })).toEqual({
      applied: ['003_mode_changes'],
      repaired: [],
    });
    expect(await migrate(plainSql.knex, { procedures: TEST_PROCEDURES })).toEqual({ applied: [], repaired: [] });
  });
});

describe('where the bookkeeping cannot be read', () => {
  it('a schema without rwlock_migrations (applied from an sql/schema.sql older than 006) is not checked: acquires work', async () => {
    await fresh.knex.raw('DROP TABLE IF EXISTS rwlock_migrations');
    const k = fresh.connect({ poolMax: 2 });
    expect(await createLockManager({ knex: k }).withWriteLock('no-bookkeeping', async () => 'ran')).toBe('ran');
    // A user without SELECT on it: test/token-bypass.test.ts acquires as one.
  });
});

describe('objects changed by hand', () => {
  it('a narrowed owner column gives SchemaOutdatedError, not ER_DATA_TOO_LONG, and nothing is granted', async () => {
    await narrowed.knex.raw(
      "ALTER TABLE t_lock_log MODIFY owner VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT ''",
    );
    try {
      const locks = createLockManager({ knex: narrowed.knex, owner: 'an-owner-longer-than-8' });
      const err = await locks.tryAcquireWrite('narrow-owner').then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(SchemaOutdatedError);
      expect((err as Error).message).toMatch(/a column is narrower than migrate\(\) creates it\): run migrate\(db\)/);
      expect(((err as Error).cause as { errno?: number }).errno).toBe(1406);
      expect((await createLockManager({ knex: narrowed.knex }).inspect('narrow-owner')).holders).toEqual([]);
      expect(await invariantViolations(narrowed.knex)).toEqual([]);
    } finally {
      await narrowed.knex.raw(
        "ALTER TABLE t_lock_log MODIFY owner VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT ''",
      );
    }
  });

  it('a narrowed reason column gives SchemaOutdatedError on forceRelease, and the grant stays live', async () => {
    await narrowed.knex.raw(
      'ALTER TABLE t_lock_release_note MODIFY reason VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL DEFAULT NULL',
    );
    try {
      const locks = createLockManager({ knex: narrowed.knex });
      const g = (await locks.tryAcquireWrite('narrow-reason'))!;
      const err = await locks.forceRelease(g.id, { reason: 'a reason longer than eight' }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(SchemaOutdatedError);
      expect((await locks.inspect('narrow-reason')).holders.map((h) => h.id)).toEqual([g.id]);
      expect(await g.release()).toBe(true);
    } finally {
      await narrowed.knex.raw(
        'ALTER TABLE t_lock_release_note MODIFY reason VARCHAR(500) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL DEFAULT NULL',
      );
    }
  });

  it('a procedure with another signature gives SchemaOutdatedError, not ER_SP_WRONG_NO_OF_ARGS; migrate() replaces it', async () => {
    await replaceAcquire(
      procs.knex,
      CURRENT_PROCEDURES.rwlock_acquire!.replace(
        'IN p_intent_ms INT UNSIGNED)',
        'IN p_intent_ms INT UNSIGNED, IN p_extra INT)',
      ),
    );
    const locks = createLockManager({ knex: procs.knex, procedures: true });
    const err = await locks.tryAcquireWrite('resigned').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(SchemaOutdatedError);
    expect((err as Error).message).toMatch(/a procedure takes other parameters than migrate\(\) creates it with/);
    expect(((err as Error).cause as { errno?: number }).errno).toBe(1318);
    expect(await migrate(procs.knex)).toEqual({ applied: [], repaired: ['rwlock_acquire'] });
    const g = (await locks.tryAcquireWrite('resigned'))!;
    expect(await g.release()).toBe(true);
  });
});
