import { frozen } from './index.js';

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
 *
 * Its DDL is frozen in migrations/sql/012_section_begin.ts; this module gives it the names it had.
 */
export const { PROCEDURES, up, down } = frozen('012_section_begin');
