import type { Knex } from 'knex';
import { DB_NOW } from './007_utc_times.js';
import { replaceProcedures } from './procedures.js';

/**
 * Version 9: a one-commit section's take and commit, each one call.
 *
 * A section (src/lock/section.ts) runs its take as the first statements of the caller's own
 * transaction, which the caller has begun. Until this version those were one statement each, sent
 * one after another: the idle bound, every gate, every lock row, the log rows, and (MySQL) the lock
 * wait bound restored; after the work, the COMMIT, then the session's bounds restored. Round trips,
 * not the commit, were most of a section's cost.
 *
 * - `rwlock_section_take` starts and ends nothing: inside the caller's open transaction it sets the
 *   idle bound (`p_idle_sec`, seconds; NULL: none) and, for the take alone, the lock wait bound
 *   (`p_lock_wait_sec`), takes every target's gate, then the lock rows written (`w`: a writer's
 *   guard; `x`: a reader's, where shared locks are not certified), then reads the lock rows of the
 *   reading targets that take their gate shared (`s`) or, at SERIALIZABLE, exclusively (`e`),
 *   without a locking clause, after every lock, as version 8's statements do. Taken: one
 *   `t_lock_log` row per target, released by `section`, in status 1 (a section in progress) with
 *   `released_at` NULL until the commit: the section's true span is recorded, and an operator who
 *   reads uncommitted rows finds sections in progress through the (status, create_time) index.
 *   Nobody else ever sees status 1: the commit turns it to 2 (released), a rollback removes it. It answers one row: `outcome` (`taken`; `gate` or `row`: that target's
 *   gate or lock row does not exist yet; `refused`: held; `intent`: refused, and a writer's intent
 *   marked, to be committed by the caller), `at` (the target's index) and `ids` (the log rows'
 *   ids, comma-separated, in the targets' order). The targets travel packed: `p_resources` as
 *   one length byte and the id's bytes each, `p_kinds` one letter each, `p_tokens` 16 bytes each.
 *   An error ends the call with the lock wait bound restored and the transaction still open, as a
 *   failed statement leaves it.
 * - `rwlock_section_commit` sets the section's log rows released now (ids comma-separated),
 *   COMMITs, and restores the idle bound the take set (`p_idle` 1): the section's end in the one
 *   round trip of its commit.
 *
 * The idle bound is `wait_timeout` on both servers: set only while the section's transaction is
 * open and restored by the commit's call right after its COMMIT, it bounds the same idle time as
 * MariaDB's `idle_transaction_timeout` (which the statements use there, as they restore it only
 * after the COMMIT's round trip), with one body for both servers and no prepared statement. The
 * previous values are kept in `@rwlock_idle` and `@rwlock_lwt`, which the client's own restore
 * (after a failure) reads as well.
 */

/** The next target: its kind and resource id, the position moved past it. */
const NEXT_TARGET = `SET v_kind = SUBSTRING(p_kinds, v_i + 1, 1);
      SET v_resource = SUBSTRING(p_resources, v_pos + 1, ASCII(SUBSTRING(p_resources, v_pos, 1)));
      SET v_pos = v_pos + 1 + LENGTH(v_resource);`;

export const PROCEDURES: Readonly<Record<string, string>> = {
  rwlock_section_take: `CREATE PROCEDURE rwlock_section_take(
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
      ${NEXT_TARGET}
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
      ${NEXT_TARGET}
      IF v_kind IN ('w', 'x') THEN
        IF v_kind = 'w' THEN
          UPDATE t_read_write_lock SET version = version + 1
           WHERE resource_id = v_resource AND w_count = 0 AND r_count = 0;
        ELSE
          UPDATE t_read_write_lock SET version = version + 1
           WHERE resource_id = v_resource AND w_count = 0 AND (w_wait_until IS NULL OR w_wait_until < ${DB_NOW});
        END IF;
        IF ROW_COUNT() <> 1 THEN
          SET v_at = v_i;
          IF NOT EXISTS (SELECT 1 FROM t_read_write_lock WHERE resource_id = v_resource) THEN
            SET v_outcome = 'row';
          ELSEIF v_kind = 'w' AND p_intent_ms > 0 THEN
            -- As a durable writer: mark the intent, so new readers hold back while it waits.
            UPDATE t_read_write_lock
               SET w_wait_until = ${DB_NOW} + INTERVAL p_intent_ms * 1000 MICROSECOND, version = version + 1
             WHERE resource_id = v_resource
               AND (w_wait_until IS NULL OR w_wait_until < ${DB_NOW} + INTERVAL p_intent_ms * 500 MICROSECOND);
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
      ${NEXT_TARGET}
      IF v_kind IN ('s', 'e') THEN
        -- A SELECT ... INTO, not SET v = (SELECT ...): MySQL makes the subquery of a SET a locking read
        -- when the binary log is on, which would hold up durable readers. MAX(): one row, NULL for none.
        SELECT MAX(w_count = 0 AND (w_wait_until IS NULL OR w_wait_until < ${DB_NOW})) INTO v_free
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
      ${NEXT_TARGET}
      INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token, released_at, released_by)
      VALUES (v_resource, IF(v_kind = 'w', 0, 1), 1, ${DB_NOW}, 1, p_owner, SUBSTRING(p_tokens, v_i * 16 + 1, 16), NULL, 5);
      SET v_ids = CONCAT(v_ids, IF(v_i = 0, '', ','), LAST_INSERT_ID());
      SET v_i = v_i + 1;
    END WHILE;
  END IF;
  SELECT v_outcome AS outcome, v_at AS at, v_ids AS ids;
END`,
  rwlock_section_commit: `CREATE PROCEDURE rwlock_section_commit(IN p_ids VARCHAR(1400) CHARACTER SET ascii, IN p_idle TINYINT UNSIGNED)
  SQL SECURITY INVOKER
BEGIN
  DECLARE v_rest VARCHAR(1400) CHARACTER SET ascii DEFAULT p_ids;
  DECLARE v_now DATETIME(6) DEFAULT ${DB_NOW};
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
END`,
};

export async function up(knex: Knex, options = { procedures: true }): Promise<void> {
  if (!options.procedures) return;
  await replaceProcedures(knex, PROCEDURES);
}

/** Back to version 8: sections run their take as separate statements. */
export async function down(knex: Knex): Promise<void> {
  for (const name of Object.keys(PROCEDURES)) await knex.raw(`DROP PROCEDURE IF EXISTS ${name}`);
}
