import type { Knex } from 'knex';
import { setTimeout as sleep } from 'node:timers/promises';
import { MIGRATIONS, type Migration } from '../migrations/index.js';
import { InvalidOptionsError } from './errors.js';
import { checkKnownKeys, integerOption } from './options.js';

/** Migration bookkeeping tables, kept apart from the application's own knex_migrations. */
export const MIGRATION_TABLE = 'rwlock_migrations';

export interface MigrateOptions {
  /** How long to wait for another process that holds the migration lock. @defaultValue 60000 */
  waitMs?: number;
}

const source: Knex.MigrationSource<Migration> = {
  getMigrations: async () => [...MIGRATIONS],
  getMigrationName: (m) => m.name,
  getMigration: async (m) => m,
};

/** Matches the errors of two migrators racing: knex's lock, and both creating its tables. */
function isRace(err: unknown): boolean {
  const e = err as { name?: string; message?: string; errno?: number };
  return e?.name === 'MigrationLocked' || /already locked/i.test(e?.message ?? '') || e?.errno === 1050 || e?.errno === 1062;
}

/**
 * Creates knex's bookkeeping tables the way knex would, but race-free: knex checks for them and
 * then creates them, so two processes starting together can both insert a lock row, after which
 * neither can ever take the migration lock.
 */
async function ensureBookkeeping(db: Knex): Promise<void> {
  await db.raw(`CREATE TABLE IF NOT EXISTS ${MIGRATION_TABLE} (
    id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, name VARCHAR(255), batch INT, migration_time TIMESTAMP NULL)`);
  await db.raw(`CREATE TABLE IF NOT EXISTS ${MIGRATION_TABLE}_lock (
    \`index\` INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, is_locked INT)`);
  await db.raw(`INSERT INTO ${MIGRATION_TABLE}_lock (\`index\`, is_locked) VALUES (1, 0) ON DUPLICATE KEY UPDATE \`index\` = \`index\``);
}

/**
 * Creates or updates the lock tables and procedures. Idempotent, and safe when several processes
 * run it at once: the loser of knex's migration lock waits and retries until the winner is done.
 */
export async function migrate(db: Knex, options: MigrateOptions = {}): Promise<{ applied: string[] }> {
  if (typeof options !== 'object' || options === null) throw new InvalidOptionsError('options of migrate must be an object');
  checkKnownKeys('migrate', options, ['waitMs']);
  const waitMs = integerOption('waitMs', options.waitMs ?? 60_000, 0);
  const deadline = Date.now() + waitMs;
  await ensureBookkeeping(db);
  for (let attempt = 0; ; attempt++) {
    try {
      const [, applied] = (await db.migrate.latest({ migrationSource: source, tableName: MIGRATION_TABLE })) as [number, string[]];
      return { applied };
    } catch (err) {
      if (!isRace(err) || Date.now() >= deadline) {
        if (isRace(err)) {
          throw new Error(
            `migrate: ${MIGRATION_TABLE}_lock stayed locked for ${waitMs} ms; if no migration is running, a crashed one left it: ` +
              `UPDATE ${MIGRATION_TABLE}_lock SET is_locked = 0`,
            { cause: err },
          );
        }
        throw err;
      }
      await sleep(Math.min(1000, 20 * 2 ** attempt) * (0.5 + Math.random()));
    }
  }
}
