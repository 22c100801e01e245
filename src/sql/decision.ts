import { DEFAULTS, LIMITS } from '../options.js';
import { RELEASED_BY, STATUS } from '../types.js';
import { DB_NOW } from './clock.js';

/*
 * The lock's decision, each piece written once. A piece is a function of how its resource and
 * parameters are spelled: `?` in a plain statement (src/sql/acquire.ts, src/sql/section.ts), a
 * routine's parameter or variable (`p_resource`, `v_resource`, `p_intent_ms * 1000`) in the current
 * routine bodies (src/sql/routines-*.ts), which a new migration freezes (CONTRIBUTING.md, "Change how
 * a lock is decided"). `i` is the indent of a piece's continuation lines, so that a routine reads as
 * its frozen text does; a plain statement passes ''. Changing a piece changes both paths at once:
 * test/unit/migration-texts.test.ts then fails until a migration freezes the new routine bodies.
 */

/** No writer intent in force: new readers hold back while a waiting writer's mark lasts. */
export const NO_WRITER_INTENT = `(w_wait_until IS NULL OR w_wait_until < ${DB_NOW})`;
/** Nobody holds the lock: what a writer needs (it ignores the intent, which holds back readers only). */
export const NO_HOLDER = 'w_count = 0 AND r_count = 0';
/** No writer and no semaphore's permits: what a reader needs, with no writer intent in force. */
export const NO_WRITER_NOR_PERMITS = 'w_count = 0 AND (permit_limit IS NULL OR r_count = 0)';
/** A reader's whole test, on one line: no writer, no permits, no writer intent in force. */
export const READER_FREE = `${NO_WRITER_NOR_PERMITS} AND ${NO_WRITER_INTENT}`;
/** Permit holders and nothing else: what a refused read or write attempt reports as `mixed`. */
export const PERMITS_HOLD = 'w_count = 0 AND r_count > 0 AND permit_limit IS NOT NULL';

/** The gate's and the lock row's locking clauses: waiting (a section) and without waiting (an acquire). */
export const LOCKING = Object.freeze({
  exclusive: 'FOR UPDATE',
  shared: 'LOCK IN SHARE MODE',
  exclusiveNowait: 'FOR UPDATE NOWAIT',
  /** MariaDB spells the shared NOWAIT form as its older shared read; MySQL 8 has FOR SHARE. */
  sharedNowaitMariadb: 'LOCK IN SHARE MODE NOWAIT',
  sharedNowaitMysql: 'FOR SHARE NOWAIT',
});

/** In a routine: the shared NOWAIT clause of the server it runs on. */
export const SHARED_NOWAIT_IN_ROUTINE = `IF(VERSION() LIKE '%MariaDB%', '${LOCKING.sharedNowaitMariadb}', '${LOCKING.sharedNowaitMysql}')`;

/** In a routine: the gate's NOWAIT clause, exclusive where `isWrite` holds, shared otherwise. */
export function gateNowaitInRoutine(isWrite: string): string {
  return `IF(${isWrite}, '${LOCKING.exclusiveNowait}', ${SHARED_NOWAIT_IN_ROUTINE})`;
}

/** A read of the resource's gate row, with `clause` (none: a plain read). */
export function gateRead(what: string, resource: string, clause: string): string {
  return `SELECT ${what} FROM t_lock_gate WHERE resource_id = ${resource}${clause === '' ? '' : ` ${clause}`}`;
}

/** A read of the resource's lock row, with `clause` (none: a plain read). */
export function rowRead(what: string, resource: string, clause: string): string {
  return `SELECT ${what} FROM t_read_write_lock WHERE resource_id = ${resource}${clause === '' ? '' : ` ${clause}`}`;
}

/** First use of a resource's gate. IGNORE: nothing when another first user made it. */
export function createGate(resource: string): string {
  return `INSERT IGNORE INTO t_lock_gate (resource_id) VALUES (${resource})`;
}

/**
 * The gate taken without waiting, in a routine (after `SET @rwlock_resource`): a prepared locking
 * read, since MariaDB refuses NOWAIT in a routine's body (1314) but runs it prepared; created on first
 * use, and then ours exclusively until the commit. `@rwlock_found` is NULL when another transaction
 * holds it (MySQL 3572, ER_LOCK_NOWAIT; MariaDB 1205). `lock`: the clause, as a routine expression.
 * `declared`: lines the block runs right after its handler.
 */
