import type { Knex } from 'knex';
import { runOnOneConnection, unlessPresent, type AddedInPlace } from './conditional-ddl.js';

/**
 * Version 3: `t_lock_log.mode_changed_at`, when a grant was downgraded from write to read (or
 * upgraded from read to write) in place. `lock_type` holds the mode it has now, so a grant's
 * history reads: the other mode from `create_time`, this one from `mode_changed_at`.
 *
 * Written as plain statements that add the column only when it is missing, so `up` stays
 * idempotent on MySQL (which has no ADD COLUMN IF NOT EXISTS) and sql/schema.sql can carry them.
 */
export const ADDS: AddedInPlace = { kind: 'column', table: 't_lock_log', name: 'mode_changed_at' };

export const STATEMENTS: readonly string[] = unlessPresent(
  ADDS,
  'ALTER TABLE t_lock_log ADD COLUMN mode_changed_at DATETIME(6) NULL DEFAULT NULL',
);

export async function up(knex: Knex): Promise<void> {
  await runOnOneConnection(knex, STATEMENTS);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE t_lock_log DROP COLUMN mode_changed_at');
}
