import type { Knex } from 'knex';
import { replaceProcedures } from './procedures.js';

/**
 * Version 12: a one-commit section's BEGIN and take in one call.
 *
 * Since version 9 a section sends its transaction's BEGIN, then one call of `rwlock_section_take`,
 * then the work, then one call in place of the COMMIT: one round trip more than the plain
 * transaction it wraps. `rwlock_section_begin` starts the transaction itself (`START TRANSACTION`,
 * at the isolation level a `SET TRANSACTION` before it named, as a BEGIN would) and runs the take
 * in it, with the take's parameters and reply: the client sends it in place of knex's `BEGIN`
 * (src/lock/section-calls.ts), so that a section is as many round trips as the plain transaction.
 * An error leaves the transaction open, as a failed statement after a BEGIN does; the client rolls
 * it back.
 *
 * Lock managers do not need this version: where the procedure is missing a section sends its BEGIN
 * and its take apart, as version 9 has them.
 */
export const PROCEDURES: Readonly<Record<string, string>> = {
  rwlock_section_begin: `CREATE PROCEDURE rwlock_section_begin(
  IN p_resources BLOB, IN p_kinds VARCHAR(64) CHARACTER SET ascii, IN p_owner VARCHAR(255) CHARACTER SET utf8mb4,
  IN p_tokens VARBINARY(1024), IN p_idle_sec INT UNSIGNED, IN p_lock_wait_sec INT UNSIGNED, IN p_intent_ms INT UNSIGNED)
  SQL SECURITY INVOKER
BEGIN
  START TRANSACTION;
  CALL rwlock_section_take(p_resources, p_kinds, p_owner, p_tokens, p_idle_sec, p_lock_wait_sec, p_intent_ms);
END`,
};

export async function up(knex: Knex, options = { procedures: true }): Promise<void> {
  if (!options.procedures) return;
  await replaceProcedures(knex, PROCEDURES);
}

/** Back to version 11: sections send their BEGIN and their take apart. */
export async function down(knex: Knex): Promise<void> {
  for (const name of Object.keys(PROCEDURES)) await knex.raw(`DROP PROCEDURE IF EXISTS ${name}`);
}
