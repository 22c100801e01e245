import type { Knex } from 'knex';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  presenceCount,
  runOnOneConnection,
  unlessPresent,
  type AddedInPlace,
} from '../../migrations/conditional-ddl.js';
import {
  ADDED_IN_PLACE,
  CREATED_INDEXES,
  CURRENT_PROCEDURES,
  CURRENT_TABLES,
  MIGRATION_TABLE,
  MIGRATIONS,
  RETIRED_PROCEDURES,
  type MigrationOptions,
} from '../../migrations/index.js';
import { replaceProcedures } from '../../migrations/procedures.js';
import { DatabaseUnreachableError, InvalidOptionsError, MigrationLockedError, RwLockError } from '../errors.js';
import { isRefusedAtConnect } from '../sql/unreachable.js';
import { privilegeError } from '../sql/connection.js';
import { DEFAULTS, integerOption, knexOption, LIMITS, optionsObject, keysOf } from '../options.js';

/** Migration bookkeeping tables, kept apart from the application's own knex_migrations. */
const LOCK_TABLE = `${MIGRATION_TABLE}_lock`;

export interface MigrateOptions {
  /** How long to wait for another process that holds the migration lock. @defaultValue `DEFAULTS.migrate.waitMs` */
  waitMs?: number;
  /**
   * false: create the tables only, no stored procedures (TiDB, Vitess, PlanetScale, or a policy
   * against routines); lock managers then acquire with plain statements. Procedures an earlier
   * migrate() created are left as they are, but for an `rwlock_acquire` that still writes local
   * times, which migration 007 replaces where it exists (the user then needs the routine privileges). @defaultValue `DEFAULTS.migrate.procedures`
   */
  procedures?: boolean;
}

export interface MigrateResult {
  /** Migrations applied by this call, in order. */
  applied: string[];
  /**
   * Objects that were missing although their migration had run (dropped by hand), now recreated;
   * procedures whose definition was not the current one (left at an earlier version, or changed by
   * hand), now replaced; and procedures a later migration dropped that were found again, now dropped.
   */
  repaired: string[];
}

async function rows<T>(db: Knex, sql: string, bindings: readonly (string | number)[] = []): Promise<T[]> {
  const [result] = (await db.raw(sql, bindings)) as unknown as [T[]];
  return result;
}

/** The table of applied migrations; sql/schema.sql creates and fills it too, so lock managers can check it. */
export const MIGRATION_TABLE_DDL = `CREATE TABLE IF NOT EXISTS ${MIGRATION_TABLE} (
    id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, name VARCHAR(255), batch INT, migration_time TIMESTAMP NULL)`;

/**
 * The bookkeeping tables, in the layout knex's migrator uses (so existing databases keep their
 * history), created race-free: CREATE ... IF NOT EXISTS and an idempotent lock row.
 */
async function ensureBookkeeping(db: Knex): Promise<void> {
  await db.raw(MIGRATION_TABLE_DDL);
  await db.raw(`CREATE TABLE IF NOT EXISTS ${LOCK_TABLE} (
    \`index\` INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, is_locked INT)`);
  await db.raw(
    `INSERT INTO ${LOCK_TABLE} (\`index\`, is_locked) VALUES (1, 0) ON DUPLICATE KEY UPDATE \`index\` = \`index\``,
  );
}

/** Takes the migration lock: one guarded UPDATE, so exactly one process wins. */
async function tryLock(db: Knex): Promise<boolean> {
  const [result] = (await db.raw(
    `UPDATE ${LOCK_TABLE} SET is_locked = 1 WHERE \`index\` = 1 AND is_locked = 0`,
  )) as unknown as [{ affectedRows: number }];
  return result.affectedRows === 1;
}

async function unlock(db: Knex): Promise<void> {
  await db.raw(`UPDATE ${LOCK_TABLE} SET is_locked = 0 WHERE \`index\` = 1`);
}

/**
 * Names of the schema's tables, their indexes, the columns and indexes migrations added to them in
 * place, and (when asked for) procedures that this database lacks: what running every migration
 * again, then the missing indexes' rebuilds, restores.
 */