export function gateTakeNowait(resource: string, lock: string, i: string, declared = ''): string {
  return `-- A gate another transaction holds: MySQL 3572 (ER_LOCK_NOWAIT), MariaDB 1205.
${i}DECLARE CONTINUE HANDLER FOR 3572, 1205 SET @rwlock_found = NULL;${declared}
${i}SET @rwlock_take = CONCAT('${gateRead('COUNT(*) INTO @rwlock_found', '?', '')} ',
${i}  ${lock});
${i}PREPARE rwlock_take FROM @rwlock_take;
${i}SET @rwlock_found = NULL;
${i}EXECUTE rwlock_take USING @rwlock_resource;
${i}IF @rwlock_found = 0 THEN
${i}  -- First use of the gate: the new row is ours, exclusively, until the commit.
${i}  ${createGate(resource)};
${i}  IF ROW_COUNT() <> 1 THEN
${i}    SET @rwlock_found = NULL;
${i}    EXECUTE rwlock_take USING @rwlock_resource;
${i}  END IF;
${i}END IF;
${i}DEALLOCATE PREPARE rwlock_take;`;
}

/** The write guard: the lock row taken by a writer only when nobody holds it. Changes 1 row when granted. */
export function writeGuard(resource: string, i: string): string {
  return `UPDATE t_read_write_lock SET w_count = 1, w_wait_until = NULL, version = version + 1
${i} WHERE resource_id = ${resource} AND ${NO_HOLDER}`;
}

/** The read guard: no writer, no permits, no writer intent in force; clears an idle semaphore's limit. */
export function readGuard(resource: string, i: string): string {
  return `UPDATE t_read_write_lock SET r_count = r_count + 1, permit_limit = NULL, version = version + 1
${i} WHERE resource_id = ${resource} AND ${NO_WRITER_NOR_PERMITS}
${i}   AND ${NO_WRITER_INTENT}`;
}

/** In a routine: the write or read guard by `isWrite`, its verdict in `v_granted`. */
export function guardByMode(isWrite: string, resource: string, i: string): string {
  return `IF ${isWrite} THEN
${i}  ${writeGuard(resource, `${i}  `)};
${i}ELSE
${i}  ${readGuard(resource, `${i}  `)};
${i}END IF;
${i}SET v_granted = ROW_COUNT();`;
}

/**
 * A section's guard on the lock row: the durable acquire's test, counting nothing (the section holds
 * the row by its InnoDB lock until its commit). Changes 1 row when taken.
 */
export function sectionGuard(kind: 'write' | 'read', resource: string, i: string): string {
  return `UPDATE t_read_write_lock SET version = version + 1
${i} WHERE resource_id = ${resource} AND ${kind === 'write' ? NO_HOLDER : READER_FREE}`;
}

/**
 * The permit guard: no writer, and either no holder at all (the caller's limit becomes the row's) or
 * holders of the same limit with room for `count` more. The decision is this one statement's, on the
 * row it locks: never a count read first and written after.
 */
export function permitGuard(resource: string, count: string, limit: string, i: string): string {
  return `UPDATE t_read_write_lock
${i}   SET r_count = r_count + ${count}, permit_limit = ${limit}, version = version + 1
${i} WHERE resource_id = ${resource} AND w_count = 0 AND ${count} <= ${limit}
${i}   AND (r_count = 0 OR (permit_limit = ${limit} AND r_count + ${count} <= ${limit}))`;
}

/** A refused permit attempt, why (a report; the guard decided): 1 readers or a writer, 2 another limit, 0 full. */
export function permitConflict(limit: string, i: string): string {
  return `IF(w_count > 0 OR (permit_limit IS NULL AND r_count > 0), 1,
${i}          IF(r_count > 0 AND permit_limit <> ${limit}, 2, 0))`;
}

/** First use of a resource: its lock row created already holding the lock (`write`, `read`: the counts). */
export function firstUse(insert: string, resource: string, write: string, read: string, i: string): string {
  return `${insert} INTO t_read_write_lock (resource_id, w_count, r_count, version)
${i}VALUES (${resource}, ${write}, ${read}, 1)`;
}

/** First use of a semaphore: its lock row created holding `count` permits of `limit`, if they fit. */
export function permitFirstUse(insert: string, resource: string, count: string, limit: string, i: string): string {
  return `${insert} INTO t_read_write_lock (resource_id, w_count, r_count, permit_limit, version)
${i}SELECT ${resource}, 0, ${count}, ${limit}, 1 FROM DUAL WHERE ${count} <= ${limit}`;
}

