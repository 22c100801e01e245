import type { Knex } from 'knex';
import { runOnOneConnection, unlessPresent, type AddedInPlace } from './conditional-ddl.js';

/**
 * Version 5: `ix_lock_log_resource`, so `history(resourceId)` reads a resource's grants through an
 * index instead of scanning the whole log (seconds at a few million rows, and the log keeps every
 * grant for the retention period). Each grant pays one more index entry at its insert; measured,
 * that is within the run-to-run noise of a lock cycle's server CPU (docs/design.md, Data model).
 *
 * Built in place without blocking the lock's traffic (ALGORITHM=INPLACE, LOCK=NONE: a server that
 * cannot do that refuses the statement rather than locking the table). On Galera the build runs in
 * total order and holds up the cluster's other writes while it lasts: purge the log first, or run
 * it with wsrep_OSU_method=RSU node by node. Added only when missing, so `up` stays idempotent.
 */
export const ADDS: AddedInPlace = { kind: 'index', table: 't_lock_log', name: 'ix_lock_log_resource' };

export const STATEMENTS: readonly string[] = unlessPresent(
  ADDS,
  'ALTER TABLE t_lock_log ADD INDEX ix_lock_log_resource (resource_id), ALGORITHM=INPLACE, LOCK=NONE',
);

export async function up(knex: Knex): Promise<void> {
  await runOnOneConnection(knex, STATEMENTS);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE t_lock_log DROP INDEX ix_lock_log_resource');
}
