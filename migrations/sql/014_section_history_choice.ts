// Migration 014_section_history_choice, frozen: written once by scripts/migrations.ts and never edited again.
// test/unit/migration-texts.test.ts pins this text; a change to the schema is a new migration.
export const TEXT = `-- rwlock:procedure rwlock_section_begin_bare
CREATE PROCEDURE rwlock_section_begin_bare(
  IN p_resources BLOB, IN p_kinds VARCHAR(64) CHARACTER SET ascii, IN p_owner VARCHAR(255) CHARACTER SET utf8mb4,
  IN p_tokens VARBINARY(1024), IN p_idle_sec INT UNSIGNED, IN p_lock_wait_sec INT UNSIGNED, IN p_intent_ms INT UNSIGNED)
  SQL SECURITY INVOKER
BEGIN
  DECLARE v_kind CHAR(1) CHARACTER SET ascii DEFAULT LEFT(p_kinds, 1);
  DECLARE v_resource VARBINARY(255) DEFAULT SUBSTRING(p_resources, 2, ASCII(SUBSTRING(p_resources, 1, 1)));
  DECLARE v_found INT;
  DECLARE v_free INT;
  DECLARE v_outcome VARCHAR(8) CHARACTER SET ascii DEFAULT 'taken';
  DECLARE v_at INT DEFAULT NULL;
  DECLARE v_ids VARCHAR(20) CHARACTER SET ascii DEFAULT '';
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN SET SESSION innodb_lock_wait_timeout = @rwlock_lwt; RESIGNAL; END;
  SET @rwlock_lwt = @@SESSION.innodb_lock_wait_timeout;
  SET SESSION innodb_lock_wait_timeout = p_lock_wait_sec;
  IF p_idle_sec IS NOT NULL THEN
    SET @rwlock_idle = @@SESSION.wait_timeout;
    SET SESSION wait_timeout = p_idle_sec;
  END IF;
  IF LENGTH(p_kinds) <> 1 OR LENGTH(p_tokens) <> 16 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'rwlock_section_begin_bare takes one target';
  END IF;
  START TRANSACTION;
  take: BEGIN
    IF v_kind = 's' THEN
      SELECT COUNT(*) INTO v_found FROM t_lock_gate WHERE resource_id = v_resource LOCK IN SHARE MODE;
    ELSE
      SELECT COUNT(*) INTO v_found FROM t_lock_gate WHERE resource_id = v_resource FOR UPDATE;
    END IF;
    IF v_found = 0 THEN SET v_outcome = 'gate', v_at = 0; LEAVE take; END IF;
    IF v_kind IN ('w', 'x') THEN
      IF v_kind = 'w' THEN
        UPDATE t_read_write_lock SET version = version + 1
         WHERE resource_id = v_resource AND w_count = 0 AND r_count = 0;
      ELSE
        UPDATE t_read_write_lock SET version = version + 1
         WHERE resource_id = v_resource AND w_count = 0 AND (permit_limit IS NULL OR r_count = 0) AND (w_wait_until IS NULL OR w_wait_until < UTC_TIMESTAMP(6));
      END IF;
      IF ROW_COUNT() <> 1 THEN
        SET v_at = 0;
        IF NOT EXISTS (SELECT 1 FROM t_read_write_lock WHERE resource_id = v_resource) THEN
          SET v_outcome = 'row';
        ELSEIF v_kind = 'w' AND p_intent_ms > 0 THEN
          -- As a durable writer: mark the intent, so new readers hold back while it waits.
          UPDATE t_read_write_lock
             SET w_wait_until = UTC_TIMESTAMP(6) + INTERVAL p_intent_ms * 1000 MICROSECOND, version = version + 1
           WHERE resource_id = v_resource
             AND (w_wait_until IS NULL OR w_wait_until < UTC_TIMESTAMP(6) + INTERVAL p_intent_ms * 500 MICROSECOND);
          SET v_outcome = 'intent';
        ELSE
          SET v_outcome = 'refused';
        END IF;
        LEAVE take;
      END IF;
    END IF;
    IF v_kind IN ('s', 'e') THEN
      -- A SELECT ... INTO, not SET v = (SELECT ...): MySQL makes the subquery of a SET a locking read
      -- when the binary log is on, which would hold up durable readers. MAX(): one row, NULL for none.
      SELECT MAX(w_count = 0 AND (permit_limit IS NULL OR r_count = 0) AND (w_wait_until IS NULL OR w_wait_until < UTC_TIMESTAMP(6))) INTO v_free
        FROM t_read_write_lock WHERE resource_id = v_resource;
      IF v_free IS NULL THEN SET v_outcome = 'row', v_at = 0; LEAVE take; END IF;
      IF v_free <> 1 THEN SET v_outcome = 'refused', v_at = 0; LEAVE take; END IF;
    END IF;
  END take;
  SET SESSION innodb_lock_wait_timeout = @rwlock_lwt;
  SELECT v_outcome AS outcome, v_at AS at, v_ids AS ids;
END
-- rwlock:procedure rwlock_section_commit_bare
CREATE PROCEDURE rwlock_section_commit_bare(IN p_idle TINYINT UNSIGNED)
  SQL SECURITY INVOKER
BEGIN
  COMMIT;
  IF p_idle = 1 THEN
    -- After the COMMIT nothing may fail the call: the caller would take a committed section for a failed one.
    BEGIN
      DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
      SET SESSION wait_timeout = @rwlock_idle;
    END;
  END IF;
END
-- rwlock:down drop procedure rwlock_section_begin_bare
-- rwlock:down drop procedure rwlock_section_commit_bare`;
