// Migration 004_release_notes, frozen: written once by scripts/migrations.ts and never edited again.
// test/unit/migration-texts.test.ts pins this text; a change to the schema is a new migration.
export const TEXT = `-- rwlock:table
CREATE TABLE IF NOT EXISTS t_lock_release_note (
  grant_id    BIGINT UNSIGNED   NOT NULL,
  released_at DATETIME(6)       NOT NULL,
  released_by TINYINT UNSIGNED  NOT NULL,
  releaser    VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
  reason      VARCHAR(500) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL DEFAULT NULL,
  PRIMARY KEY (grant_id),
  KEY ix_release_note_time (released_at)
) ENGINE=InnoDB
-- rwlock:index t_lock_release_note.ix_release_note_time
ALTER TABLE t_lock_release_note ADD KEY ix_release_note_time (released_at), ALGORITHM=INPLACE, LOCK=NONE
-- rwlock:down
DROP TABLE IF EXISTS t_lock_release_note`;
