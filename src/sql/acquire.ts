import { errnoOf, ER_LOCK_WAIT_TIMEOUT, firstRow, query, type RawConnection } from './connection.js';
import { LOCK_TYPE, type LockMode } from '../types.js';
import {
  createGate,
  firstUse,
  gateRead,
  LOCKING,
  logGrant,
  permitConflict,
  permitFirstUse,
  permitGuard,
  PERMITS_HOLD,
  readGuard,
  rowRead,
  writeGuard,
  writerIntent,
} from './decision.js';
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
 * The same decision as plain statements, for databases without stored routines: the routine's
 * pieces (src/sql/decision.ts) spelled with `?`, so both paths decide alike by construction
 * (test/procedures.test.ts runs the exclusion check on both paths).
 */
const GUARDED_UPDATE: Readonly<Record<'write' | 'read', string>> = {
  write: writeGuard('?', ''),
  read: readGuard('?', ''),
};
/** A refused read or write attempt: whether permit holders are what it met (migration 010's `mixed`). */
const MIXED = `${rowRead('1 AS found', '?', '')} AND ${PERMITS_HOLD}`;
/** First use of a resource: the row is created already holding the lock. IGNORE: 0 rows when it exists. */
const FIRST_USE = firstUse('INSERT IGNORE', '?', '?', '?', '');
/** First use of a resource's gate. IGNORE: 0 rows when another first user made it. */
const CREATE_GATE = createGate('?');

/** The lock row, taken without waiting: what the intent mark needed before migration 016 (a test's control). */
const ROW_NOWAIT = rowRead('1 AS found', '?', LOCKING.exclusiveNowait);

/** What a writer stopped at the gate must have at once to mark its intent: the gate, shared. */
async function intentGate(conn: RawConnection): Promise<string> {
  return testSwitches.acquire.intentNeedsRowAtOnce ? ROW_NOWAIT : gateNowait('read', await isMariadb(conn));
}

/**
 * The gate, taken without waiting: a writer exclusively, a reader shared (a reading section holds
 * it shared, a writing section exclusively). MariaDB spells the shared NOWAIT form differently.
 */
export function gateNowait(mode: LockMode, mariadb: boolean): string {
  const lock =
    mode === 'write' ? LOCKING.exclusiveNowait : mariadb ? LOCKING.sharedNowaitMariadb : LOCKING.sharedNowaitMysql;
  return gateRead('1 AS found', '?', lock);
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
export const WRITER_INTENT = writerIntent('?', '?', '?', '');
/** The owner travels as UTF-8 bytes, converted on the server whatever the connection's character set. */
const OWNER = 'CONVERT(? USING utf8mb4)';
const LOG_GRANT = logGrant({ resource: '?', type: '?', owner: OWNER, token: '?' }, '');

/** MySQL's answer to a NOWAIT read of a locked row; MariaDB answers it with 1205. */
const ER_LOCK_NOWAIT = 3572;

/** True when a NOWAIT locking read failed because another transaction holds the row. */
export function isLockedNowait(err: unknown): boolean {
  const errno = errnoOf(err);
  return errno === ER_LOCK_NOWAIT || errno === ER_LOCK_WAIT_TIMEOUT;
}

/**
 * An acquire whose statement met a row lock it could not have within the server's lock wait
 * timeout (1205; MySQL's 3572 for a NOWAIT read): the lock row of a holder whose fence is in flight
 * (its business transaction's COMMIT to come), a heal, a reap, a repair. That is contention, not a
 * failure: the transaction is rolled back (a procedure's error leaves its transaction open) and
 * the attempt answers refused, nothing granted, so a try answers null and a wait tries again.
 * Bounded by the server's `innodb_lock_wait_timeout` per attempt, and by the holder's commit.
 */
export async function refusedOnLockWait<T>(conn: RawConnection, send: () => Promise<T>, refused: T): Promise<T> {
  try {
    return await send();
  } catch (err) {
    if (!isLockedNowait(err)) throw err;
    await query(conn, 'ROLLBACK');
    return refused;
  }
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
 * can have the gate shared at once). Every changed row also changes `version`, so the counts read the
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
  return gateFirst(conn, mode, resource, async (busy) => {
    const write = mode === 'write' ? 1 : 0;
    const granted =
      !busy &&
      (await guardOrFirstUse(
        () => query(conn, GUARDED_UPDATE[mode === 'write' ? 'write' : 'read'], [resource]),
        () => query(conn, FIRST_USE, [resource, write, 1 - write]),
      ));
    let id: number | null = null;
    const mixed = !granted && !busy && (await query<unknown[]>(conn, MIXED, [resource])).length > 0;
    if (granted) {
      id = Number(
        (await query<{ insertId: number | string }>(conn, LOG_GRANT, [resource, LOCK_TYPE[mode], owner, token]))
          .insertId,
      );
    } else if (
      !mixed &&
      mode === 'write' &&
      intentMs > 0 &&
      (!busy || (await takeNowait(conn, await intentGate(conn), resource)) === 'taken')
    ) {
      // Stopped at the gate, a waiting writer marks its intent if it can have the gate shared: then only
      // short transactions can hold the lock row (readers' acquires, releases, a reap; a writing section
      // or a durable writer holds the gate exclusively), so the mark waits for them, not for a section.
      // Requiring the row free at once instead starved a writer on MySQL: a reader that holds the gate
      // holds the row in the same transaction, and under a stream of readers one always does.
      await query(conn, WRITER_INTENT, [intentMs * 1000, resource, intentMs * 500]);
    }
    return mixed ? { id, busy, conflict: { kind: 'mixed' } } : { id, busy };
  });
}

