// Migration 001_lock_tables, frozen: written once by scripts/migrations.ts and never edited again.
// test/unit/migration-texts.test.ts pins this text; a change to the schema is a new migration.
export const TEXT = `-- rwlock:table
CREATE TABLE IF NOT EXISTS t_read_write_lock (
  resource_id  VARBINARY(255)    NOT NULL,
  w_count      TINYINT UNSIGNED  NOT NULL DEFAULT 0,
  r_count      INT UNSIGNED      NOT NULL DEFAULT 0,
  w_wait_until DATETIME(6)       NULL DEFAULT NULL,
  version      BIGINT UNSIGNED   NOT NULL DEFAULT 0,
  PRIMARY KEY (resource_id),
  CONSTRAINT ck_rwlock_counts CHECK (w_count IN (0, 1) AND (w_count = 0 OR r_count = 0))
) ENGINE=InnoDB
-- rwlock:table
CREATE TABLE IF NOT EXISTS t_lock_log (
  id          BIGINT UNSIGNED   NOT NULL AUTO_INCREMENT,
  resource_id VARBINARY(255)    NOT NULL,
  lock_type   TINYINT UNSIGNED  NOT NULL,
  status      TINYINT UNSIGNED  NOT NULL DEFAULT 0,
  create_time DATETIME(6)       NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  lease_until DATETIME(6)       NULL DEFAULT NULL,
  version     INT UNSIGNED      NOT NULL DEFAULT 0,
  owner       VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
  token       BINARY(16)        NOT NULL,
  released_at DATETIME(6)       NULL DEFAULT NULL,
  released_by TINYINT UNSIGNED  NULL DEFAULT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_lock_log_token (token),
  KEY ix_lock_log_status_time (status, create_time),
  CONSTRAINT ck_lock_log_enums CHECK (lock_type IN (0, 1) AND status IN (0, 1, 2))
) ENGINE=InnoDB
-- rwlock:index t_lock_log.uk_lock_log_token
ALTER TABLE t_lock_log ADD UNIQUE KEY uk_lock_log_token (token), ALGORITHM=INPLACE, LOCK=NONE
-- rwlock:index t_lock_log.ix_lock_log_status_time
ALTER TABLE t_lock_log ADD KEY ix_lock_log_status_time (status, create_time), ALGORITHM=INPLACE, LOCK=NONE
-- rwlock:procedure rwlock_acquire
CREATE PROCEDURE rwlock_acquire(
  IN p_resource VARBINARY(255), IN p_mode TINYINT UNSIGNED, IN p_owner VARCHAR(255),
  IN p_token BINARY(16), IN p_intent_ms INT UNSIGNED)
BEGIN
  DECLARE v_granted INT DEFAULT 0;
  DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_exists INT DEFAULT 0;
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
    SELECT COUNT(*) INTO v_exists FROM t_read_write_lock WHERE resource_id = p_resource;
    IF v_exists = 0 THEN
      BEGIN
        DECLARE CONTINUE HANDLER FOR 1062 SET v_granted = 0;
        SET v_granted = 1;
        INSERT INTO t_read_write_lock (resource_id, w_count, r_count, version)
        VALUES (p_resource, IF(p_mode = 0, 1, 0), IF(p_mode = 0, 0, 1), 1);
      END;
    ELSEIF p_mode = 0 AND p_intent_ms > 0 THEN
      UPDATE t_read_write_lock
         SET w_wait_until = NOW(6) + INTERVAL p_intent_ms * 1000 MICROSECOND, version = version + 1
       WHERE resource_id = p_resource
         AND (w_wait_until IS NULL OR w_wait_until < NOW(6) + INTERVAL p_intent_ms * 500 MICROSECOND);
    END IF;
  END IF;
  IF v_granted = 1 THEN
    INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token)
    VALUES (p_resource, p_mode, 0, NOW(6), 0, p_owner, p_token);
    SET v_id = LAST_INSERT_ID();
  END IF;
  COMMIT;
  SELECT v_id AS id;
END
-- rwlock:procedure rwlock_release
CREATE PROCEDURE rwlock_release(
  IN p_id BIGINT UNSIGNED, IN p_resource VARBINARY(255), IN p_mode TINYINT UNSIGNED,
  IN p_by TINYINT UNSIGNED, IN p_in_tx TINYINT UNSIGNED)
BEGIN
  DECLARE v_released INT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF p_in_tx = 0 THEN ROLLBACK; END IF; RESIGNAL; END;
  IF p_in_tx = 0 THEN
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
  END IF;
  UPDATE t_lock_log
     SET status = 2, version = version + 1, released_at = NOW(6), released_by = p_by
   WHERE id = p_id AND resource_id = p_resource AND lock_type = p_mode AND status IN (0, 1);
  SET v_released = ROW_COUNT();
  IF v_released = 1 THEN
    IF p_mode = 0 THEN
      UPDATE t_read_write_lock SET w_count = 0, version = version + 1
       WHERE resource_id = p_resource AND w_count = 1;
    ELSE
      UPDATE t_read_write_lock SET r_count = r_count - 1, version = version + 1
       WHERE resource_id = p_resource AND r_count > 0;
    END IF;
    IF ROW_COUNT() <> 1 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'mysql-rwlock: lock count does not match the grant log';
    END IF;
  END IF;
  IF p_in_tx = 0 THEN COMMIT; END IF;
  SELECT v_released AS released, CONNECTION_ID() AS connection_id;
END
-- rwlock:down drop procedure rwlock_acquire
-- rwlock:down drop procedure rwlock_release
-- rwlock:down
DROP TABLE IF EXISTS t_lock_log
-- rwlock:down
DROP TABLE IF EXISTS t_read_write_lock`;
