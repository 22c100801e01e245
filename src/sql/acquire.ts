import { errnoOf, ER_LOCK_WAIT_TIMEOUT, firstRow, query, type RawConnection } from './connection.js';
import { LOCK_TYPE, STATUS, type LockMode } from '../types.js';
import { DB_NOW } from './clock.js';
import { testSwitches } from '../test-switches.js';

/**
 * Why an attempt was refused other than by a full or held resource: `mixed` when the resource is held
 * in the other kind (permits for a read or write attempt; readers or a writer for a permit attempt),
 * `limit` when permits of another limit hold it (`heldLimit`).
 */
export type AcquireConflict = { kind: 'mixed' } | { kind: 'limit'; heldLimit: number };

/** What one acquire attempt answers: the grant id, or null; `busy` when the gate was held by another transaction. */
export interface AcquireReply {
  id: number | null;
  /** Set when refused because the resource is held in another kind or under another limit. */
  conflict?: AcquireConflict;
  /**
   * The resource's gate was held in a conflicting mode by another transaction (a section, or
   * another acquire's own short transaction): the attempt was refused at once rather than wait. A
   * re-attempt a moment later may be granted (see `attempt` in src/lock/acquire.ts).
   */
  busy: boolean;
}

/**
 * One acquire attempt: one round trip, one commit (procedure `rwlock_acquire`, migration 008). The
 * procedure runs its own READ COMMITTED transaction and decides as `acquireWithStatements` does:
 * the gate without waiting, then the guarded UPDATE of the lock row, the row inserted on first use,
 * the grant row inserted only when the UPDATE changed a row, and a refused writer's intent. The
 * owner travels as UTF-8 bytes and is converted on the server, whatever the connection's character
 * set and sql_mode.
 */
export async function callAcquire(
  conn: RawConnection,
  resource: Buffer,
  mode: LockMode,
  owner: Buffer,
  token: Buffer,
  intentMs: number,
): Promise<AcquireReply> {
  const result = await query(conn, 'CALL rwlock_acquire(?, ?, CONVERT(? USING utf8mb4), ?, ?)', [
    resource,
    LOCK_TYPE[mode],
    owner,
    token,
    intentMs,
  ]);
  const { id, busy, mixed } = firstRow<{
    id: number | string | null;
    busy?: number | string | null;
    mixed?: number | string | null;
  }>(result, 'rwlock_acquire');
  const reply: AcquireReply = { id: id === null ? null : Number(id), busy: Number(busy ?? 0) === 1 };
  if (Number(mixed ?? 0) > 0) reply.conflict = { kind: 'mixed' };
  return reply;
}

/*
 * The same decision as plain statements, for databases without stored routines. The procedure's
 * body lives in an applied migration and cannot change; these statements must decide exactly as it
 * does (test/procedures.test.ts runs the exclusion check on both paths).
 */
const GUARDED_UPDATE: Readonly<Record<'write' | 'read', string>> = {
  write: `UPDATE t_read_write_lock SET w_count = 1, w_wait_until = NULL, version = version + 1
 WHERE resource_id = ? AND w_count = 0 AND r_count = 0`,
  read: `UPDATE t_read_write_lock SET r_count = r_count + 1, permit_limit = NULL, version = version + 1
 WHERE resource_id = ? AND w_count = 0 AND (permit_limit IS NULL OR r_count = 0)
   AND (w_wait_until IS NULL OR w_wait_until < ${DB_NOW})`,
};
/** A refused read or write attempt: whether permit holders are what it met (migration 010's `mixed`). */
const PERMITS_HOLD =
  'SELECT 1 AS found FROM t_read_write_lock WHERE resource_id = ? AND w_count = 0 AND r_count > 0 AND permit_limit IS NOT NULL';
/** First use of a resource: the row is created already holding the lock. IGNORE: 0 rows when it exists. */
const FIRST_USE = 'INSERT IGNORE INTO t_read_write_lock (resource_id, w_count, r_count, version) VALUES (?, ?, ?, 1)';
/** First use of a resource's gate. IGNORE: 0 rows when another first user made it. */
const CREATE_GATE = 'INSERT IGNORE INTO t_lock_gate (resource_id) VALUES (?)';
/** The lock row, taken without waiting: a writer stopped at the gate marks its intent only if it can have it at once. */
const ROW_NOWAIT = 'SELECT 1 AS found FROM t_read_write_lock WHERE resource_id = ? FOR UPDATE NOWAIT';

