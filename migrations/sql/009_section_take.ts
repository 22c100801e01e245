// Migration 009_section_take, frozen: written once by scripts/migrations.ts and never edited again.
// test/unit/migration-texts.test.ts pins this text; a change to the schema is a new migration.
export const TEXT = `-- rwlock:procedure rwlock_section_take
CREATE PROCEDURE rwlock_section_take(
  IN p_resources BLOB, IN p_kinds VARCHAR(64) CHARACTER SET ascii, IN p_owner VARCHAR(255) CHARACTER SET utf8mb4,
  IN p_tokens VARBINARY(1024), IN p_idle_sec INT UNSIGNED, IN p_lock_wait_sec INT UNSIGNED, IN p_intent_ms INT UNSIGNED)
  SQL SECURITY INVOKER
BEGIN
  DECLARE v_n INT DEFAULT LENGTH(p_kinds);
  DECLARE v_i INT DEFAULT 0;
  DECLARE v_pos INT DEFAULT 1;
  DECLARE v_kind CHAR(1) CHARACTER SET ascii;
  DECLARE v_resource VARBINARY(255);
  DECLARE v_found INT;
  DECLARE v_free INT;
  DECLARE v_outcome VARCHAR(8) CHARACTER SET ascii DEFAULT 'taken';
  DECLARE v_at INT DEFAULT NULL;
  DECLARE v_ids VARCHAR(1400) CHARACTER SET ascii DEFAULT '';
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN SET SESSION innodb_lock_wait_timeout = @rwlock_lwt; RESIGNAL; END;
  SET @rwlock_lwt = @@SESSION.innodb_lock_wait_timeout;
  SET SESSION innodb_lock_wait_timeout = p_lock_wait_sec;
  IF p_idle_sec IS NOT NULL THEN
    SET @rwlock_idle = @@SESSION.wait_timeout;
    SET SESSION wait_timeout = p_idle_sec;
  END IF;
  take: BEGIN
    -- Every gate first, in the targets' order (by resource bytes): a reader shared, all else exclusively.
    WHILE v_i < v_n DO
      SET v_kind = SUBSTRING(p_kinds, v_i + 1, 1);
      SET v_resource = SUBSTRING(p_resources, v_pos + 1, ASCII(SUBSTRING(p_resources, v_pos, 1)));
      SET v_pos = v_pos + 1 + LENGTH(v_resource);
      IF v_kind = 's' THEN
        SELECT COUNT(*) INTO v_found FROM t_lock_gate WHERE resource_id = v_resource LOCK IN SHARE MODE;
      ELSE
        SELECT COUNT(*) INTO v_found FROM t_lock_gate WHERE resource_id = v_resource FOR UPDATE;
      END IF;
      IF v_found = 0 THEN SET v_outcome = 'gate', v_at = v_i; LEAVE take; END IF;
      SET v_i = v_i + 1;
    END WHILE;
    -- Then the lock rows written, each by the durable acquire's guard.
    SET v_i = 0, v_pos = 1;
    WHILE v_i < v_n DO
      SET v_kind = SUBSTRING(p_kinds, v_i + 1, 1);
      SET v_resource = SUBSTRING(p_resources, v_pos + 1, ASCII(SUBSTRING(p_resources, v_pos, 1)));
      SET v_pos = v_pos + 1 + LENGTH(v_resource);
      IF v_kind IN ('w', 'x') THEN
        IF v_kind = 'w' THEN
          UPDATE t_read_write_lock SET version = version + 1
           WHERE resource_id = v_resource AND w_count = 0 AND r_count = 0;
        ELSE
          UPDATE t_read_write_lock SET version = version + 1
           WHERE resource_id = v_resource AND w_count = 0 AND (w_wait_until IS NULL OR w_wait_until < UTC_TIMESTAMP(6));
        END IF;
        IF ROW_COUNT() <> 1 THEN
          SET v_at = v_i;
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
      SET v_i = v_i + 1;
    END WHILE;
    -- Last, the readers' plain reads: under REPEATABLE READ the first takes the snapshot, after every lock.
    SET v_i = 0, v_pos = 1;
    WHILE v_i < v_n DO
      SET v_kind = SUBSTRING(p_kinds, v_i + 1, 1);
      SET v_resource = SUBSTRING(p_resources, v_pos + 1, ASCII(SUBSTRING(p_resources, v_pos, 1)));
      SET v_pos = v_pos + 1 + LENGTH(v_resource);
      IF v_kind IN ('s', 'e') THEN
        -- A SELECT ... INTO, not SET v = (SELECT ...): MySQL makes the subquery of a SET a locking read
        -- when the binary log is on, which would hold up durable readers. MAX(): one row, NULL for none.
        SELECT MAX(w_count = 0 AND (w_wait_until IS NULL OR w_wait_until < UTC_TIMESTAMP(6))) INTO v_free
          FROM t_read_write_lock WHERE resource_id = v_resource;
        IF v_free IS NULL THEN SET v_outcome = 'row', v_at = v_i; LEAVE take; END IF;
        IF v_free <> 1 THEN SET v_outcome = 'refused', v_at = v_i; LEAVE take; END IF;
      END IF;
      SET v_i = v_i + 1;
    END WHILE;
  END take;
  SET SESSION innodb_lock_wait_timeout = @rwlock_lwt;
  IF v_outcome = 'taken' THEN
    SET v_i = 0, v_pos = 1;
    WHILE v_i < v_n DO
      SET v_kind = SUBSTRING(p_kinds, v_i + 1, 1);
      SET v_resource = SUBSTRING(p_resources, v_pos + 1, ASCII(SUBSTRING(p_resources, v_pos, 1)));
      SET v_pos = v_pos + 1 + LENGTH(v_resource);
      INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token, released_at, released_by)
      VALUES (v_resource, IF(v_kind = 'w', 0, 1), 1, UTC_TIMESTAMP(6), 1, p_owner, SUBSTRING(p_tokens, v_i * 16 + 1, 16), NULL, 5);
      SET v_ids = CONCAT(v_ids, IF(v_i = 0, '', ','), LAST_INSERT_ID());
      SET v_i = v_i + 1;
    END WHILE;
  END IF;
  SELECT v_outcome AS outcome, v_at AS at, v_ids AS ids;
END
-- rwlock:procedure rwlock_section_commit
CREATE PROCEDURE rwlock_section_commit(IN p_ids VARCHAR(1400) CHARACTER SET ascii, IN p_idle TINYINT UNSIGNED)
  SQL SECURITY INVOKER
BEGIN
  DECLARE v_rest VARCHAR(1400) CHARACTER SET ascii DEFAULT p_ids;
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_comma INT;
  WHILE v_rest <> '' DO
    SET v_comma = LOCATE(',', v_rest);
    UPDATE t_lock_log SET status = 2, released_at = v_now
     WHERE id = CAST(IF(v_comma = 0, v_rest, LEFT(v_rest, v_comma - 1)) AS UNSIGNED) AND status = 1;
    SET v_rest = IF(v_comma = 0, '', SUBSTRING(v_rest, v_comma + 1));
  END WHILE;
  COMMIT;
  IF p_idle = 1 THEN
    -- After the COMMIT nothing may fail the call: the caller would take a committed section for a failed one.
    BEGIN
      DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
      SET SESSION wait_timeout = @rwlock_idle;
    END;
  END IF;
END
-- rwlock:down drop procedure rwlock_section_take
-- rwlock:down drop procedure rwlock_section_commit`;
