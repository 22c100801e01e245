import type { Knex } from 'knex';
import {
  DatabaseUnreachableError,
  LockAbortedError,
  LockInvariantError,
  NodeNotReadyError,
  PrivilegeError,
  RwLockError,
  SchemaMissingError,
  SchemaOutdatedError,
  ServerReadOnlyError,
} from '../errors.js';
import { onAbort } from './abort.js';
import { inLibrarySession } from './session.js';

/**
 * A value sent with a statement. No strings: mysql2 escapes a string into the statement text, and
 * that escaping is wrong under `NO_BACKSLASH_ESCAPES`. Text goes as UTF-8 bytes (a hex literal,
 * read the same under every sql_mode) and is converted on the server. A grant id past 2^53 goes as
 * a bigint, which mysql2 writes as its digits: an exact integer, compared as one.
 */
export type SqlValue = number | bigint | Buffer | Hex | null | readonly (number | bigint | Buffer)[];

declare const hexBrand: unique symbol;
/** Lower-case hex digits: the only strings the library sends, safe to escape under any sql_mode. */
export type Hex = string & { readonly [hexBrand]: true };

export function hex(bytes: Buffer): Hex {
  return bytes.toString('hex') as Hex;
}

/** The raw mysql2 connection knex's pool hands out (callback API). */
export interface RawConnection {
  threadId: number | null;
  query(sql: string, values: unknown[], cb: (err: DriverError | null, rows: unknown) => void): void;
}

export interface DriverError extends Error {
  errno?: number;
  code?: string;
  fatal?: boolean;
  sqlState?: string;
}

export interface PoolClient {
  acquireConnection(): Promise<RawConnection>;
  releaseConnection(conn: RawConnection): Promise<void>;
}

/** How long a call waits for a pool connection: until `deadline` (on `performance.now()`) and `signal`. */
export interface ConnectionWait {
  /** What the call is, for the error's message. */
  what?: string;
  /** A waiting call's own deadline: a pool connection that comes later is too late. */
  deadline?: number;
  signal?: AbortSignal;
  /**
   * The error a wait that reached `deadline` without a pool connection ends with: a waiting call's
   * LockTimeoutError (`waitedFor: 'pool'`), the pool's busy state its `cause`. Without it,
   * DatabaseUnreachableError.
   */
  timeout?: (cause: Error, waitedFor: 'pool' | 'server') => RwLockError;
}

/**
 * Runs `work` on one connection from the knex pool, bypassing the query builder: at lock speeds
 * the builder and per-query pool round trips cost as much as the commit. knex's pool validates
 * connections on checkout and discards those that died, so a broken one is never reused.
 *
 * A connection that cannot be had is not a lost reply: nothing was sent. It is
 * DatabaseUnreachableError (the pool's or driver's error its cause), or PrivilegeError for a login
 * refused for lack of a privilege, or LockAbortedError when `wait.signal` aborts the wait for one,
 * or `wait.timeout`'s error when its deadline passes first (a busy pool is not an unreachable server).
 */
export async function withConnection<T>(
  db: Knex,
  work: (conn: RawConnection) => Promise<T>,
  wait: ConnectionWait = {},
): Promise<T> {
  const client = db.client as unknown as PoolClient;
  const conn = await acquirePooled(client, wait);
  try {
    // In the session the library's statements need (autocommit, isolation), whatever the pool's is.
    return await inLibrarySession(conn, work);
  } finally {
    await client.releaseConnection(conn);
  }
}

/** A pool connection, or the typed error for none (see withConnection). */
export function acquirePooled(client: PoolClient, wait: ConnectionWait): Promise<RawConnection> {
  const failure = (err: unknown): RwLockError =>
    privilegeError(err) ??
    (err instanceof RwLockError ? err : new DatabaseUnreachableError(wait.what ?? 'the lock call', err));
  const { deadline, signal } = wait;
  // Before asking the pool: a connection asked for by a wait that has already ended would be lent
  // to nobody, and never come back.
  if (signal?.aborted) return Promise.reject(new LockAbortedError(signal.reason));
  const pending = client.acquireConnection();
  if (deadline === undefined && signal === undefined)
    return pending.catch((err: unknown) => {
      throw failure(err);
    });
  return new Promise<RawConnection>((resolve, reject) => {
    let settled = false;
    let unsubscribe: (() => void) | undefined;
    const end = (): boolean => {
      if (settled) return false;
      settled = true;
      if (timer !== undefined) clearTimeout(timer);
      unsubscribe?.();
      return true;
    };
    const aborted = (): void => {
      if (end()) reject(new LockAbortedError(signal?.reason));
    };
    const timer =
      deadline === undefined
        ? undefined
        : setTimeout(
            () => {
              if (!end()) return;
              // A connection still being made (the server slow to answer, or refusing and asked again)
              // is a wait for the server; none free and none being made, a busy pool.
              const pool = (client as { pool?: { numPendingCreates?: () => number } }).pool;
              const connecting = (pool?.numPendingCreates?.() ?? 0) > 0;
              const why = connecting
                ? new Error('no connection to the database was made before the wait ended')
                : new Error('no pool connection came free before the wait ended (the pool is busy)');
              reject(wait.timeout?.(why, connecting ? 'server' : 'pool') ?? failure(why));
            },
            Math.max(0, deadline - performance.now()),
          );
    unsubscribe = signal ? onAbort(signal, aborted) : undefined;
    // Whatever ended the wait, a connection the pool lends afterwards goes straight back to it.
    pending.then(
      (conn) => {
        // Too late: the wait ended meanwhile. Back to the pool, unused.
        if (!end()) void client.releaseConnection(conn).catch(() => undefined);
        else resolve(conn);
      },
      (err: unknown) => {
        if (end()) reject(failure(err));
      },
    );
  });
}

