// Whether some transaction waits for a row lock, read from the view each server keeps it in.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Knex } from 'knex';

/**
 * MariaDB fills information_schema's InnoDB lock tables from a cache that it refreshes only when
 * the cache has not been read for 100 ms: read more often, and it shows the same old state for as
 * long as the reads go on. Reads of it are spaced by more than that.
 */
const MARIADB_CACHE_IDLE_MS = 100;
let lastMariaDbRead = -Infinity;

/** Lock waits on the server: MySQL 8+ in performance_schema, MariaDB in information_schema. */
export async function lockWaitCount(db: Knex): Promise<number> {
  const [[{ v }]] = (await db.raw('SELECT VERSION() AS v')) as unknown as [[{ v: string }]];
  const mariadb = /mariadb/i.test(v);
  if (mariadb) {
    const idle = performance.now() - lastMariaDbRead;
    if (idle <= MARIADB_CACHE_IDLE_MS) await sleep(MARIADB_CACHE_IDLE_MS + 10 - idle);
  }
  // Waits on this connection's database only: other test files may run beside it on the same server.
  const sql = mariadb
    ? `SELECT COUNT(*) AS n FROM information_schema.INNODB_LOCK_WAITS w
         JOIN information_schema.INNODB_TRX t ON t.trx_id = w.requesting_trx_id
         JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
        WHERE p.DB = DATABASE()`
    : `SELECT COUNT(*) AS n FROM performance_schema.data_lock_waits w
         JOIN performance_schema.data_locks l ON l.ENGINE_LOCK_ID = w.REQUESTING_ENGINE_LOCK_ID
        WHERE l.OBJECT_SCHEMA = DATABASE()`;
  try {
    const [rows] = (await db.raw(sql)) as unknown as [Array<{ n: number }>];
    return Number(rows[0]!.n);
  } finally {
    if (mariadb) lastMariaDbRead = performance.now();
  }
}
