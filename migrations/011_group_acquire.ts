import type { Knex } from 'knex';
import { DB_NOW } from './007_utc_times.js';
import { replaceProcedures } from './procedures.js';

/**
 * Version 11: a durable group's acquire in one call and one commit.
 *
 * `rwlock_acquire_group` runs one READ COMMITTED transaction that decides, for every target in the
 * order given (the client sends them in resource byte order), exactly what version 10's
 * `rwlock_acquire` decides for one: the gate taken without waiting (a writer exclusively, a reader
 * shared; created on first use), the guarded UPDATE of the lock row, the row inserted on first use
 * and the guard run again if another first user made it, then the grant's `t_lock_log` row. All or
 * nothing: the first target refused ends the loop and the transaction is rolled back, so nothing
 * of the group is held or logged, and no writer's intent is marked (the client falls back to one
 * acquire per resource, which marks it). It answers one row: `outcome` (`granted`; `busy`: that
 * target's gate is held by another transaction; `held`: its guard refused it), `at` (the refused
 * target's index) and `ids` (the log rows' ids, comma-separated, in the targets' order).
 *
 * The targets travel packed as `rwlock_section_take`'s do (version 9): `p_resources` one length byte
 * and the id's bytes each, `p_kinds` one letter each (`w` write, `r` read), `p_tokens` 16 bytes
 * each. Permit targets are not taken here: a group with one uses the acquire per resource. The
 * gate's NOWAIT read is a prepared statement, as in version 8 (MariaDB refuses NOWAIT in a routine's
 * body). An SQL error rolls back and is signalled again.
 */

/** The next target: its kind and resource id, the position moved past it. */
const NEXT_TARGET = `SET v_kind = SUBSTRING(p_kinds, v_i + 1, 1);
    SET v_resource = SUBSTRING(p_resources, v_pos + 1, ASCII(SUBSTRING(p_resources, v_pos, 1)));
    SET v_pos = v_pos + 1 + LENGTH(v_resource);`;

/** The gate of `v_resource`, without waiting: `@rwlock_found` NULL when another transaction holds it. */
const GATE = `BEGIN
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
    END;`;

/** Version 10's guards, by the target's kind: `v_granted` 1 when the lock row was taken. */
const GUARDED_UPDATE = `IF v_kind = 'w' THEN
        UPDATE t_read_write_lock SET w_count = 1, w_wait_until = NULL, version = version + 1
         WHERE resource_id = v_resource AND w_count = 0 AND r_count = 0;
      ELSE
        UPDATE t_read_write_lock SET r_count = r_count + 1, permit_limit = NULL, version = version + 1
         WHERE resource_id = v_resource AND w_count = 0 AND (permit_limit IS NULL OR r_count = 0)
           AND (w_wait_until IS NULL OR w_wait_until < ${DB_NOW});
      END IF;
      SET v_granted = ROW_COUNT();`;

export const PROCEDURES: Readonly<Record<string, string>> = {
  rwlock_acquire_group: `CREATE PROCEDURE rwlock_acquire_group(
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
    ${NEXT_TARGET}
    ${GATE}
    IF @rwlock_found IS NULL THEN SET v_outcome = 'busy', v_at = v_i; LEAVE take; END IF;
    ${GUARDED_UPDATE}
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
        ${GUARDED_UPDATE}
      END IF;
    END IF;
    IF v_granted = 0 THEN SET v_outcome = 'held', v_at = v_i; LEAVE take; END IF;
    INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token)
    VALUES (v_resource, IF(v_kind = 'w', 0, 1), 0, ${DB_NOW}, 0, p_owner, SUBSTRING(p_tokens, v_i * 16 + 1, 16));
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
END`,
};

export async function up(knex: Knex, options = { procedures: true }): Promise<void> {
  if (!options.procedures) return;
  await replaceProcedures(knex, PROCEDURES);
}

/** Back to version 10: a durable group takes its resources one acquire each. */
export async function down(knex: Knex): Promise<void> {
  for (const name of Object.keys(PROCEDURES)) await knex.raw(`DROP PROCEDURE IF EXISTS ${name}`);
}
