import type { Knex } from 'knex';
import { runOnOneConnection, unlessPresent, type AddedInPlace } from './conditional-ddl.js';
import { DB_NOW } from './007_utc_times.js';
import { PROCEDURES as V8 } from './008_resource_gate.js';
import { PROCEDURES as V9 } from './009_section_take.js';
import { replaceProcedures } from './procedures.js';

/**
 * Version 10: counting semaphores (`acquirePermit`, `withPermit`).
 *
 * - `t_read_write_lock.permit_limit`: the limit of the semaphore whose permits the row counts, NULL
 *   for a read-write lock. Permit holders are counted in `r_count`, as readers are, so releases,
 *   the reaper, the fence and the count check work on them unchanged. The limit is stored with the
 *   row, not only checked by each caller, so that the guard compares the count with one limit:
 *   callers that each checked their own could together pass the smallest one.
 * - `t_lock_log.permits`: how many permits a permit grant holds (its `lock_type` is a reader's, 1),
 *   NULL for read and write grants; a release gives back that many.
 * - `rwlock_acquire_permit`: one attempt, decided by one guarded UPDATE: no writer, and either no
 *   holder at all (the caller's limit then becomes the row's: an idle resource has no kind and no
 *   limit) or holders of the same limit with room for `p_count` more. Never read-then-write. The
 *   gate is taken shared without waiting, as a reader's acquire takes it. When refused, the row
 *   says why: `conflict` 1 when readers or a writer hold the resource, 2 when permits of another
 *   limit do (`held_limit`), 0 when the semaphore is full.
 * - `rwlock_acquire` (version 8's, otherwise unchanged): a reader also needs no permit holders
 *   (`permit_limit IS NULL OR r_count = 0`) and clears the limit of an idle semaphore; the result
 *   set gains `mixed`, 1 when a refused read or write attempt met permit holders, which earlier
 *   clients do not read.
 * - `rwlock_section_take` (version 9's, otherwise unchanged): a reading section also needs no permit
 *   holders, in its guarded UPDATE and in its plain read alike, as the statements path decides.
 *
 * Lock managers need this version (CLIENT_NEEDS): a client's plain-statement reader that does not
 * check the limit would join a semaphore's holders.
 */
export const ADDS_LIMIT: AddedInPlace = { kind: 'column', table: 't_read_write_lock', name: 'permit_limit' };
export const ADDS_PERMITS: AddedInPlace = { kind: 'column', table: 't_lock_log', name: 'permits' };

export const STATEMENTS: readonly string[] = [
  ...unlessPresent(ADDS_LIMIT, 'ALTER TABLE t_read_write_lock ADD COLUMN permit_limit INT UNSIGNED NULL DEFAULT NULL'),
  ...unlessPresent(ADDS_PERMITS, 'ALTER TABLE t_lock_log ADD COLUMN permits INT UNSIGNED NULL DEFAULT NULL'),
];

const READ_GUARD_V8 = `UPDATE t_read_write_lock SET r_count = r_count + 1, version = version + 1
       WHERE resource_id = p_resource AND w_count = 0
         AND (w_wait_until IS NULL OR w_wait_until < ${DB_NOW});`;
const READ_GUARD = `UPDATE t_read_write_lock SET r_count = r_count + 1, permit_limit = NULL, version = version + 1
       WHERE resource_id = p_resource AND w_count = 0 AND (permit_limit IS NULL OR r_count = 0)
         AND (w_wait_until IS NULL OR w_wait_until < ${DB_NOW});`;
const INTENT_V8 = 'IF v_granted = 0 AND p_mode = 0 AND p_intent_ms > 0 THEN';
const MIXED = `IF v_granted = 0 AND v_busy = 0 THEN
    SELECT COUNT(*) INTO v_mixed FROM t_read_write_lock
     WHERE resource_id = p_resource AND w_count = 0 AND r_count > 0 AND permit_limit IS NOT NULL;
  END IF;
  IF v_granted = 0 AND v_mixed = 0 AND p_mode = 0 AND p_intent_ms > 0 THEN`;

