import type { Knex } from 'knex';
import { SchemaMissingError } from './errors.js';

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

interface PoolClient {
  acquireConnection(): Promise<RawConnection>;
  releaseConnection(conn: RawConnection): Promise<void>;
}

/**
 * Runs `work` on one connection from the knex pool, bypassing the query builder: at lock speeds
 * the builder and per-query pool round trips cost as much as the commit. knex's pool validates
 * connections on checkout and discards those that died, so a broken one is never reused.
 */
export async function withConnection<T>(db: Knex, work: (conn: RawConnection) => Promise<T>): Promise<T> {
  const client = db.client as unknown as PoolClient;
  const conn = await client.acquireConnection();
  try {
    return await work(conn);
  } finally {
    await client.releaseConnection(conn);
  }
}

export function query<T = unknown>(conn: RawConnection, sql: string, values: unknown[] = []): Promise<T> {
  return new Promise((resolve, reject) => {
    conn.query(sql, values, (err, rows) => (err ? reject(translate(err)) : resolve(rows as T)));
  });
}

/** First result set of a CALL: mysql2 returns [rows, okPacket]. */
export function firstRow<T>(callResult: unknown): T {
  const sets = callResult as unknown[][];
  const row = sets[0]?.[0];
  if (row === undefined) throw new Error('procedure returned no row');
  return row as T;
}

const SCHEMA_MISSING = new Set([1146, 1305]); // no such table, no such procedure

function translate(err: DriverError): Error {
  if (err.errno !== undefined && SCHEMA_MISSING.has(err.errno)) return new SchemaMissingError(err);
  return err;
}

export const ER_LOCK_WAIT_TIMEOUT = 1205;
export const ER_LOCK_DEADLOCK = 1213;

export function isDeadlock(err: unknown): boolean {
  return (err as DriverError | null)?.errno === ER_LOCK_DEADLOCK;
}

export function isLockWaitTimeout(err: unknown): boolean {
  return (err as DriverError | null)?.errno === ER_LOCK_WAIT_TIMEOUT;
}

const LOST_CODES = new Set([
  'PROTOCOL_CONNECTION_LOST', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ECONNREFUSED', 'PROTOCOL_SEQUENCE_TIMEOUT',
  'ER_CONNECTION_KILLED', 'ER_SERVER_SHUTDOWN', 'ER_QUERY_INTERRUPTED',
]);
const LOST_ERRNOS = new Set([1053, 1927, 2006, 2013, 1317]);

/** True when the connection died with the command in flight: the server may or may not have committed. */
export function isConnectionLost(err: unknown): boolean {
  const e = err as DriverError | null;
  if (!e || typeof e !== 'object') return false;
  if (e.fatal === true) return true;
  if (e.code !== undefined && LOST_CODES.has(e.code)) return true;
  if (e.errno !== undefined && LOST_ERRNOS.has(e.errno)) return true;
  return /closed state|connection.*(lost|closed)/i.test(e.message ?? '');
}
