import type { Knex } from 'knex';

/**
 * Statements that run `ddl` only when `countSql` (a SELECT COUNT(*) of what the DDL creates, from
 * information_schema) finds nothing: MySQL has no ADD COLUMN / ADD INDEX IF NOT EXISTS, and plain
 * statements can also be written to sql/schema.sql. `ddl` must not contain a single quote.
 */
export function unlessPresent(countSql: string, ddl: string): readonly string[] {
  return [
    `SET @rwlock_ddl = IF((${countSql}) = 0,\n    '${ddl}', 'DO 0')`,
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
