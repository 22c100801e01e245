// Databases of their own for a test file, the demo or a benchmark run, on a found server.
import knexFactory, { type Knex } from 'knex';
import mysql from 'mysql2/promise';

export interface ConnectionSettings {
  host: string;
  port: number;
  user: string;
  password: string;
}

export function parseMysqlUrl(url: string): ConnectionSettings {
  const u = new URL(url);
  return {
    host: u.hostname,
    port: u.port ? Number(u.port) : 3306,
    user: decodeURIComponent(u.username || 'root'),
    password: decodeURIComponent(u.password),
  };
}

export function databaseUrl(serverUrl: string, database: string): string {
  const u = new URL(serverUrl);
  u.pathname = `/${database}`;
  return u.toString();
}

/** Creates (or recreates) `name` on the server. Names are checked: they go into DDL unquoted-safe. */
export async function createDatabase(serverUrl: string, name: string): Promise<void> {
  if (!/^[A-Za-z0-9_]{1,64}$/.test(name)) throw new Error(`bad database name ${name}`);
  const conn = await mysql.createConnection(parseMysqlUrl(serverUrl));
  try {
    await conn.query(`DROP DATABASE IF EXISTS \`${name}\``);
    await conn.query(`CREATE DATABASE \`${name}\``);
  } finally {
    await conn.end();
  }
}

export async function dropDatabase(serverUrl: string, name: string): Promise<void> {
  const conn = await mysql.createConnection(parseMysqlUrl(serverUrl));
  try {
    await conn.query(`DROP DATABASE IF EXISTS \`${name}\``);
  } finally {
    await conn.end();
  }
}

export interface KnexSettings {
  poolMax?: number;
  /** mysql2 connection flags, e.g. ['-FOUND_ROWS']. */
  flags?: string[];
  /** A statement run on every new connection, e.g. to set the session's sql_mode. */
  afterCreate?: string;
}

/** A knex (mysql2) instance on one database of the server. */
export function connectKnex(serverUrl: string, database: string, settings: KnexSettings = {}): Knex {
  const connection: Record<string, unknown> = { ...parseMysqlUrl(serverUrl), database };
  if (settings.flags) connection.flags = settings.flags;
  const pool: Knex.PoolConfig = { min: 0, max: settings.poolMax ?? 10 };
  const sql = settings.afterCreate;
  if (sql !== undefined) {
    pool.afterCreate = (
      conn: { query(sql: string, cb: (err: Error | null) => void): void },
      done: (err: Error | null, conn: unknown) => void,
    ) => {
      conn.query(sql, (err) => done(err, conn));
    };
  }
  return knexFactory({ client: 'mysql2', connection, pool });
}