async function missingObjects(db: Knex, options: MigrationOptions): Promise<string[]> {
  const tables = new Set(
    (
      await rows<{ name: string }>(
        db,
        'SELECT TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()',
      )
    ).map((r) => r.name),
  );
  const procedures = new Set(
    (
      await rows<{ name: string }>(
        db,
        "SELECT ROUTINE_NAME AS name FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_TYPE = 'PROCEDURE'",
      )
    ).map((r) => r.name),
  );
  const expectedTables = CURRENT_TABLES.map((ddl) => /CREATE TABLE IF NOT EXISTS (\w+)/.exec(ddl)![1]!);
  const expectedProcedures = options.procedures ? Object.keys(CURRENT_PROCEDURES) : [];
  const missingTables = expectedTables.filter((t) => !tables.has(t));
  const missingParts: string[] = [];
  for (const part of [...CREATED_INDEXES, ...ADDED_IN_PLACE]) {
    if (missingTables.includes(part.table)) continue; // rebuilt with its table
    if (!(await isPresent(db, part))) missingParts.push(`${part.table}.${part.name}`);
  }
  return [...missingTables, ...missingParts, ...expectedProcedures.filter((p) => !procedures.has(p))];
}

async function isPresent(db: Knex, part: AddedInPlace): Promise<boolean> {
  const [row] = await rows<{ n: number | string }>(db, `SELECT (${presenceCount(part)}) AS n`);
  return Number(row?.n) > 0;
}

/**
 * A procedure's definition in a form two servers print alike: no DEFINER clause, no quotes around
 * the name, no line comments, whitespace collapsed (MySQL and MariaDB print the characteristics on
 * a line of their own). What SHOW CREATE PROCEDURE prints compares equal to the migration's text
 * exactly when the server holds that text.
 */
