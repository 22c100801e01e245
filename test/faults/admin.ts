// The orchestrator's own connections: pooled per server and database, direct (never through the proxy).
import { setTimeout as sleep } from 'node:timers/promises';
import mysql from 'mysql2/promise';
import { parseMysqlUrl } from '../../harness/database.js';

/** Where a process connects (serverUrl, maybe through the proxy) and where the orchestrator checks it (adminUrl, direct). */
export interface Target {
  serverUrl: string;
  adminUrl: string;
}

const pools = new Map<string, mysql.Pool>();

export function adminPool(url: string, database: string): mysql.Pool {
  const key = `${url}|${database}`;
  let p = pools.get(key);
  if (!p) {
    p = mysql.createPool({ ...parseMysqlUrl(url), database, connectionLimit: 4, connectTimeout: 3000 });
    pools.set(key, p);
  }
  return p;
}

export async function closeAdminPools(): Promise<void> {
  await Promise.all([...pools.values()].map((p) => p.end().catch(() => undefined)));
  pools.clear();
}

/** Rows of one statement on `t`'s database, through its admin url. */
export type Query = <T>(t: Target, sql: string, values?: unknown[]) => Promise<T[]>;

export function queryOn(database: string): Query {
  return async <T>(t: Target, sql: string, values: unknown[] = []): Promise<T[]> =>
    (await adminPool(t.adminUrl, database).query(sql, values))[0] as T[];
}

export async function retrying<T>(what: () => Promise<T>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await what();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(100);
    }
  }
}