function acquireV10(): string {
  let body = V8.rwlock_acquire!;
  const parts = body.split(READ_GUARD_V8);
  if (parts.length !== 3) throw new Error('010: version 8 acquire no longer has its two read guards');
  body = parts.join(READ_GUARD);
  if (!body.includes(INTENT_V8)) throw new Error('010: version 8 acquire no longer marks intent as expected');
  body = body
    .replace(INTENT_V8, MIXED)
    .replace('DECLARE v_busy INT DEFAULT 0;', 'DECLARE v_busy INT DEFAULT 0;\n  DECLARE v_mixed INT DEFAULT 0;')
    .replace('SELECT v_id AS id, v_busy AS busy;', 'SELECT v_id AS id, v_busy AS busy, v_mixed AS mixed;');
  return body;
}

const SECTION_READ_V9 = `w_count = 0 AND (w_wait_until IS NULL OR w_wait_until < ${DB_NOW})`;
const SECTION_READ = `w_count = 0 AND (permit_limit IS NULL OR r_count = 0) AND (w_wait_until IS NULL OR w_wait_until < ${DB_NOW})`;

function sectionTakeV10(): string {
  const parts = V9.rwlock_section_take!.split(SECTION_READ_V9);
  if (parts.length !== 3) throw new Error("010: version 9's section take no longer has its two read decisions");
  return parts.join(SECTION_READ);
}

/**
 * Version 8's gate take, as its acquire runs it (the prepared NOWAIT read, the first-use insert, `v_busy`
 * when another transaction holds the gate), taken shared as a reader's acquire takes it.
 */
function readerGateV8(): string {
  const body = V8.rwlock_acquire!;
  const start = body.indexOf('  BEGIN\n    -- A gate another transaction holds');
  const end = body.indexOf('  IF v_busy = 0 THEN', start);
  const modeClause = `IF(p_mode = 0, 'FOR UPDATE NOWAIT', IF(VERSION() LIKE '%MariaDB%', 'LOCK IN SHARE MODE NOWAIT', 'FOR SHARE NOWAIT'))`;
  const block = start < 0 || end < 0 ? '' : body.slice(start, end).trimEnd();
  if (!block.includes(modeClause)) throw new Error('010: version 8 acquire no longer takes its gate as expected');
  return block.replace(modeClause, `IF(VERSION() LIKE '%MariaDB%', 'LOCK IN SHARE MODE NOWAIT', 'FOR SHARE NOWAIT')`);
}
const READER_GATE = readerGateV8();

const PERMIT_GUARD = `UPDATE t_read_write_lock
       SET r_count = r_count + p_count, permit_limit = p_limit, version = version + 1
     WHERE resource_id = p_resource AND w_count = 0 AND p_count <= p_limit
       AND (r_count = 0 OR (permit_limit = p_limit AND r_count + p_count <= p_limit));
    SET v_granted = ROW_COUNT();`;

export const PROCEDURES: Readonly<Record<string, string>> = {
  rwlock_acquire: acquireV10(),
  rwlock_section_take: sectionTakeV10(),
  rwlock_acquire_permit: `CREATE PROCEDURE rwlock_acquire_permit(
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
${READER_GATE}
  IF v_busy = 0 THEN
    ${PERMIT_GUARD}
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
        ${PERMIT_GUARD}
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
    VALUES (p_resource, 1, 0, ${DB_NOW}, 0, p_owner, p_token, p_count);
    SET v_id = LAST_INSERT_ID();
  END IF;
  COMMIT;
  SELECT v_id AS id, v_busy AS busy, v_conflict AS conflict, v_held_limit AS held_limit;
END`,
};

export async function up(knex: Knex, options = { procedures: true }): Promise<void> {
  await runOnOneConnection(knex, STATEMENTS);
  if (!options.procedures) return;
  await replaceProcedures(knex, PROCEDURES);
}

/** Back to version 8's acquire and version 9's section take; the permit procedure and columns are dropped. */
export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP PROCEDURE IF EXISTS rwlock_acquire_permit');
  await replaceProcedures(knex, { rwlock_acquire: V8.rwlock_acquire!, rwlock_section_take: V9.rwlock_section_take! });
  await knex.raw('ALTER TABLE t_lock_log DROP COLUMN permits');
  await knex.raw('ALTER TABLE t_read_write_lock DROP COLUMN permit_limit');
}
