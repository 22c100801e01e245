// Migration 006_invoker_routines, frozen: written once by scripts/migrations.ts and never edited again.
// test/unit/migration-texts.test.ts pins this text; a change to the schema is a new migration.
export const TEXT = `-- rwlock:retire rwlock_release
-- rwlock:procedure rwlock_acquire
CREATE PROCEDURE rwlock_acquire(
  IN p_resource VARBINARY(255), IN p_mode TINYINT UNSIGNED, IN p_owner VARCHAR(255) CHARACTER SET utf8mb4,
  IN p_token BINARY(16), IN p_intent_ms INT UNSIGNED)
  SQL SECURITY INVOKER
BEGIN
  DECLARE v_granted INT DEFAULT 0;
  DECLARE v_duplicate INT DEFAULT 0;
  DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  IF p_mode = 0 THEN
    UPDATE t_read_write_lock SET w_count = 1, w_wait_until = NULL, version = version + 1
     WHERE resource_id = p_resource AND w_count = 0 AND r_count = 0;
  ELSE
    UPDATE t_read_write_lock SET r_count = r_count + 1, version = version + 1
     WHERE resource_id = p_resource AND w_count = 0
       AND (w_wait_until IS NULL OR w_wait_until < NOW(6));
  END IF;
  SET v_granted = ROW_COUNT();
  IF v_granted = 0 THEN
    IF NOT EXISTS (SELECT 1 FROM t_read_write_lock WHERE resource_id = p_resource) THEN
      BEGIN
        DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
        INSERT INTO t_read_write_lock (resource_id, w_count, r_count, version)
        VALUES (p_resource, IF(p_mode = 0, 1, 0), IF(p_mode = 0, 0, 1), 1);
        IF v_duplicate = 0 THEN SET v_granted = 1; END IF;
      END;
    END IF;
    IF v_granted = 0 THEN
      -- The row exists, and may have been committed by another first user only since the UPDATE
      -- above looked (READ COMMITTED reads the last committed version): decide on it again.
      IF p_mode = 0 THEN
    UPDATE t_read_write_lock SET w_count = 1, w_wait_until = NULL, version = version + 1
     WHERE resource_id = p_resource AND w_count = 0 AND r_count = 0;
  ELSE
    UPDATE t_read_write_lock SET r_count = r_count + 1, version = version + 1
     WHERE resource_id = p_resource AND w_count = 0
       AND (w_wait_until IS NULL OR w_wait_until < NOW(6));
  END IF;
  SET v_granted = ROW_COUNT();
    END IF;
  END IF;
  IF v_granted = 0 AND p_mode = 0 AND p_intent_ms > 0 THEN
    UPDATE t_read_write_lock
       SET w_wait_until = NOW(6) + INTERVAL p_intent_ms * 1000 MICROSECOND, version = version + 1
     WHERE resource_id = p_resource
       AND (w_wait_until IS NULL OR w_wait_until < NOW(6) + INTERVAL p_intent_ms * 500 MICROSECOND);
  END IF;
  IF v_granted = 1 THEN
    INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token)
    VALUES (p_resource, p_mode, 0, NOW(6), 0, p_owner, p_token);
    SET v_id = LAST_INSERT_ID();
  END IF;
  COMMIT;
  SELECT v_id AS id;
END
-- rwlock:down restore rwlock_acquire from 002_acquire_v2
-- rwlock:down restore rwlock_release from 001_lock_tables`;
