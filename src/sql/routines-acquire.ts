import { LOCK_TYPE } from '../types.js';
import {
  firstUse,
  gateRead,
  gateNowaitInRoutine,
  gateTakeNowait,
  guardByMode,
  logGrant,
  permitConflict,
  permitFirstUse,
  permitGuard,
  PERMITS_HOLD,
  rowRead,
  SHARED_NOWAIT_IN_ROUTINE,
  writerIntent,
} from './decision.js';

/*
 * The current bodies of the durable acquire's routines, built from the decision's pieces
 * (src/sql/decision.ts). What a database runs is the frozen text of the migration that created each
 * (migrations/sql/); test/unit/migration-texts.test.ts holds these equal to the newest of them.
 */

/**
 * After a refused guard (`v_granted` 0): the lock row created on first use, holding the lock; or, when
 * another first user made it meanwhile, the guard run again (`guardIndent`: its continuation lines).
 * `declared`: lines run right after the duplicate-key handler.
 */
function firstUseOrAgain(isWrite: string, resource: string, guardIndent: string, declared: string): string {
  return `IF v_granted = 0 THEN
      IF NOT EXISTS (${rowRead('1', resource, '')}) THEN
        BEGIN
          DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;${declared}
          ${firstUse('INSERT', resource, `IF(${isWrite}, 1, 0)`, `IF(${isWrite}, 0, 1)`, '          ')};
          IF v_duplicate = 0 THEN SET v_granted = 1; END IF;
        END;
      END IF;
      IF v_granted = 0 THEN
        -- The row exists, and may have been committed by another first user only since the UPDATE
        -- above looked (READ COMMITTED reads the last committed version): decide on it again.
        ${guardByMode(isWrite, resource, guardIndent)}
      END IF;
    END IF;`;
}

/**
 * A one-resource attempt's own READ COMMITTED transaction, opened with the gate of `p_resource` taken
 * without waiting (`lock`: its clause); `v_busy` 1 when another transaction holds it.
 */
function gateFirst(lock: string): string {
  return `DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  SET @rwlock_resource = p_resource;
  BEGIN
    ${gateTakeNowait('p_resource', lock, '    ')}
    IF @rwlock_found IS NULL THEN SET v_busy = 1; END IF;
  END;`;
}

/**
 * `rwlock_acquire`: one attempt, one READ COMMITTED transaction: the gate without waiting, the guard,
 * the row on first use, the grant's log row, a refused writer's intent (migrations 008, 010).
 */
export const ACQUIRE = `CREATE PROCEDURE rwlock_acquire(
  IN p_resource VARBINARY(255), IN p_mode TINYINT UNSIGNED, IN p_owner VARCHAR(255) CHARACTER SET utf8mb4,
  IN p_token BINARY(16), IN p_intent_ms INT UNSIGNED)
  SQL SECURITY INVOKER
BEGIN
  DECLARE v_granted INT DEFAULT 0;
  DECLARE v_duplicate INT DEFAULT 0;
  DECLARE v_busy INT DEFAULT 0;
  DECLARE v_mixed INT DEFAULT 0;
  DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
  ${gateFirst(gateNowaitInRoutine('p_mode = 0'))}
  IF v_busy = 0 THEN
    ${guardByMode('p_mode = 0', 'p_resource', '    ')}
    ${firstUseOrAgain('p_mode = 0', 'p_resource', '    ', '')}
  END IF;
  IF v_granted = 0 AND v_busy = 0 THEN
    SELECT COUNT(*) INTO v_mixed FROM t_read_write_lock
     WHERE resource_id = p_resource AND ${PERMITS_HOLD};
  END IF;
  IF v_granted = 0 AND v_mixed = 0 AND p_mode = 0 AND p_intent_ms > 0 THEN
    IF v_busy = 1 THEN
      -- Stopped at the gate: mark the intent only if the gate can be had shared at once. Then only
      -- short transactions can hold the lock row (readers' acquires, releases, a reap), so the mark
      -- waits for them; a writing section or a durable writer holds the gate exclusively.
      BEGIN
        DECLARE CONTINUE HANDLER FOR 3572, 1205 SET @rwlock_found = NULL;
        SET @rwlock_found = NULL;
        SET @rwlock_take = CONCAT('${gateRead('COUNT(*) INTO @rwlock_found', '?', '')} ', ${SHARED_NOWAIT_IN_ROUTINE});
        PREPARE rwlock_take FROM @rwlock_take;
        EXECUTE rwlock_take USING @rwlock_resource;
        DEALLOCATE PREPARE rwlock_take;
      END;
    END IF;
    IF v_busy = 0 OR @rwlock_found = 1 THEN
      ${writerIntent('p_resource', 'p_intent_ms * 1000', 'p_intent_ms * 500', '      ')};
    END IF;
  END IF;
  IF v_granted = 1 THEN
    ${logGrant({ resource: 'p_resource', type: 'p_mode', owner: 'p_owner', token: 'p_token' }, '    ')};
    SET v_id = LAST_INSERT_ID();
  END IF;
  COMMIT;
  SELECT v_id AS id, v_busy AS busy, v_mixed AS mixed;
END`;