/**
 * The gate, taken without waiting: a writer exclusively, a reader shared (a reading section holds
 * it shared, a writing section exclusively). MariaDB spells the shared NOWAIT form differently.
 */
export function gateNowait(mode: LockMode, mariadb: boolean): string {
  const lock = mode === 'write' ? 'FOR UPDATE NOWAIT' : mariadb ? 'LOCK IN SHARE MODE NOWAIT' : 'FOR SHARE NOWAIT';
  return `SELECT 1 AS found FROM t_lock_gate WHERE resource_id = ? ${lock}`;
}

/** Whether the connection's server is MariaDB, from its handshake (or asked once when the driver keeps none). */
const mariadbServer = new WeakMap<RawConnection, boolean>();
export async function isMariadb(conn: RawConnection): Promise<boolean> {
  const known = mariadbServer.get(conn);
  if (known !== undefined) return known;
  const fromHandshake = (conn as { _handshakePacket?: { serverVersion?: string } })._handshakePacket?.serverVersion;
  const version = fromHandshake ?? (await query<Array<{ v: string }>>(conn, 'SELECT VERSION() AS v'))[0]?.v ?? '';
  const mariadb = /mariadb/i.test(version);
  mariadbServer.set(conn, mariadb);
  return mariadb;
}

/** Marks a waiting writer: new readers hold back for `intentMs` (parameters: µs, resource, µs / 2). */
export const WRITER_INTENT = `UPDATE t_read_write_lock
   SET w_wait_until = ${DB_NOW} + INTERVAL ? MICROSECOND, version = version + 1
 WHERE resource_id = ? AND (w_wait_until IS NULL OR w_wait_until < ${DB_NOW} + INTERVAL ? MICROSECOND)`;
const LOG_GRANT = `INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token)
VALUES (?, ?, ${STATUS.live}, ${DB_NOW}, 0, CONVERT(? USING utf8mb4), ?)`;

/** MySQL's answer to a NOWAIT read of a locked row; MariaDB answers it with 1205. */
const ER_LOCK_NOWAIT = 3572;

/** True when a NOWAIT locking read failed because another transaction holds the row. */
export function isLockedNowait(err: unknown): boolean {
  const errno = errnoOf(err);
  return errno === ER_LOCK_NOWAIT || errno === ER_LOCK_WAIT_TIMEOUT;
}

/** A NOWAIT locking read of one row: taken, missing (no such row, nothing locked) or busy. */
export async function takeNowait(
  conn: RawConnection,
  sql: string,
  resource: Buffer,
): Promise<'taken' | 'missing' | 'busy'> {
  try {
    return (await query<unknown[]>(conn, sql, [resource])).length === 1 ? 'taken' : 'missing';
  } catch (err) {
    if (isLockedNowait(err)) return 'busy';
    throw err;
  }
}

/**
 * The gate of `resource` taken without waiting, inside the caller's open transaction, in `mode`'s
 * lock ('write' exclusively, else shared); on first use the gate row is created, and is then ours
 * exclusively until the commit. `busy` when another transaction holds it in a conflicting mode.
 */
async function takeGate(conn: RawConnection, mode: LockMode, resource: Buffer): Promise<'taken' | 'busy'> {
  const gateSql = gateNowait(mode, await isMariadb(conn));
  const gate = await takeNowait(conn, gateSql, resource);
  if (gate !== 'missing') return gate;
  const created = (await query<{ affectedRows: number }>(conn, CREATE_GATE, [resource])).affectedRows === 1;
  return created ? 'taken' : ((await takeNowait(conn, gateSql, resource)) as 'taken' | 'busy');
}

/**
 * One acquire attempt as plain statements in one READ COMMITTED transaction, deciding as the
 * procedure does. The resource's gate is taken first, without waiting (created on first use): a
 * gate held in a conflicting mode by another transaction refuses the attempt at once (`busy`).
 * With the gate held, the guarded UPDATE of the lock row decides (a locking read, so it decides on
 * the latest committed row): it can wait only for transactions that hold no gate and are short
 * (another reader's acquire, a release, a reap). The row is inserted on first use, the grant row
 * written when granted, and a refused writer marks its intent (one stopped at the gate only if it
 * can have the lock row at once). Every changed row also changes `version`, so the counts read the
 * same with and without CLIENT_FOUND_ROWS.
 */