/**
 * An attempt's own READ COMMITTED transaction, as in the procedures: the gate of `resource` taken
 * first without waiting (in `mode`'s lock), then `decide`, told whether the gate was busy; committed,
 * or rolled back on an error. READ COMMITTED: a locking read or UPDATE of a resource not yet used
 * would otherwise take a gap lock, and first users of neighbouring new ids would deadlock on each other.
 */
async function gateFirst<T>(
  conn: RawConnection,
  mode: LockMode,
  resource: Buffer,
  decide: (busy: boolean) => Promise<T>,
): Promise<T> {
  await query(conn, 'SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
  await query(conn, 'START TRANSACTION');
  try {
    const reply = await decide((await takeGate(conn, mode, resource)) === 'busy');
    await query(conn, 'COMMIT');
    return reply;
  } catch (err) {
    // A dead connection rolls back on the server; on a live one, end the transaction before the
    // connection goes back to the pool.
    await query(conn, 'ROLLBACK').catch(() => undefined);
    throw err;
  }
}

/**
 * The guard, then on a refusal the lock row created on first use, then, when another first user made
 * the row only since the guard looked (READ COMMITTED reads the last committed version), the guard
 * again, as the procedures decide. Each changes 1 row when it grants.
 */
async function guardOrFirstUse(guard: () => Promise<unknown>, firstUse: () => Promise<unknown>): Promise<boolean> {
  const changed = async (sent: () => Promise<unknown>): Promise<boolean> =>
    ((await sent()) as { affectedRows: number }).affectedRows === 1;
  return (await changed(guard)) || (await changed(firstUse)) || changed(guard);
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

/** The permit guard (parameters: count, limit, resource, count, limit, limit, count, limit). */
const PERMIT_GUARD = permitGuard('?', '?', '?', '');
/** First use of a semaphore (parameters: resource, count, limit, count, limit). IGNORE: 0 rows when it exists. */
const PERMIT_FIRST_USE = permitFirstUse('INSERT IGNORE', '?', '?', '?', '');
/** A refused permit attempt: why, from the row as it is now (a report; the guard decided). */
const PERMIT_REFUSAL = `SELECT ${permitConflict('?', '')} AS conflict, permit_limit AS held_limit
 FROM t_read_write_lock WHERE resource_id = ?`;
const LOG_PERMIT = logGrant({ resource: '?', type: `${LOCK_TYPE.permit}`, owner: OWNER, token: '?', permits: '?' }, '');

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
  // The gate shared, as a reader's acquire takes it.
  return gateFirst(conn, 'read', resource, async (busy) => {
    const { limit, count } = ask;
    const guarded = async (): Promise<{ affectedRows: number }> =>
      testSwitches.acquire.permitUnguarded
        ? { affectedRows: (await unguardedForTests(conn, resource, ask)) ? 1 : 0 }
        : query(conn, PERMIT_GUARD, [count, limit, resource, count, limit, limit, count, limit]);
    let conflict: number | string | null = null;
    let heldLimit: number | string | null = null;
    const granted =
      !busy &&
      (await guardOrFirstUse(guarded, () => query(conn, PERMIT_FIRST_USE, [resource, count, limit, count, limit])));
    if (!busy && !granted) {
      const [why] = await query<Array<{ conflict: number | string; held_limit: number | string | null }>>(
        conn,
        PERMIT_REFUSAL,
        [limit, resource],
      );
      conflict = why?.conflict ?? null;
      heldLimit = why?.held_limit ?? null;
    }
    let id: number | null = null;
    if (granted)
      id = Number(
        (await query<{ insertId: number | string }>(conn, LOG_PERMIT, [resource, owner, token, count])).insertId,
      );
    return permitReply(id, busy, conflict, heldLimit);
  });
}

/** The broken check of `testSwitches.acquire.permitUnguarded`: a plain read of the count, then an UPDATE that checks nothing. */
async function unguardedForTests(conn: RawConnection, resource: Buffer, ask: PermitAsk): Promise<boolean> {
  const [row] = await query<Array<{ w_count: number; r_count: number }>>(
    conn,
    'SELECT w_count, r_count FROM t_read_write_lock WHERE resource_id = ?',
    [resource],
  );
  if (row === undefined || row.w_count > 0 || Number(row.r_count) + ask.count > ask.limit) return false;
  // Widen the window between the read and the write, as a slow client would: the control's own hook
  // where it has one (it holds callers there together), else long enough that several of the reliability
  // suite's workers read the same count.
  const hold = testSwitches.acquire.afterPermitRead;
  if (hold) await hold();
  else await query(conn, 'DO SLEEP(0.02)');
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