/** A refused writer's intent: readers hold back for `full` µs; renewed once half of it is left. */
export function writerIntent(resource: string, full: string, half: string, i: string): string {
  return `UPDATE t_read_write_lock
${i}   SET w_wait_until = ${DB_NOW} + INTERVAL ${full} MICROSECOND, version = version + 1
${i} WHERE resource_id = ${resource}
${i}   AND (w_wait_until IS NULL OR w_wait_until < ${DB_NOW} + INTERVAL ${half} MICROSECOND)`;
}

/** A grant's log row, live, dated now (`permits`: a permit grant's count). */
export function logGrant(
  p: { resource: string; type: string; owner: string; token: string; permits?: string },
  i: string,
): string {
  const permits = p.permits === undefined ? ['', ''] : [', permits', `, ${p.permits}`];
  return `INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token${permits[0]})
${i}VALUES (${p.resource}, ${p.type}, ${STATUS.live}, ${DB_NOW}, 0, ${p.owner}, ${p.token}${permits[1]})`;
}

/** A section's log row: in progress, `released_at` NULL until its commit, marked released by `section`. */
export function logSection(p: { resource: string; type: string; owner: string; token: string }, i: string): string {
  return `INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token, released_at, released_by)
${i}VALUES (${p.resource}, ${p.type}, ${STATUS.sectionInProgress}, ${DB_NOW}, 1, ${p.owner}, ${p.token}, NULL, ${RELEASED_BY.section})`;
}

/** A section's release, in its transaction just before its COMMIT: its log rows (`which`) released at `now`. */
export function sectionReleased(now: string, which: string, i: string): string {
  return `UPDATE t_lock_log SET status = ${STATUS.released}, released_at = ${now}
${i} WHERE ${which} AND status = ${STATUS.sectionInProgress}`;
}

/**
 * The furthest ahead of now the library ever dates a grant, in microseconds: a lease is at most
 * `LIMITS.maxTimerMs` long, and a grant's creation is now. A time further ahead was not written by
 * the library (a row planted by hand, say leased to 2099) and protects nothing.
 */
export const BEYOND_ANY_LEASE_US = LIMITS.maxTimerMs * 1000;

/** How long past a lease's end its grant turns stale, in microseconds: `DEFAULTS.leaseGraceMs`. */
const LEASE_GRACE_US = DEFAULTS.leaseGraceMs * 1000;

/**
 * Whether a grant is under a lease: one set (by `leaseMs`, `lockAtMostFor`, `grant.extend()`) and
 * dated no further ahead than the library could have dated it (see BEYOND_ANY_LEASE_US).
 */
const LEASED_SQL = `(lease_until IS NOT NULL AND lease_until <= ${DB_NOW} + INTERVAL ${BEYOND_ANY_LEASE_US} MICROSECOND)`;

/**
 * The lease rule, in this one place: the time, on the database clock, at which a live grant turns
 * stale. A grant under a lease turns stale `DEFAULTS.leaseGraceMs` after its lease runs out,
 * whatever its age and whatever the cutoff: its lease is its time to live, as a peer's TTL is. A
 * grant without one turns stale the cutoff (the one parameter, in microseconds) after it was
 * granted. The reaper, a self-healing acquire (and its wait until the next grant turns stale), the
 * maintenance sweep and every reader that calls a grant stale (`list()`, `stats()`, `inspect()`)
 * read this, through STALE_SQL, so they all agree. Plain statements only: no routine reads it.
 */
export const STALE_AT_SQL = `(CASE WHEN ${LEASED_SQL} THEN lease_until + INTERVAL ${LEASE_GRACE_US} MICROSECOND ELSE create_time + INTERVAL ? MICROSECOND END)`;

/**
 * When a live grant is stale (one parameter, the cutoff in microseconds): its STALE_AT_SQL has
 * passed, or it was created further ahead than the library could have dated it (such a row would
 * otherwise block its resource for as long as its date says).
 */
export const STALE_SQL = `(create_time > ${DB_NOW} + INTERVAL ${BEYOND_ANY_LEASE_US} MICROSECOND OR ${STALE_AT_SQL} < ${DB_NOW})`;

/**
 * A grant's age alone (one parameter, the cutoff in µs), or dated beyond any lease: not the rule,
 * which lets a lease end a grant before the cutoff or keep it past it. The negative control of the
 * self-heal's tests (`testSwitches.heal.ageOnly`).
 */
export function agedSql(): string {
  return `(create_time < ${DB_NOW} - INTERVAL ? MICROSECOND OR create_time > ${DB_NOW} + INTERVAL ${BEYOND_ANY_LEASE_US} MICROSECOND)`;
}
