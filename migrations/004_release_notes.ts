import type { Knex } from 'knex';
import type { CreatedIndex } from './conditional-ddl.js';

/**
 * Version 4: `t_lock_release_note`, one row per grant released by someone other than its holder
 * (the reaper, an operator): when, by whom (the releasing manager's owner) and why (an operator's
 * reason). It is a table of its own, indexed by release time, rather than columns of `t_lock_log`,
 * so that ordinary grants pay nothing for it (no wider row, no extra index entry per grant) while
 * `stats()` can count the last hour's reaper and operator releases through an index: the log has
 * no index on release time, and a reaped grant's create_time says nothing about when it was reaped.
 * Written in the same transaction as the release it describes.
 */
export const TABLES: readonly string[] = [
  `CREATE TABLE IF NOT EXISTS t_lock_release_note (
  grant_id    BIGINT UNSIGNED   NOT NULL,
  released_at DATETIME(6)       NOT NULL,
  released_by TINYINT UNSIGNED  NOT NULL,
  releaser    VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
  reason      VARCHAR(500) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL DEFAULT NULL,
  PRIMARY KEY (grant_id),
  KEY ix_release_note_time (released_at)
) ENGINE=InnoDB`,
];

/** Its index, for `migrate` to build again if it is dropped: stats() counts the last hour's releases through it. */
export const INDEXES: readonly CreatedIndex[] = [
  {
    kind: 'index',
    table: 't_lock_release_note',
    name: 'ix_release_note_time',
    rebuild: 'ALTER TABLE t_lock_release_note ADD KEY ix_release_note_time (released_at), ALGORITHM=INPLACE, LOCK=NONE',
  },
];

export async function up(knex: Knex): Promise<void> {
  for (const ddl of TABLES) await knex.raw(ddl);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE IF EXISTS t_lock_release_note');
}
