// Whether some transaction waits for a row lock, read from the view each server keeps it in.
import type { Knex } from 'knex';

/** Lock waits on the server: MySQL 8+ in performance_schema, MariaDB in information_schema. */
export async function lockWaitCount(db: Knex): Promise<number> {
  const [[{ v }]] = (await db.raw('SELECT VERSION() AS v')) as unknown as [[{ v: string }]];
  const sql = /mariadb/i.test(v)
    ? 'SELECT COUNT(*) AS n FROM information_schema.INNODB_LOCK_WAITS'
    : 'SELECT COUNT(*) AS n FROM performance_schema.data_lock_waits';
  const [rows] = (await db.raw(sql)) as unknown as [Array<{ n: number }>];
  return Number(rows[0]!.n);
}