export function normaliseRoutine(ddl: string): string {
  return ddl
    .replace(/^\s*CREATE\s+DEFINER\s*=\s*(?:`[^`]*`|'[^']*'|[^\s@]+)(?:@(?:`[^`]*`|'[^']*'|\S+))?\s+/i, 'CREATE ')
    .replace(/^(CREATE\s+PROCEDURE\s+)`([^`]+)`/i, '$1$2')
    .replace(/--[^\n]*/g, ' ')
    .replace(/\s+/g, ' ')
    .replace(/ ?([(),;]) ?/g, '$1')
    .trim();
}

/**
 * Current procedures present with another definition than the current migration's: an earlier
 * version's body (a database restored from before a migration, or an app that ran an old release's
 * migrations since), another signature, or a hand edit. A definition this user may not read (SHOW
 * CREATE PROCEDURE prints it to its definer and to holders of SHOW_ROUTINE or SELECT on the
 * routine tables only) is left as it is, rather than replaced under live traffic on a guess.
 */
async function staleProcedures(db: Knex, skip: readonly string[]): Promise<string[]> {
  const stale: string[] = [];
  for (const [name, ddl] of Object.entries(CURRENT_PROCEDURES)) {
    if (skip.includes(name)) continue;
    const shown = await rows<Record<string, string | null>>(db, `SHOW CREATE PROCEDURE ${name}`).catch(() => []);
    const text = shown[0]?.['Create Procedure'];
    if (typeof text === 'string' && normaliseRoutine(text) !== normaliseRoutine(ddl)) stale.push(name);
  }
  return stale;
}

/** Retired procedures that exist again (recreated by an older release's migrate(), or by hand). */
async function retiredPresent(db: Knex): Promise<string[]> {
  if (RETIRED_PROCEDURES.length === 0) return [];
  const present = await rows<{ name: string }>(
    db,
    `SELECT ROUTINE_NAME AS name FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_TYPE = 'PROCEDURE'
          AND ROUTINE_NAME IN (${RETIRED_PROCEDURES.map(() => '?').join(', ')})`,
    RETIRED_PROCEDURES,
  );
  return present.map((r) => r.name);
}

/** Under the lock: applies what has not run, and rebuilds objects dropped since. */
async function migrateLocked(db: Knex, options: MigrationOptions): Promise<MigrateResult> {
  const done = new Set((await rows<{ name: string }>(db, `SELECT name FROM ${MIGRATION_TABLE}`)).map((r) => r.name));
  const pending = MIGRATIONS.filter((m) => !done.has(m.name));
  const [{ batch } = { batch: 0 }] = await rows<{ batch: number | null }>(
    db,
    `SELECT COALESCE(MAX(batch), 0) AS batch FROM ${MIGRATION_TABLE}`,
  );
  const record = { table: MIGRATION_TABLE, batch: Number(batch) + 1 };
  for (const m of pending) {
    await m.up(db, { ...options, record });
    // A migration that converts rows has recorded itself with them, in one transaction.
    await db.raw(
      `INSERT INTO ${MIGRATION_TABLE} (name, batch, migration_time) SELECT ?, ?, CURRENT_TIMESTAMP FROM DUAL
        WHERE NOT EXISTS (SELECT 1 FROM ${MIGRATION_TABLE} WHERE name = ?)`,
      [m.name, record.batch, m.name],
    );
  }
  const missing = await missingObjects(db, options);
  const stale = options.procedures ? await staleProcedures(db, missing) : [];
  const retired = await retiredPresent(db);
  // Every migration's `up` is idempotent, so running them all in order rebuilds exactly what is
  // missing but the indexes a CREATE TABLE made, which are built again only when missing. The
  // last migrations leave every procedure at its current definition and drop the retired ones.
  if (missing.length > 0) {
    for (const m of MIGRATIONS) await m.up(db, { ...options, record });
    for (const index of CREATED_INDEXES) await runOnOneConnection(db, unlessPresent(index, index.rebuild));
  } else {
    await replaceProcedures(db, Object.fromEntries(stale.map((name) => [name, CURRENT_PROCEDURES[name]!])));
    for (const name of retired) await db.raw(`DROP PROCEDURE IF EXISTS ${name}`);
  }
  return { applied: pending.map((m) => m.name), repaired: [...missing, ...stale, ...retired] };
}

/**
 * Creates or updates the lock tables and procedures, and recreates any that were dropped since.
 * Idempotent, and safe when several processes run it at once: one takes the migration lock (a row
 * in `rwlock_migrations_lock`), the others wait for it and then find nothing left to do.
 *
 * @example
 * ```ts
 * import knex from 'knex';
 * import { migrate } from 'mysql-rwlock/admin';
 *
 * const db = knex({ client: 'mysql2', connection: process.env.MYSQL_URL! });
 * const { applied, repaired } = await migrate(db);
 * console.log(`applied ${applied.join(', ') || 'nothing'}; rebuilt ${repaired.join(', ') || 'nothing'}`);
 * await db.destroy();
 * ```
 */
export function migrate(db: Knex, options?: MigrateOptions): Promise<MigrateResult> {
  // migrate() sends its DDL through knex, not the library's query(): its refusals are typed here.
  return migrateChecked(db, options).catch((err: unknown) => {
    // No connection could be had for a statement: it was not sent (those before it were applied,
    // and migrate() picks up where it stopped).
    if (!(err instanceof RwLockError) && isRefusedAtConnect(err))
      throw new DatabaseUnreachableError('migrate', err, 'that statement was not sent; run migrate() again');
    throw privilegeError(err, 'migrate') ?? err;
  });
}

async function migrateChecked(db: Knex, options?: MigrateOptions): Promise<MigrateResult> {
  knexOption('db', db);
  const o = optionsObject('migrate', options, keysOf<MigrateOptions>()(['waitMs', 'procedures']));
  const waitMs = integerOption('waitMs', o.waitMs ?? DEFAULTS.migrate.waitMs, 0, LIMITS.maxTimerMs);
  if (o.procedures !== undefined && typeof o.procedures !== 'boolean') {
    throw new InvalidOptionsError(`procedures must be true or false, got ${typeof o.procedures}`);
  }
  const what: MigrationOptions = { procedures: o.procedures ?? DEFAULTS.migrate.procedures };
  const deadline = performance.now() + waitMs;
  await ensureBookkeeping(db);
  for (let n = 0; ; n++) {
    if (await tryLock(db)) {
      try {
        return await migrateLocked(db, what);
      } finally {
        await unlock(db);
      }
    }
    if (performance.now() >= deadline) {
      throw new MigrationLockedError(
        `migrate: ${LOCK_TABLE} stayed locked for ${waitMs} ms. If no migrate() is running, one crashed holding it: ` +
          `run UPDATE ${LOCK_TABLE} SET is_locked = 0, then migrate() again`,
      );
    }
    await sleep(Math.min(1000, 20 * 2 ** n) * (0.5 + Math.random()));
  }
}
