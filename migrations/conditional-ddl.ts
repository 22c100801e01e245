import type { Knex } from 'knex';

/** A column or an index that a migration adds to an existing table (ALTER TABLE), by name. */
export interface AddedInPlace {
  kind: 'column' | 'index';
  table: string;
  name: string;
}

/**
 * An index a table was created with, and the in-place statement that builds it again if it was
 * dropped by hand. Created with the table (CREATE TABLE), so no migration rebuilds it: `migrate`
 * runs `rebuild` when it finds it missing.
 */
export interface CreatedIndex extends AddedInPlace {
  kind: 'index';
  rebuild: string;
}

/** The information_schema count that finds `what`: 0 when it is missing. */
export function presenceCount(what: AddedInPlace): string {
  return what.kind === 'column'
    ? `SELECT COUNT(*) FROM information_schema.COLUMNS
      WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '${what.table}' AND COLUMN_NAME = '${what.name}'`
    : `SELECT COUNT(*) FROM information_schema.STATISTICS
      WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '${what.table}' AND INDEX_NAME = '${what.name}'`;
}

/**
 * Statements that run `ddl`, which adds `what`, only when it is missing: MySQL has no ADD COLUMN /
 * ADD INDEX IF NOT EXISTS, and plain statements can also be written to sql/schema.sql. `ddl` must
 * not contain a single quote.
 */
export function unlessPresent(what: AddedInPlace, ddl: string): readonly string[] {
  return [
    `SET @rwlock_ddl = IF((${presenceCount(what)}) = 0,\n    '${ddl}', 'DO 0')`,
    'PREPARE rwlock_ddl FROM @rwlock_ddl',
    'EXECUTE rwlock_ddl',
    'DEALLOCATE PREPARE rwlock_ddl',
  ];
}

/** Runs `statements` in order on one connection: they share a session variable and a prepared statement. */
export async function runOnOneConnection(knex: Knex, statements: readonly string[]): Promise<void> {
  await knex.transaction(async (trx) => {
    for (const sql of statements) await trx.raw(sql);
  });
}
