// Migration 016_writer_intent_gate, frozen: written once by scripts/migrations.ts and never edited again.
// test/unit/migration-texts.test.ts pins this text; a change to the schema is a new migration.
export const TEXT = `-- rwlock:procedure rwlock_acquire
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
      -- Stopped at the gate: mark the intent only if the gate can be had shared at once. Then only
      -- short transactions can hold the lock row (readers' acquires, releases, a reap), so the mark
      -- waits for them; a writing section or a durable writer holds the gate exclusively.
      BEGIN
        DECLARE CONTINUE HANDLER FOR 3572, 1205 SET @rwlock_found = NULL;
        SET @rwlock_found = NULL;
        SET @rwlock_take = CONCAT('SELECT COUNT(*) INTO @rwlock_found FROM t_lock_gate WHERE resource_id = ? ', IF(VERSION() LIKE '%MariaDB%', 'LOCK IN SHARE MODE NOWAIT', 'FOR SHARE NOWAIT'));
        PREPARE rwlock_take FROM @rwlock_take;
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
-- rwlock:down restore rwlock_acquire from 010_permits`;
