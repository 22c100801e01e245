// Migration 011_group_acquire, frozen: written once by scripts/migrations.ts and never edited again.
// test/unit/migration-texts.test.ts pins this text; a change to the schema is a new migration.
export const TEXT = `-- rwlock:procedure rwlock_acquire_group
CREATE PROCEDURE rwlock_acquire_group(
  IN p_resources BLOB, IN p_kinds VARCHAR(64) CHARACTER SET ascii, IN p_owner VARCHAR(255) CHARACTER SET utf8mb4,
  IN p_tokens VARBINARY(1024))
  SQL SECURITY INVOKER
BEGIN
  DECLARE v_n INT DEFAULT LENGTH(p_kinds);
  DECLARE v_i INT DEFAULT 0;
  DECLARE v_pos INT DEFAULT 1;
  DECLARE v_kind CHAR(1) CHARACTER SET ascii;
  DECLARE v_resource VARBINARY(255);
  DECLARE v_granted INT DEFAULT 0;
  DECLARE v_duplicate INT DEFAULT 0;
  DECLARE v_outcome VARCHAR(8) CHARACTER SET ascii DEFAULT 'granted';
  DECLARE v_at INT DEFAULT NULL;
  DECLARE v_ids VARCHAR(1400) CHARACTER SET ascii DEFAULT '';
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  take: WHILE v_i < v_n DO
    SET v_kind = SUBSTRING(p_kinds, v_i + 1, 1);
    SET v_resource = SUBSTRING(p_resources, v_pos + 1, ASCII(SUBSTRING(p_resources, v_pos, 1)));
    SET v_pos = v_pos + 1 + LENGTH(v_resource);
    BEGIN
      -- A gate another transaction holds: MySQL 3572 (ER_LOCK_NOWAIT), MariaDB 1205.
      DECLARE CONTINUE HANDLER FOR 3572, 1205 SET @rwlock_found = NULL;
      SET @rwlock_resource = v_resource;
      SET @rwlock_take = CONCAT('SELECT COUNT(*) INTO @rwlock_found FROM t_lock_gate WHERE resource_id = ? ',
        IF(v_kind = 'w', 'FOR UPDATE NOWAIT', IF(VERSION() LIKE '%MariaDB%', 'LOCK IN SHARE MODE NOWAIT', 'FOR SHARE NOWAIT')));
      PREPARE rwlock_take FROM @rwlock_take;
      SET @rwlock_found = NULL;
      EXECUTE rwlock_take USING @rwlock_resource;
      IF @rwlock_found = 0 THEN
        -- First use of the gate: the new row is ours, exclusively, until the commit.
        INSERT IGNORE INTO t_lock_gate (resource_id) VALUES (v_resource);
        IF ROW_COUNT() <> 1 THEN
          SET @rwlock_found = NULL;
          EXECUTE rwlock_take USING @rwlock_resource;
        END IF;
      END IF;
      DEALLOCATE PREPARE rwlock_take;
    END;
    IF @rwlock_found IS NULL THEN SET v_outcome = 'busy', v_at = v_i; LEAVE take; END IF;
    IF v_kind = 'w' THEN
        UPDATE t_read_write_lock SET w_count = 1, w_wait_until = NULL, version = version + 1
         WHERE resource_id = v_resource AND w_count = 0 AND r_count = 0;
      ELSE
        UPDATE t_read_write_lock SET r_count = r_count + 1, permit_limit = NULL, version = version + 1
         WHERE resource_id = v_resource AND w_count = 0 AND (permit_limit IS NULL OR r_count = 0)
           AND (w_wait_until IS NULL OR w_wait_until < UTC_TIMESTAMP(6));
      END IF;
      SET v_granted = ROW_COUNT();
    IF v_granted = 0 THEN
      IF NOT EXISTS (SELECT 1 FROM t_read_write_lock WHERE resource_id = v_resource) THEN
        BEGIN
          DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
          SET v_duplicate = 0;
          INSERT INTO t_read_write_lock (resource_id, w_count, r_count, version)
          VALUES (v_resource, IF(v_kind = 'w', 1, 0), IF(v_kind = 'w', 0, 1), 1);
          IF v_duplicate = 0 THEN SET v_granted = 1; END IF;
        END;
      END IF;
      IF v_granted = 0 THEN
        -- The row exists, and may have been committed by another first user only since the UPDATE
        -- above looked (READ COMMITTED reads the last committed version): decide on it again.
        IF v_kind = 'w' THEN
        UPDATE t_read_write_lock SET w_count = 1, w_wait_until = NULL, version = version + 1
         WHERE resource_id = v_resource AND w_count = 0 AND r_count = 0;
      ELSE
        UPDATE t_read_write_lock SET r_count = r_count + 1, permit_limit = NULL, version = version + 1
         WHERE resource_id = v_resource AND w_count = 0 AND (permit_limit IS NULL OR r_count = 0)
           AND (w_wait_until IS NULL OR w_wait_until < UTC_TIMESTAMP(6));
      END IF;
      SET v_granted = ROW_COUNT();
      END IF;
    END IF;
    IF v_granted = 0 THEN SET v_outcome = 'held', v_at = v_i; LEAVE take; END IF;
    INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token)
    VALUES (v_resource, IF(v_kind = 'w', 0, 1), 0, UTC_TIMESTAMP(6), 0, p_owner, SUBSTRING(p_tokens, v_i * 16 + 1, 16));
    SET v_ids = CONCAT(v_ids, IF(v_i = 0, '', ','), LAST_INSERT_ID());
    SET v_i = v_i + 1;
  END WHILE;
  IF v_outcome = 'granted' THEN
    COMMIT;
  ELSE
    ROLLBACK;
    SET v_ids = '';
  END IF;
  SELECT v_outcome AS outcome, v_at AS at, v_ids AS ids;
END
-- rwlock:down drop procedure rwlock_acquire_group`;