export async function acquireWithStatements(
  conn: RawConnection,
  resource: Buffer,
  mode: LockMode,
  owner: Buffer,
  token: Buffer,
  intentMs: number,
): Promise<AcquireReply> {
  // READ COMMITTED, as in the procedure: a locking read or UPDATE of a resource not yet used would
  // otherwise take a gap lock, and first users of neighbouring new ids would deadlock on each other.
  await query(conn, 'SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
  await query(conn, 'START TRANSACTION');
  try {
    const busy = (await takeGate(conn, mode, resource)) === 'busy';
    const guarded = async (): Promise<boolean> =>
      (await query<{ affectedRows: number }>(conn, GUARDED_UPDATE[mode === 'write' ? 'write' : 'read'], [resource]))
        .affectedRows === 1;
    let granted = false;
    if (!busy) {
      granted = await guarded();
      if (!granted) {
        const write = mode === 'write' ? 1 : 0;
        granted =
          (await query<{ affectedRows: number }>(conn, FIRST_USE, [resource, write, 1 - write])).affectedRows === 1;
        // The row exists, and may have been committed by another first user only since the UPDATE
        // above looked: decide on it again, as the procedure does.
        if (!granted) granted = await guarded();
      }
    }
    let id: number | null = null;
    const mixed = !granted && !busy && (await query<unknown[]>(conn, PERMITS_HOLD, [resource])).length > 0;
    if (granted) {
      id = Number(
        (await query<{ insertId: number | string }>(conn, LOG_GRANT, [resource, LOCK_TYPE[mode], owner, token]))
          .insertId,
      );
    } else if (
      !mixed &&
      mode === 'write' &&
      intentMs > 0 &&
      (!busy || (await takeNowait(conn, ROW_NOWAIT, resource)) === 'taken')
    ) {
      await query(conn, WRITER_INTENT, [intentMs * 1000, resource, intentMs * 500]);
    }
    await query(conn, 'COMMIT');
    return mixed ? { id, busy, conflict: { kind: 'mixed' } } : { id, busy };
  } catch (err) {
    // A dead connection rolls back on the server; on a live one, end the transaction before the
    // connection goes back to the pool.
    await query(conn, 'ROLLBACK').catch(() => undefined);
    throw err;
  }
}

/** A permit attempt: how many permits it takes of a semaphore of `limit`. */
export interface PermitAsk {
  limit: number;
  count: number;
}

/**
 * One permit attempt through procedure `rwlock_acquire_permit` (migration 010): one round trip, one
 * commit, decided by the guarded UPDATE described there.
 */
export async function callAcquirePermit(
  conn: RawConnection,
  resource: Buffer,
  ask: PermitAsk,
  owner: Buffer,
  token: Buffer,
): Promise<AcquireReply> {
  const result = await query(conn, 'CALL rwlock_acquire_permit(?, CONVERT(? USING utf8mb4), ?, ?, ?)', [
    resource,
    owner,
    token,
    ask.limit,
    ask.count,
  ]);
  const row = firstRow<{
    id: number | string | null;
    busy: number | string;
    conflict: number | string | null;
    held_limit: number | string | null;
  }>(result, 'rwlock_acquire_permit');
  return permitReply(row.id === null ? null : Number(row.id), Number(row.busy) === 1, row.conflict, row.held_limit);
}

function permitReply(
  id: number | null,
  busy: boolean,
  conflict: number | string | null,
  heldLimit: number | string | null,
): AcquireReply {
  const code = Number(conflict ?? 0);
  if (id !== null || code === 0) return { id, busy };
  if (code === 2 && heldLimit !== null) return { id, busy, conflict: { kind: 'limit', heldLimit: Number(heldLimit) } };
  return { id, busy, conflict: { kind: 'mixed' } };
}

/**
 * The permit guard: no writer, and either no holder at all (the caller's limit becomes the row's) or
 * holders of the same limit with room for this many more. The decision is this one statement's, on
 * the row it locks: never a count read first and written after.
 */
const PERMIT_GUARD = `UPDATE t_read_write_lock
   SET r_count = r_count + ?, permit_limit = ?, version = version + 1
 WHERE resource_id = ? AND w_count = 0 AND (r_count = 0 OR (permit_limit = ? AND r_count + ? <= ?))`;
const PERMIT_FIRST_USE =
  'INSERT IGNORE INTO t_read_write_lock (resource_id, w_count, r_count, permit_limit, version) VALUES (?, 0, ?, ?, 1)';
/** A refused permit attempt: why, from the row as it is now (a report; the guard decided). */
const PERMIT_REFUSAL = `SELECT IF(w_count > 0 OR (permit_limit IS NULL AND r_count > 0), 1,
          IF(r_count > 0 AND permit_limit <> ?, 2, 0)) AS conflict, permit_limit AS held_limit
 FROM t_read_write_lock WHERE resource_id = ?`;
const LOG_PERMIT = `INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token, permits)
VALUES (?, ${LOCK_TYPE.permit}, ${STATUS.live}, ${DB_NOW}, 0, CONVERT(? USING utf8mb4), ?, ?)`;

/**
 * One permit attempt as plain statements in one READ COMMITTED transaction, deciding as
 * `rwlock_acquire_permit` does: the gate shared without waiting, the guarded UPDATE, the row inserted
 * on first use (and the guard again if another first user made it), the grant row with its permits.
 */
export async function acquirePermitWithStatements(
  conn: RawConnection,
  resource: Buffer,
  ask: PermitAsk,
  owner: Buffer,
  token: Buffer,
): Promise<AcquireReply> {
  await query(conn, 'SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
  await query(conn, 'START TRANSACTION');
  try {
    // Shared, as a reader's acquire takes it.
    const busy = (await takeGate(conn, 'read', resource)) === 'busy';
    const { limit, count } = ask;
    const guarded = async (): Promise<boolean> => {
      if (testSwitches.acquire.permitUnguarded) return unguardedForTests(conn, resource, ask);
      return (
        (await query<{ affectedRows: number }>(conn, PERMIT_GUARD, [count, limit, resource, limit, count, limit]))
          .affectedRows === 1
      );
    };
    let granted = false;
    let conflict: number | string | null = null;
    let heldLimit: number | string | null = null;
    if (!busy) {
      granted = await guarded();
      if (!granted) {
        granted =
          (await query<{ affectedRows: number }>(conn, PERMIT_FIRST_USE, [resource, count, limit])).affectedRows === 1;
        if (!granted) granted = await guarded();
      }
      if (!granted) {
        const [why] = await query<Array<{ conflict: number | string; held_limit: number | string | null }>>(
          conn,
          PERMIT_REFUSAL,
          [limit, resource],
        );
        conflict = why?.conflict ?? null;
        heldLimit = why?.held_limit ?? null;
      }
    }
    let id: number | null = null;
    if (granted)
      id = Number(
        (await query<{ insertId: number | string }>(conn, LOG_PERMIT, [resource, owner, token, count])).insertId,
      );
    await query(conn, 'COMMIT');
    return permitReply(id, busy, conflict, heldLimit);
  } catch (err) {
    await query(conn, 'ROLLBACK').catch(() => undefined);
    throw err;
  }
}

/** The broken check of `testSwitches.acquire.permitUnguarded`: a plain read of the count, then an UPDATE that checks nothing. */
async function unguardedForTests(conn: RawConnection, resource: Buffer, ask: PermitAsk): Promise<boolean> {
  const [row] = await query<Array<{ w_count: number; r_count: number }>>(
    conn,
    'SELECT w_count, r_count FROM t_read_write_lock WHERE resource_id = ?',
    [resource],
  );
  if (row === undefined || row.w_count > 0 || Number(row.r_count) + ask.count > ask.limit) return false;
  // Widen the window between the read and the write, as a slow client would: wide enough that
  // several of the control's 32 workers read the same count on a busy 2-core machine.
  await query(conn, 'DO SLEEP(0.02)');
  return (
    (
      await query<{ affectedRows: number }>(
        conn,
        'UPDATE t_read_write_lock SET r_count = r_count + ?, permit_limit = ?, version = version + 1 WHERE resource_id = ?',
        [ask.count, ask.limit, resource],
      )
    ).affectedRows === 1
  );
}
