// Migration 015_fence_commit, frozen: written once by scripts/migrations.ts and never edited again.
// test/unit/migration-texts.test.ts pins this text; a change to the schema is a new migration.
export const TEXT = `-- rwlock:procedure rwlock_fence_commit
CREATE PROCEDURE rwlock_fence_commit(
  IN p_by TINYINT UNSIGNED, IN p_w INT UNSIGNED, IN p_r INT UNSIGNED, IN p_id BIGINT UNSIGNED,
  IN p_resource VARCHAR(510) CHARACTER SET ascii, IN p_type TINYINT UNSIGNED, IN p_token CHAR(32) CHARACTER SET ascii)
  SQL SECURITY INVOKER
BEGIN
  DECLARE v_fenced INT;
  DECLARE v_message VARCHAR(128);
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  UPDATE t_lock_log l JOIN t_read_write_lock r ON r.resource_id = l.resource_id
   SET l.status = 2, l.version = l.version + 1, l.released_at = UTC_TIMESTAMP(6), l.released_by = p_by,
       r.w_count = r.w_count - p_w, r.r_count = r.r_count - p_r, r.version = r.version + 1
 WHERE l.id = p_id AND l.resource_id = UNHEX(p_resource) AND l.lock_type = p_type AND l.status = 0 AND l.token = UNHEX(p_token);
  SET v_fenced = ROW_COUNT();
  IF v_fenced <> 2 THEN
    ROLLBACK;
    SET v_message = CONCAT('rwlock_fence_commit: fence changed ', v_fenced);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;
  COMMIT;
END
-- rwlock:down drop procedure rwlock_fence_commit`;
