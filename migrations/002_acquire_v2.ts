import type { Knex } from 'knex';
import { replaceProcedures } from './procedures.js';

/**
 * Version 2 of the acquire procedure (the tables are unchanged).
 *
 * - The owner parameter is utf8mb4 like the column: a routine parameter without a character set
 *   takes the database's default, and in a latin1 database any owner outside latin1 was refused.
 * - First use of a resource by several acquirers at once: the losers of the race to create the
 *   resource row used to report "not granted" although nothing was held. A loser now repeats its
 *   guarded UPDATE once the row exists: the duplicate-key check of its insert waits for the
 *   winner's commit, and a row committed since its first UPDATE is read as committed.
 *
 * `rwlock_release` from version 1 stays, unused by this version, so that processes still running
 * the previous release keep working during a rolling upgrade.
 *
 * Like every migration, `up` is idempotent: migrate() re-runs all of them to repair a schema
 * whose objects were dropped by hand.
 */
const GUARDED_UPDATE = `IF p_mode = 0 THEN
    UPDATE t_read_write_lock SET w_count = 1, w_wait_until = NULL, version = version + 1
     WHERE resource_id = p_resource AND w_count = 0 AND r_count = 0;
  ELSE
    UPDATE t_read_write_lock SET r_count = r_count + 1, version = version + 1
     WHERE resource_id = p_resource AND w_count = 0
       AND (w_wait_until IS NULL OR w_wait_until < NOW(6));
  END IF;
  SET v_granted = ROW_COUNT();`;

export const PROCEDURES: Readonly<Record<string, string>> = {
  rwlock_acquire: `CREATE PROCEDURE rwlock_acquire(
  IN p_resource VARBINARY(255), IN p_mode TINYINT UNSIGNED, IN p_owner VARCHAR(255) CHARACTER SET utf8mb4,
  IN p_token BINARY(16), IN p_intent_ms INT UNSIGNED)
BEGIN
  DECLARE v_granted INT DEFAULT 0;
  DECLARE v_duplicate INT DEFAULT 0;
  DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  ${GUARDED_UPDATE}
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
      ${GUARDED_UPDATE}
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
END`,
};

export async function up(knex: Knex, options = { procedures: true }): Promise<void> {
  if (!options.procedures) return;
  await replaceProcedures(knex, PROCEDURES);
}

/** Back to version 1's acquire. */
export async function down(knex: Knex): Promise<void> {
  const v1 = await import('./001_lock_tables.js');
  await replaceProcedures(knex, { rwlock_acquire: v1.PROCEDURES.rwlock_acquire! });
}
