import { DB_NOW } from './clock.js';
import {
  gateRead,
  LOCKING,
  logSection,
  READER_FREE,
  rowRead,
  sectionGuard,
  sectionReleased,
  writerIntent,
} from './decision.js';
import { nextTarget, PACKED_PARAMETERS, PACKED_TARGETS, TARGET_TOKEN, TARGET_TYPE } from './routines-acquire.js';

/** A section's take's parameters: the packed targets, then its bounds and a writer's intent. */
const SECTION_PARAMETERS = `${PACKED_PARAMETERS}, IN p_idle_sec INT UNSIGNED, IN p_lock_wait_sec INT UNSIGNED, IN p_intent_ms INT UNSIGNED)`;

/*
 * The pieces of a section's take that the packed take and the one-target begin share, each with the
 * indent `b` of its lines after the first, and `at` the target's index to report a refusal at.
 */

/** The session bounds the take sets (its lock wait, and the idle bound when asked), restored on any error. */
const BOUNDS_SET = `DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN SET SESSION innodb_lock_wait_timeout = @rwlock_lwt; RESIGNAL; END;
  SET @rwlock_lwt = @@SESSION.innodb_lock_wait_timeout;
  SET SESSION innodb_lock_wait_timeout = p_lock_wait_sec;
  IF p_idle_sec IS NOT NULL THEN
    SET @rwlock_idle = @@SESSION.wait_timeout;
    SET SESSION wait_timeout = p_idle_sec;
  END IF;`;

/** After the section's COMMIT, the idle bound restored when the take set one. */
const IDLE_RESTORED = `IF p_idle = 1 THEN
    -- After the COMMIT nothing may fail the call: the caller would take a committed section for a failed one.
    BEGIN
      DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
      SET SESSION wait_timeout = @rwlock_idle;
    END;
  END IF;`;

/** The target's gate, waiting: a reader's shared (`s`), every other kind's exclusive. */
function gateTake(b: string, at: string): string {
  return `IF v_kind = 's' THEN
${b}  ${gateRead('COUNT(*) INTO v_found', 'v_resource', LOCKING.shared)};
${b}ELSE
${b}  ${gateRead('COUNT(*) INTO v_found', 'v_resource', LOCKING.exclusive)};
${b}END IF;
${b}IF v_found = 0 THEN SET v_outcome = 'gate', v_at = ${at}; LEAVE take; END IF;`;
}

/** A writer's (`w`) or certified reader's (`x`) lock row, written by the durable guard; a refused writer marks its intent. */
function rowTake(b: string, at: string): string {
  return `IF v_kind IN ('w', 'x') THEN
${b}  IF v_kind = 'w' THEN
${b}    ${sectionGuard('write', 'v_resource', `${b}    `)};
${b}  ELSE
${b}    ${sectionGuard('read', 'v_resource', `${b}    `)};
${b}  END IF;
${b}  IF ROW_COUNT() <> 1 THEN
${b}    SET v_at = ${at};
${b}    IF NOT EXISTS (${rowRead('1', 'v_resource', '')}) THEN
${b}      SET v_outcome = 'row';
${b}    ELSEIF v_kind = 'w' AND p_intent_ms > 0 THEN
${b}      -- As a durable writer: mark the intent, so new readers hold back while it waits.
${b}      ${writerIntent('v_resource', 'p_intent_ms * 1000', 'p_intent_ms * 500', `${b}      `)};
${b}      SET v_outcome = 'intent';
${b}    ELSE
${b}      SET v_outcome = 'refused';
${b}    END IF;
${b}    LEAVE take;
${b}  END IF;
${b}END IF;`;
}

/** A reader's (`s`, `e`) plain read of the lock row, after its gate: free of writers, permits and a writer's intent. */
function readTake(b: string, at: string): string {
  return `IF v_kind IN ('s', 'e') THEN
${b}  -- A SELECT ... INTO, not SET v = (SELECT ...): MySQL makes the subquery of a SET a locking read
${b}  -- when the binary log is on, which would hold up durable readers. MAX(): one row, NULL for none.
${b}  SELECT MAX(${READER_FREE}) INTO v_free
${b}    FROM t_read_write_lock WHERE resource_id = v_resource;
${b}  IF v_free IS NULL THEN SET v_outcome = 'row', v_at = ${at}; LEAVE take; END IF;
${b}  IF v_free <> 1 THEN SET v_outcome = 'refused', v_at = ${at}; LEAVE take; END IF;
${b}END IF;`;
}