/**
 * `rwlock_acquire_permit`: one permit attempt, decided by the permit guard under the gate taken
 * shared, as a reader's acquire takes it; a refusal says why (migration 010).
 */
export const ACQUIRE_PERMIT = `CREATE PROCEDURE rwlock_acquire_permit(
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
  ${gateFirst(SHARED_NOWAIT_IN_ROUTINE)}
  IF v_busy = 0 THEN
    ${permitGuard('p_resource', 'p_count', 'p_limit', '    ')};
    SET v_granted = ROW_COUNT();
    IF v_granted = 0 THEN
      IF NOT EXISTS (${rowRead('1', 'p_resource', '')}) THEN
        BEGIN
          DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
          ${permitFirstUse('INSERT', 'p_resource', 'p_count', 'p_limit', '          ')};
          IF v_duplicate = 0 AND ROW_COUNT() = 1 THEN SET v_granted = 1; END IF;
        END;
      END IF;
      IF v_granted = 0 THEN
        ${permitGuard('p_resource', 'p_count', 'p_limit', '    ')};
    SET v_granted = ROW_COUNT();
      END IF;
    END IF;
    IF v_granted = 0 THEN
      -- Refused: why, from the row as it is now (a report only; the UPDATE above decided).
      SELECT ${permitConflict('p_limit', '      ')}, permit_limit
        INTO v_conflict, v_held_limit
        FROM t_read_write_lock WHERE resource_id = p_resource;
    END IF;
  END IF;
  IF v_granted = 1 THEN
    ${logGrant({ resource: 'p_resource', type: `${LOCK_TYPE.permit}`, owner: 'p_owner', token: 'p_token', permits: 'p_count' }, '    ')};
    SET v_id = LAST_INSERT_ID();
  END IF;
  COMMIT;
  SELECT v_id AS id, v_busy AS busy, v_conflict AS conflict, v_held_limit AS held_limit;
END`;

/** The next packed target: its kind and resource id, the position moved past it (as a section's take reads them). */
export function nextTarget(i: string): string {
  return `SET v_kind = SUBSTRING(p_kinds, v_i + 1, 1);
${i}SET v_resource = SUBSTRING(p_resources, v_pos + 1, ASCII(SUBSTRING(p_resources, v_pos, 1)));
${i}SET v_pos = v_pos + 1 + LENGTH(v_resource);`;
}

/**
 * The packed targets' parameters (resource ids each after a length byte, a kind letter each, 16-byte
 * tokens), and the variables that walk them, as a section's take and a group's acquire declare them.
 */
export const PACKED_PARAMETERS = `IN p_resources BLOB, IN p_kinds VARCHAR(64) CHARACTER SET ascii, IN p_owner VARCHAR(255) CHARACTER SET utf8mb4,
  IN p_tokens VARBINARY(1024)`;
export const PACKED_TARGETS = `DECLARE v_n INT DEFAULT LENGTH(p_kinds);
  DECLARE v_i INT DEFAULT 0;
  DECLARE v_pos INT DEFAULT 1;
  DECLARE v_kind CHAR(1) CHARACTER SET ascii;
  DECLARE v_resource VARBINARY(255);`;

/** A packed target's token: 16 bytes each, in the targets' order. */
export const TARGET_TOKEN = 'SUBSTRING(p_tokens, v_i * 16 + 1, 16)';
/** A packed target's lock type: `w` a writer, any other letter a reader. */
export const TARGET_TYPE = `IF(v_kind = 'w', ${LOCK_TYPE.write}, ${LOCK_TYPE.read})`;

/**
 * `rwlock_acquire_group`: every target decided as `rwlock_acquire` decides one, in one transaction,
 * all or nothing; no writer intent (migration 011).
 */
export const ACQUIRE_GROUP = `CREATE PROCEDURE rwlock_acquire_group(
  ${PACKED_PARAMETERS})
  SQL SECURITY INVOKER
BEGIN
  ${PACKED_TARGETS}
  DECLARE v_granted INT DEFAULT 0;
  DECLARE v_duplicate INT DEFAULT 0;
  DECLARE v_outcome VARCHAR(8) CHARACTER SET ascii DEFAULT 'granted';
  DECLARE v_at INT DEFAULT NULL;
  DECLARE v_ids VARCHAR(1400) CHARACTER SET ascii DEFAULT '';
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  take: WHILE v_i < v_n DO
    ${nextTarget('    ')}
    BEGIN
      ${gateTakeNowait('v_resource', gateNowaitInRoutine("v_kind = 'w'"), '      ', '\n      SET @rwlock_resource = v_resource;')}
    END;
    IF @rwlock_found IS NULL THEN SET v_outcome = 'busy', v_at = v_i; LEAVE take; END IF;
    ${guardByMode("v_kind = 'w'", 'v_resource', '      ')}
    ${firstUseOrAgain("v_kind = 'w'", 'v_resource', '      ', '\n          SET v_duplicate = 0;')}
    IF v_granted = 0 THEN SET v_outcome = 'held', v_at = v_i; LEAVE take; END IF;
    ${logGrant({ resource: 'v_resource', type: TARGET_TYPE, owner: 'p_owner', token: TARGET_TOKEN }, '    ')};
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
END`;
