// Which sessions wait for a lock, read live on each server.
import type { Knex } from 'knex';

/**
 * Not information_schema's INNODB_TRX or INNODB_LOCK_WAITS: both servers fill them from a cache
 * that is refreshed only once it has gone unread for 100 ms, and the cache is the server's, so the
 * reads of test files running beside this one can keep it from refreshing for as long as they go
 * on: it then shows a wait long over, or none while one goes on. MySQL's performance_schema lock
 * tables are read live; on MariaDB, which has none, SHOW ENGINE INNODB STATUS prints the waiting
 * transactions as they are.
 */
async function waitingEverywhere(db: Knex): Promise<number[]> {
  const [[{ v }]] = (await db.raw('SELECT VERSION() AS v')) as unknown as [[{ v: string }]];
  if (!/mariadb/i.test(v)) {
    const [rows] = (await db.raw(
      `SELECT DISTINCT t.PROCESSLIST_ID AS id FROM performance_schema.data_lock_waits w
         JOIN performance_schema.threads t ON t.THREAD_ID = w.REQUESTING_THREAD_ID`,
    )) as unknown as [Array<{ id: number | string }>];
    return rows.map((r) => Number(r.id));
  }
  const [[status]] = (await db.raw('SHOW ENGINE INNODB STATUS')) as unknown as [[{ Status: string }]];
  // One block per transaction; a waiting one has a "LOCK WAIT" line and names its session's thread.
  return status.Status.split('\n---TRANSACTION ')
    .slice(1)
    .filter((block) => /\nLOCK WAIT /.test(block))
    .map((block) => Number(/thread id (\d+)/.exec(block)?.[1]))
    .filter((id) => Number.isInteger(id));
}

/**
 * Server threads of the sessions using this connection's database that wait for a lock: other test
 * files may run beside it on the same server, each in a database of its own.
 */
export async function lockWaitingThreads(db: Knex): Promise<number[]> {
  const waiting = await waitingEverywhere(db);
  if (waiting.length === 0) return [];
  const [rows] = (await db.raw(
    `SELECT ID AS id FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND ID IN (${waiting.map(() => '?').join(', ')})`,
    waiting,
  )) as unknown as [Array<{ id: number | string }>];
  return rows.map((r) => Number(r.id));
}

/** How many sessions using this connection's database wait for a lock. */
export async function lockWaitCount(db: Knex): Promise<number> {
  return (await lockWaitingThreads(db)).length;
}

/** Whether the session with server thread `thread` waits for a lock. */
export async function waitsForALock(db: Knex, thread: number): Promise<boolean> {
  return (await waitingEverywhere(db)).includes(thread);
}