/*
 * The current bodies of a one-commit section's routines, built from the decision's pieces
 * (src/sql/decision.ts); test/unit/migration-texts.test.ts holds them equal to the newest frozen
 * text of each (migrations/sql/).
 */

/**
 * `rwlock_section_take`: inside the caller's transaction, every gate (waiting), then the lock rows
 * written by the durable guards, then the readers' plain reads, then the log rows (migrations 009, 010).
 */
export const SECTION_TAKE_ROUTINE = `CREATE PROCEDURE rwlock_section_take(
  ${SECTION_PARAMETERS}
  SQL SECURITY INVOKER
BEGIN
  ${PACKED_TARGETS}
  DECLARE v_found INT;
  DECLARE v_free INT;
  DECLARE v_outcome VARCHAR(8) CHARACTER SET ascii DEFAULT 'taken';
  DECLARE v_at INT DEFAULT NULL;
  DECLARE v_ids VARCHAR(1400) CHARACTER SET ascii DEFAULT '';
  ${BOUNDS_SET}
  take: BEGIN
    -- Every gate first, in the targets' order (by resource bytes): a reader shared, all else exclusively.
    WHILE v_i < v_n DO
      ${nextTarget('      ')}
      ${gateTake('      ', 'v_i')}
      SET v_i = v_i + 1;
    END WHILE;
    -- Then the lock rows written, each by the durable acquire's guard.
    SET v_i = 0, v_pos = 1;
    WHILE v_i < v_n DO
      ${nextTarget('      ')}
      ${rowTake('      ', 'v_i')}
      SET v_i = v_i + 1;
    END WHILE;
    -- Last, the readers' plain reads: under REPEATABLE READ the first takes the snapshot, after every lock.
    SET v_i = 0, v_pos = 1;
    WHILE v_i < v_n DO
      ${nextTarget('      ')}
      ${readTake('      ', 'v_i')}
      SET v_i = v_i + 1;
    END WHILE;
  END take;
  SET SESSION innodb_lock_wait_timeout = @rwlock_lwt;
  IF v_outcome = 'taken' THEN
    SET v_i = 0, v_pos = 1;
    WHILE v_i < v_n DO
      ${nextTarget('      ')}
      ${logSection({ resource: 'v_resource', type: TARGET_TYPE, owner: 'p_owner', token: TARGET_TOKEN }, '      ')};
      SET v_ids = CONCAT(v_ids, IF(v_i = 0, '', ','), LAST_INSERT_ID());
      SET v_i = v_i + 1;
    END WHILE;
  END IF;
  SELECT v_outcome AS outcome, v_at AS at, v_ids AS ids;
END`;

/** `rwlock_section_commit`: the section's log rows released now, COMMIT, the idle bound restored (migration 009). */
export const SECTION_COMMIT_ROUTINE = `CREATE PROCEDURE rwlock_section_commit(IN p_ids VARCHAR(1400) CHARACTER SET ascii, IN p_idle TINYINT UNSIGNED)
  SQL SECURITY INVOKER
BEGIN
  DECLARE v_rest VARCHAR(1400) CHARACTER SET ascii DEFAULT p_ids;
  DECLARE v_now DATETIME(6) DEFAULT ${DB_NOW};
  DECLARE v_comma INT;
  WHILE v_rest <> '' DO
    SET v_comma = LOCATE(',', v_rest);
    ${sectionReleased('v_now', 'id = CAST(IF(v_comma = 0, v_rest, LEFT(v_rest, v_comma - 1)) AS UNSIGNED)', '    ')};
    SET v_rest = IF(v_comma = 0, '', SUBSTRING(v_rest, v_comma + 1));
  END WHILE;
  COMMIT;
  ${IDLE_RESTORED}
END`;