export function query<T = unknown>(conn: RawConnection, sql: string, values: readonly SqlValue[] = []): Promise<T> {
  return new Promise((resolve, reject) => {
    conn.query(sql, values as unknown[], (err, rows) => (err ? reject(translate(err)) : resolve(rows as T)));
  });
}

/** First result set of a CALL: mysql2 returns [rows, okPacket]. */
export function firstRow<T>(callResult: unknown, what: string): T {
  const sets = callResult as unknown[][];
  const row = sets[0]?.[0];
  if (row === undefined)
    throw new LockInvariantError(`${what} returned no row: the procedure is not the one migrate() installs`);
  return row as T;
}

export const ER_SP_DOES_NOT_EXIST = 1305;
const SCHEMA_MISSING = new Set([1146, ER_SP_DOES_NOT_EXIST]); // no such table, no such procedure

/** read_only / super_read_only (ER_OPTION_PREVENTS_STATEMENT); a read-only session or transaction. */
const READ_ONLY = new Set([1290, 1792]);
/** Galera's refusal on a node outside the primary component or still joining (the code MySQL uses for an unknown command). */
const ER_NODE_NOT_READY = 1047;
const ER_DATA_OUT_OF_RANGE = 1690;
const ER_CHECK_CONSTRAINT = new Set([3819, 4025]); // MySQL, MariaDB
/**
 * What the lock's statements meet only when an object is not the one migrate() made: every value
 * they send is validated to fit the migrated columns (ER_DATA_TOO_LONG: a column narrowed by hand;
 * in a non-strict sql_mode the server truncates instead, with a warning), and their CALLs pass the
 * migrated procedure's parameters (ER_SP_WRONG_NO_OF_ARGS: another signature).
 */
const SCHEMA_CHANGED: ReadonlyMap<number, string> = new Map([
  [1406, 'a column is narrower than migrate() creates it'],
  [1318, 'a procedure takes other parameters than migrate() creates it with'],
]);

/**
 * Refusals for lack of a privilege, MariaDB and MySQL: on the database (1044), the login (1045;
 * 1698 without a password; a locked account, MySQL 3118 and MariaDB 4151), a table (1142), a
 * column (1143), a routine (1370), a global privilege (1227), and SUPER for a routine while binary
 * logging is on (1419).
 */
const PRIVILEGE_DENIED = new Set([1044, 1045, 1142, 1143, 1227, 1370, 1419, 1698, 3118, 4151]);

/** The PrivilegeError for a refusal for lack of a privilege, undefined for any other error. */
export function privilegeError(err: unknown, role?: string): PrivilegeError | undefined {
  if (err instanceof PrivilegeError)
    return role === undefined || err.role === role ? err : new PrivilegeError(err.denied, err.cause, role);
  const e = driverErrorOf(err);
  if (e?.errno === undefined || !PRIVILEGE_DENIED.has(e.errno)) return undefined;
  // knex puts the statement in front of the server's message; sqlMessage is the server's alone.
  const message = (e as DriverError & { sqlMessage?: string }).sqlMessage ?? e.message;
  return new PrivilegeError(message || `error ${e.errno}`, err, role);
}

/**
 * Typed errors for what the lock's own statements can meet: a refusal for lack of a privilege, a missing schema, a read-only server,
 * a Galera node that is not ready, and counts that disagree with the grant log (changed by hand):
 * a count given back below zero, or a count against the tables' CHECK constraint. Only for the
 * library's statements: a business statement's errors are the application's own.
 */
export function translate(err: unknown): unknown {
  const errno = errnoOf(err);
  if (errno === undefined) return err;
  if (PRIVILEGE_DENIED.has(errno)) return privilegeError(err);
  if (SCHEMA_MISSING.has(errno)) return new SchemaMissingError(err);
  const changed = SCHEMA_CHANGED.get(errno);
  if (changed !== undefined) return new SchemaOutdatedError(changed, err);
  if (READ_ONLY.has(errno)) return new ServerReadOnlyError(err);
  if (errno === ER_NODE_NOT_READY) return new NodeNotReadyError(err);
  if (errno === ER_DATA_OUT_OF_RANGE || ER_CHECK_CONSTRAINT.has(errno)) {
    return new LockInvariantError(
      'mysql-rwlock: the lock counts disagree with the grant log (changed by hand?); the transaction was refused',
      err,
    );
  }
  return err;
}

