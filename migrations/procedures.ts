import type { Knex } from 'knex';

/**
 * Drops each named procedure where it exists and creates it from its DDL, in order: the one way a
 * migration (or `migrate`'s repair) installs a procedure at a definition. MySQL has no CREATE OR
 * REPLACE PROCEDURE; a CALL in the instant between the two statements fails with "no such
 * procedure" (SchemaMissingError) and changes nothing.
 *
 * `procedures` maps each procedure's name to its full CREATE PROCEDURE statement, as the
 * migrations' `PROCEDURES` exports do: `await replaceProcedures(knex, PROCEDURES)`.
 */
export async function replaceProcedures(knex: Knex, procedures: Readonly<Record<string, string>>): Promise<void> {
  for (const [name, ddl] of Object.entries(procedures)) {
    await knex.raw(`DROP PROCEDURE IF EXISTS ${name}`);
    await knex.raw(ddl);
  }
}
