import type { Knex } from 'knex';
import { replaceProcedures } from './procedures.js';
import { PROCEDURES as V2 } from './002_acquire_v2.js';

/**
 * Version 6: no routine runs with more rights than its caller, and none releases by id alone.
 *
 * - `rwlock_release` (version 1) is dropped. It named a grant by id without its token, the shape
 *   the failover fix removed (a promoted replica hands ids out again), wrote no release note, and,
 *   running with its definer's rights, let any user with EXECUTE on the database release any grant.
 *   No release of this library calls it since version 2.
 * - `rwlock_acquire` keeps version 2's body and parameters, now `SQL SECURITY INVOKER`: its
 *   statements run with the caller's table privileges, so a user with EXECUTE alone is refused
 *   instead of acquiring a grant it could never release, and the privileges a role needs are the
 *   same on the procedure path as on the plain-statement path (plus EXECUTE).
 *
 * The procedure is dropped and created again: a CALL in that instant fails with SchemaMissingError
 * (no procedure) and changes nothing. With `procedures: false` the acquire is left as it is, as for
 * every migration, but the id-only release is still dropped where it exists.
 */
export const PROCEDURES: Readonly<Record<string, string>> = {
  rwlock_acquire: V2.rwlock_acquire!.replace(
    'IN p_token BINARY(16), IN p_intent_ms INT UNSIGNED)\nBEGIN',
    'IN p_token BINARY(16), IN p_intent_ms INT UNSIGNED)\n  SQL SECURITY INVOKER\nBEGIN',
  ),
};
if (PROCEDURES.rwlock_acquire === V2.rwlock_acquire)
  throw new Error('migration 006: the acquire procedure text did not match');

/** Routines earlier migrations created that the current schema must not have. */
export const RETIRED_PROCEDURES: readonly string[] = ['rwlock_release'];

async function exists(knex: Knex, name: string): Promise<boolean> {
  const [rows] = (await knex.raw(
    "SELECT COUNT(*) AS n FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_TYPE = 'PROCEDURE' AND ROUTINE_NAME = ?",
    [name],
  )) as unknown as [Array<{ n: number | string }>];
  return Number(rows[0]?.n) > 0;
}

export async function up(knex: Knex, options = { procedures: true }): Promise<void> {
  // Looked up first: with `procedures: false` the migrating user may lack ALTER ROUTINE.
  for (const name of RETIRED_PROCEDURES)
    if (await exists(knex, name)) await knex.raw(`DROP PROCEDURE IF EXISTS ${name}`);
  if (!options.procedures) return;
  await replaceProcedures(knex, PROCEDURES);
}

/** Back to version 5's routines: the definer-rights acquire and the id-only release. */
export async function down(knex: Knex): Promise<void> {
  const v1 = await import('./001_lock_tables.js');
  await replaceProcedures(knex, { rwlock_acquire: V2.rwlock_acquire!, rwlock_release: v1.PROCEDURES.rwlock_release! });
}
