// Migration 003_mode_changes, frozen: written once by scripts/migrations.ts and never edited again.
// test/unit/migration-texts.test.ts pins this text; a change to the schema is a new migration.
export const TEXT = `-- rwlock:add column t_lock_log.mode_changed_at
ALTER TABLE t_lock_log ADD COLUMN mode_changed_at DATETIME(6) NULL DEFAULT NULL
-- rwlock:down
ALTER TABLE t_lock_log DROP COLUMN mode_changed_at`;
