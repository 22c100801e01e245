// Migration 010_permits, frozen: written once by scripts/migrations.ts and never edited again.
// test/unit/migration-texts.test.ts pins this text; a change to the schema is a new migration.
export const TEXT = `-- rwlock:add column t_read_write_lock.permit_limit
ALTER TABLE t_read_write_lock ADD COLUMN permit_limit INT UNSIGNED NULL DEFAULT NULL
-- rwlock:add column t_lock_log.permits
ALTER TABLE t_lock_log ADD COLUMN permits INT UNSIGNED NULL DEFAULT NULL
-- rwlock:procedure rwlock_acquire
CREATE PROCEDURE rwlock_acquire(
  IN p_resource VARBINARY(255), IN p_mode TINYINT UNSIGNED, IN p_owner VARCHAR(255) CHARACTER SET utf8mb4,
  IN p_token BINARY(16), IN p_intent_ms INT UNSIGNED)
  SQL SECURITY INVOKER
BEGIN
  DECLARE v_granted INT DEFAULT 0;
  DECLARE v_duplicate INT DEFAULT 0;
  DECLARE v_busy INT DEFAULT 0;
  DECLARE v_mixed INT DEFAULT 0;
  DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  SET @rwlock_resource = p_resource;
  BEGIN
    -- A gate another transaction holds: MySQL 3572 (ER_LOCK_NOWAIT), MariaDB 1205.
    DECLARE CONTINUE HANDLER FOR 3572, 1205 SET @rwlock_found = NULL;
    SET @rwlock_take = CONCAT('SELECT COUNT(*) INTO @rwlock_found FROM t_lock_gate WHERE resource_id = ? ',
      IF(p_mode = 0, 'FOR UPDATE NOWAIT', IF(VERSION() LIKE '%MariaDB%', 'LOCK IN SHARE MODE NOWAIT', 'FOR SHARE NOWAIT')));
    PREPARE rwlock_take FROM @rwlock_take;
    SET @rwlock_found = NULL;
    EXECUTE rwlock_take USING @rwlock_resource;
    IF @rwlock_found = 0 THEN
      -- First use of the gate: the new row is ours, exclusively, until the commit.
      INSERT IGNORE INTO t_lock_gate (resource_id) VALUES (p_resource);
      IF ROW_COUNT() <> 1 THEN
        SET @rwlock_found = NULL;
        EXECUTE rwlock_take USING @rwlock_resource;
      END IF;
    END IF;
    DEALLOCATE PREPARE rwlock_take;
    IF @rwlock_found IS NULL THEN SET v_busy = 1; END IF;
  END;
  IF v_busy = 0 THEN
    IF p_mode = 0 THEN
      UPDATE t_read_write_lock SET w_count = 1, w_wait_until = NULL, version = version + 1
       WHERE resource_id = p_resource AND w_count = 0 AND r_count = 0;
    ELSE
      UPDATE t_read_write_lock SET r_count = r_count + 1, permit_limit = NULL, version = version + 1
       WHERE resource_id = p_resource AND w_count = 0 AND (permit_limit IS NULL OR r_count = 0)
         AND (w_wait_until IS NULL OR w_wait_until < UTC_TIMESTAMP(6));
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
      UPDATE t_read_write_lock SET r_count = r_count + 1, permit_limit = NULL, version = version + 1
       WHERE resource_id = p_resource AND w_count = 0 AND (permit_limit IS NULL OR r_count = 0)
         AND (w_wait_until IS NULL OR w_wait_until < UTC_TIMESTAMP(6));
    END IF;
    SET v_granted = ROW_COUNT();
      END IF;
    END IF;
  END IF;
  IF v_granted = 0 AND v_busy = 0 THEN
    SELECT COUNT(*) INTO v_mixed FROM t_read_write_lock
     WHERE resource_id = p_resource AND w_count = 0 AND r_count > 0 AND permit_limit IS NOT NULL;
  END IF;
  IF v_granted = 0 AND v_mixed = 0 AND p_mode = 0 AND p_intent_ms > 0 THEN
    IF v_busy = 1 THEN
      -- Stopped at the gate: mark the intent only if the lock row can be had at once.
      BEGIN
        DECLARE CONTINUE HANDLER FOR 3572, 1205 SET @rwlock_found = NULL;
        SET @rwlock_found = NULL;
        PREPARE rwlock_take FROM 'SELECT COUNT(*) INTO @rwlock_found FROM t_read_write_lock WHERE resource_id = ? FOR UPDATE NOWAIT';
        EXECUTE rwlock_take USING @rwlock_resource;
        DEALLOCATE PREPARE rwlock_take;
      END;
    END IF;
    IF v_busy = 0 OR @rwlock_found = 1 THEN
      UPDATE t_read_write_lock
         SET w_wait_until = UTC_TIMESTAMP(6) + INTERVAL p_intent_ms * 1000 MICROSECOND, version = version + 1
       WHERE resource_id = p_resource
         AND (w_wait_until IS NULL OR w_wait_until < UTC_TIMESTAMP(6) + INTERVAL p_intent_ms * 500 MICROSECOND);
    END IF;
  END IF;
  IF v_granted = 1 THEN
    INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token)
    VALUES (p_resource, p_mode, 0, UTC_TIMESTAMP(6), 0, p_owner, p_token);
    SET v_id = LAST_INSERT_ID();
  END IF;
  COMMIT;
  SELECT v_id AS id, v_busy AS busy, v_mixed AS mixed;
END
-- rwlock:procedure rwlock_section_take
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
           WHERE resource_id = v_resource AND w_count = 0 AND (permit_limit IS NULL OR r_count = 0) AND (w_wait_until IS NULL OR w_wait_until < UTC_TIMESTAMP(6));
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
        SELECT MAX(w_count = 0 AND (permit_limit IS NULL OR r_count = 0) AND (w_wait_until IS NULL OR w_wait_until < UTC_TIMESTAMP(6))) INTO v_free
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
-- rwlock:procedure rwlock_acquire_permit
CREATE PROCEDURE rwlock_acquire_permit(
  IN p_resource VARBINARY(255), IN p_owner VARCHAR(255) CHARACTER SET utf8mb4, IN p_token BINARY(16),
  IN p_limit INT UNSIGNED, IN p_count INT UNSIGNED)
  SQL SECURITY INVOKER
BEGIN
  DECLARE v_granted INT DEFAULT 0;
  DECLARE v_duplicate INT DEFAULT 0;
  DECLARE v_busy INT DEFAULT 0;
  DECLARE v_conflict INT DEFAULT 0;
  DECLARE v_held_limit INT UNSIGNED DEFAULT NULL;
  DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  SET @rwlock_resource = p_resource;
  BEGIN
    -- A gate another transaction holds: MySQL 3572 (ER_LOCK_NOWAIT), MariaDB 1205.
    DECLARE CONTINUE HANDLER FOR 3572, 1205 SET @rwlock_found = NULL;
    SET @rwlock_take = CONCAT('SELECT COUNT(*) INTO @rwlock_found FROM t_lock_gate WHERE resource_id = ? ',
      IF(VERSION() LIKE '%MariaDB%', 'LOCK IN SHARE MODE NOWAIT', 'FOR SHARE NOWAIT'));
    PREPARE rwlock_take FROM @rwlock_take;
    SET @rwlock_found = NULL;
    EXECUTE rwlock_take USING @rwlock_resource;
    IF @rwlock_found = 0 THEN
      -- First use of the gate: the new row is ours, exclusively, until the commit.
      INSERT IGNORE INTO t_lock_gate (resource_id) VALUES (p_resource);
      IF ROW_COUNT() <> 1 THEN
        SET @rwlock_found = NULL;
        EXECUTE rwlock_take USING @rwlock_resource;
      END IF;
    END IF;
    DEALLOCATE PREPARE rwlock_take;
    IF @rwlock_found IS NULL THEN SET v_busy = 1; END IF;
  END;
  IF v_busy = 0 THEN
    UPDATE t_read_write_lock
       SET r_count = r_count + p_count, permit_limit = p_limit, version = version + 1
     WHERE resource_id = p_resource AND w_count = 0 AND p_count <= p_limit
       AND (r_count = 0 OR (permit_limit = p_limit AND r_count + p_count <= p_limit));
    SET v_granted = ROW_COUNT();
    IF v_granted = 0 THEN
      IF NOT EXISTS (SELECT 1 FROM t_read_write_lock WHERE resource_id = p_resource) THEN
        BEGIN
          DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
          INSERT INTO t_read_write_lock (resource_id, w_count, r_count, permit_limit, version)
          SELECT p_resource, 0, p_count, p_limit, 1 FROM DUAL WHERE p_count <= p_limit;
          IF v_duplicate = 0 AND ROW_COUNT() = 1 THEN SET v_granted = 1; END IF;
        END;
      END IF;
      IF v_granted = 0 THEN
        UPDATE t_read_write_lock
       SET r_count = r_count + p_count, permit_limit = p_limit, version = version + 1
     WHERE resource_id = p_resource AND w_count = 0 AND p_count <= p_limit
       AND (r_count = 0 OR (permit_limit = p_limit AND r_count + p_count <= p_limit));
    SET v_granted = ROW_COUNT();
      END IF;
    END IF;
    IF v_granted = 0 THEN
      -- Refused: why, from the row as it is now (a report only; the UPDATE above decided).
      SELECT IF(w_count > 0 OR (permit_limit IS NULL AND r_count > 0), 1,
                IF(r_count > 0 AND permit_limit <> p_limit, 2, 0)), permit_limit
        INTO v_conflict, v_held_limit
        FROM t_read_write_lock WHERE resource_id = p_resource;
    END IF;
  END IF;
  IF v_granted = 1 THEN
    INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token, permits)
    VALUES (p_resource, 1, 0, UTC_TIMESTAMP(6), 0, p_owner, p_token, p_count);
    SET v_id = LAST_INSERT_ID();
  END IF;
  COMMIT;
  SELECT v_id AS id, v_busy AS busy, v_conflict AS conflict, v_held_limit AS held_limit;
END
-- rwlock:down drop procedure rwlock_acquire_permit
-- rwlock:down restore rwlock_acquire from 008_resource_gate
-- rwlock:down restore rwlock_section_take from 009_section_take
-- rwlock:down
ALTER TABLE t_lock_log DROP COLUMN permits
-- rwlock:down
ALTER TABLE t_read_write_lock DROP COLUMN permit_limit`;
