import { RELEASED_ROWS, releaseStatement } from './release.js';

/** The start of the message `rwlock_fence_commit` signals when its fence did not release the grant; the rows it changed follow. */
export const FENCE_REFUSED = 'rwlock_fence_commit: fence changed';

/*
 * The current body of the fenced commit's routine, built from the release statement
 * (src/sql/release.ts); test/unit/migration-texts.test.ts holds it equal to its newest frozen text
 * (migrations/sql/).
 */

/**
 * `rwlock_fence_commit`: the fence and the business transaction's COMMIT in one call, inside the
 * caller's open transaction (migration 015). The fence is the release statement the client would
 * send. When it released the grant the transaction commits, and the call replies as a COMMIT does;
 * otherwise (the grant no longer live: reaped, or released by someone else) it rolls back, the
 * business writes with it, and signals FENCE_REFUSED with the rows the fence changed. Any error
 * rolls back too, so the session is never left in the caller's transaction. No result set: the
 * reply is one packet, either way, as a COMMIT's is.
 */
export const FENCE_COMMIT_ROUTINE = `CREATE PROCEDURE rwlock_fence_commit(
  IN p_by TINYINT UNSIGNED, IN p_w INT UNSIGNED, IN p_r INT UNSIGNED, IN p_id BIGINT UNSIGNED,
  IN p_resource VARCHAR(510) CHARACTER SET ascii, IN p_type TINYINT UNSIGNED, IN p_token CHAR(32) CHARACTER SET ascii)
  SQL SECURITY INVOKER
BEGIN
  DECLARE v_fenced INT;
  DECLARE v_message VARCHAR(128);
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  ${releaseStatement(['p_by', 'p_w', 'p_r', 'p_id', 'p_resource', 'p_type', 'p_token'])};
  SET v_fenced = ROW_COUNT();
  IF v_fenced <> ${RELEASED_ROWS} THEN
    ROLLBACK;
    SET v_message = CONCAT('${FENCE_REFUSED} ', v_fenced);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;
  COMMIT;
END`;