export const ER_LOCK_WAIT_TIMEOUT = 1205;
export const ER_LOCK_DEADLOCK = 1213;
export const ER_DUP_ENTRY = 1062;
export const ER_CHECKREAD = 1020;

/**
 * The server's or driver's error inside what was thrown: the error itself, or what an ORM wrapped
 * it in (`cause`: Drizzle; `parent`: Sequelize; Prisma keeps the number in
 * `meta.driverAdapterError.cause.originalCode`). This library's own typed errors are taken as they
 * are, never read through their cause.
 */
export function driverErrorOf(err: unknown): DriverError | undefined {
  let e = err as
    | (DriverError & {
        parent?: unknown;
        meta?: { driverAdapterError?: { cause?: { originalCode?: unknown; originalMessage?: unknown } } };
      })
    | null;
  for (let depth = 0; depth < 4 && e !== null && typeof e === 'object'; depth++) {
    if (e instanceof RwLockError) return undefined;
    if (e.errno !== undefined || e.fatal !== undefined || (e.code !== undefined && LOST_CODES.has(e.code))) return e;
    // Prisma's driver adapter error: under a model query's `meta`, or itself the `cause` of the
    // DriverAdapterError a raw statement or the transaction's COMMIT rejects with.
    const prisma =
      e.meta?.driverAdapterError?.cause ??
      ((e as { originalCode?: unknown }).originalCode === undefined
        ? undefined
        : (e as { originalCode?: unknown; originalMessage?: unknown }));
    if (prisma?.originalCode !== undefined) {
      return Object.assign(new Error(String(prisma.originalMessage ?? '')), { errno: Number(prisma.originalCode) });
    }
    e = (e.cause ?? e.parent ?? null) as typeof e;
  }
  return undefined;
}

export function errnoOf(err: unknown): number | undefined {
  return driverErrorOf(err)?.errno;
}

export function isLockWaitTimeout(err: unknown): boolean {
  return errnoOf(err) === ER_LOCK_WAIT_TIMEOUT;
}

/**
 * True when the server rolled the whole transaction back because it conflicted with another, so
 * running it again is safe and may succeed: a deadlock (1213, also Galera's certification failure),
 * Group Replication's certification failure at commit (3101), MariaDB's snapshot-isolation refusal
 * (1020: a locking read met a row changed after the transaction's snapshot; under
 * innodb_snapshot_isolation, on by default from 11.6, it rolls the whole transaction back), or a
 * commit that failed with the storage engine's deadlock error (1180 with engine error 149, seen on
 * Group Replication).
 */
export function isConflict(err: unknown): boolean {
  const e = driverErrorOf(err);
  if (e?.errno === ER_LOCK_DEADLOCK || e?.errno === 3101 || e?.errno === ER_CHECKREAD) return true;
  return e?.errno === 1180 && /\b149\b|deadlock/i.test(e.message ?? '');
}

const LOST_CODES = new Set([
  'PROTOCOL_CONNECTION_LOST',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'ECONNREFUSED',
  'PROTOCOL_SEQUENCE_TIMEOUT',
  'ER_CONNECTION_KILLED',
  'ER_SERVER_SHUTDOWN',
  'ER_QUERY_INTERRUPTED',
]);
// The server's and mysql2's, then the mariadb connector's (Prisma's adapter, which keeps only the
// number): its socket closed unexpectedly, failed, or timed out.
const LOST_ERRNOS = new Set([1053, 1927, 2006, 2013, 1317, 4031, 45009, 45019, 45026]);

/** True when the connection died with the command in flight: the server may or may not have committed. */
export function isConnectionLost(err: unknown): boolean {
  if (err instanceof RwLockError) return false;
  const e = driverErrorOf(err) ?? (err as DriverError | null);
  if (!e || typeof e !== 'object') return false;
  if (e.fatal === true) return true;
  if (e.code !== undefined && LOST_CODES.has(e.code)) return true;
  if (e.errno !== undefined && LOST_ERRNOS.has(e.errno)) return true;
  return /closed state|connection.*(lost|closed)/i.test(e.message ?? '');
}

/**
 * Runs `work` with the session's innodb_lock_wait_timeout set to `seconds`, then restores the
 * value the session had (the connection goes back to the application's pool).
 */
export async function withLockWaitTimeout<T>(conn: RawConnection, seconds: number, work: () => Promise<T>): Promise<T> {
  const [row] = await query<Array<{ t: number | string }>>(conn, 'SELECT @@SESSION.innodb_lock_wait_timeout AS t');
  const previous = Number(row?.t ?? 50);
  await query(conn, 'SET SESSION innodb_lock_wait_timeout = ?', [seconds]);
  try {
    return await work();
  } finally {
    await query(conn, 'SET SESSION innodb_lock_wait_timeout = ?', [previous]).catch(() => undefined);
  }
}
