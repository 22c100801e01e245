// Migration 012_section_begin, frozen: written once by scripts/migrations.ts and never edited again.
// test/unit/migration-texts.test.ts pins this text; a change to the schema is a new migration.
export const TEXT = `-- rwlock:procedure rwlock_section_begin
CREATE PROCEDURE rwlock_section_begin(
  IN p_resources BLOB, IN p_kinds VARCHAR(64) CHARACTER SET ascii, IN p_owner VARCHAR(255) CHARACTER SET utf8mb4,
  IN p_tokens VARBINARY(1024), IN p_idle_sec INT UNSIGNED, IN p_lock_wait_sec INT UNSIGNED, IN p_intent_ms INT UNSIGNED)
  SQL SECURITY INVOKER
BEGIN
  START TRANSACTION;
  CALL rwlock_section_take(p_resources, p_kinds, p_owner, p_tokens, p_idle_sec, p_lock_wait_sec, p_intent_ms);
END
-- rwlock:down drop procedure rwlock_section_begin`;
