// Migration 005_history_index, frozen: written once by scripts/migrations.ts and never edited again.
// test/unit/migration-texts.test.ts pins this text; a change to the schema is a new migration.
export const TEXT = `-- rwlock:add index t_lock_log.ix_lock_log_resource
ALTER TABLE t_lock_log ADD INDEX ix_lock_log_resource (resource_id), ALGORITHM=INPLACE, LOCK=NONE
-- rwlock:down
ALTER TABLE t_lock_log DROP INDEX ix_lock_log_resource`;