/** `rwlock_section_begin`: the transaction's start and the take in one call (migration 012). */
export const SECTION_BEGIN_ROUTINE = `CREATE PROCEDURE rwlock_section_begin(
  ${SECTION_PARAMETERS}
  SQL SECURITY INVOKER
BEGIN
  START TRANSACTION;
  CALL rwlock_section_take(p_resources, p_kinds, p_owner, p_tokens, p_idle_sec, p_lock_wait_sec, p_intent_ms);
END`;

/**
 * A one-resource section's start and take in one call, with no nested CALL and no loop over packed
 * targets. It takes the packed take's parameters (one target: its length byte, its id, one kind
 * letter, one token) and answers as it does, so the client sends the same values to either; it
 * decides as `rwlock_section_take` decides one target. The bounds are set before the transaction
 * starts, so the error handler always has one to restore. `history`: whether it writes the
 * section's log row (its id answered in `ids`), or none (`ids` empty).
 */
function beginOne(name: string, history: boolean): string {
  const logged = history
    ? `
  IF v_outcome = 'taken' THEN
    ${logSection({ resource: 'v_resource', type: TARGET_TYPE, owner: 'p_owner', token: 'p_tokens' }, '    ')};
    SET v_ids = LAST_INSERT_ID();
  END IF;`
    : '';
  return `CREATE PROCEDURE ${name}(
  ${SECTION_PARAMETERS}
  SQL SECURITY INVOKER
BEGIN
  DECLARE v_kind CHAR(1) CHARACTER SET ascii DEFAULT LEFT(p_kinds, 1);
  DECLARE v_resource VARBINARY(255) DEFAULT SUBSTRING(p_resources, 2, ASCII(SUBSTRING(p_resources, 1, 1)));
  DECLARE v_found INT;
  DECLARE v_free INT;
  DECLARE v_outcome VARCHAR(8) CHARACTER SET ascii DEFAULT 'taken';
  DECLARE v_at INT DEFAULT NULL;
  DECLARE v_ids VARCHAR(20) CHARACTER SET ascii DEFAULT '';
  ${BOUNDS_SET}
  IF LENGTH(p_kinds) <> 1 OR LENGTH(p_tokens) <> 16 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '${name} takes one target';
  END IF;
  START TRANSACTION;
  take: BEGIN
    ${gateTake('    ', '0')}
    ${rowTake('    ', '0')}
    ${readTake('    ', '0')}
  END take;
  SET SESSION innodb_lock_wait_timeout = @rwlock_lwt;${logged}
  SELECT v_outcome AS outcome, v_at AS at, v_ids AS ids;
END`;
}

/** `rwlock_section_begin_one`: a one-resource section's start, take and log row (migration 013). */
export const SECTION_BEGIN_ONE_ROUTINE = beginOne('rwlock_section_begin_one', true);

/**
 * `rwlock_section_begin_bare`: a one-resource section's start and take with no log row, for a
 * section run without history (migration 014). Its `ids` are empty.
 */
export const SECTION_BEGIN_BARE_ROUTINE = beginOne('rwlock_section_begin_bare', false);

/** `rwlock_section_commit_one`: a one-resource section's log row released now, COMMIT, the idle bound restored (migration 013). */
export const SECTION_COMMIT_ONE_ROUTINE = `CREATE PROCEDURE rwlock_section_commit_one(IN p_ids VARCHAR(20) CHARACTER SET ascii, IN p_idle TINYINT UNSIGNED)
  SQL SECURITY INVOKER
BEGIN
  ${sectionReleased(DB_NOW, 'id = CAST(p_ids AS UNSIGNED)', '  ')};
  COMMIT;
  ${IDLE_RESTORED}
END`;

/**
 * `rwlock_section_commit_bare`: a section without history's COMMIT and the idle bound restored,
 * in one call as its begin set that bound in one (migration 014).
 */
export const SECTION_COMMIT_BARE_ROUTINE = `CREATE PROCEDURE rwlock_section_commit_bare(IN p_idle TINYINT UNSIGNED)
  SQL SECURITY INVOKER
BEGIN
  COMMIT;
  ${IDLE_RESTORED}
END`;
