// The business data the workload changes under the lock, in the same database as the lock tables:
// a counter per resource, an effect row per write (the chain prev -> next), a row per read. Each
// row records the database time of the operation's first business statement (`from_at`) and of its
// last (`at`): a section holds its resource at least over that span, which the checker judges.
import type { Knex } from 'knex';

export const BUSINESS_TABLES = [
  `CREATE TABLE IF NOT EXISTS f_counter (
     resource_id VARCHAR(64) NOT NULL PRIMARY KEY,
     value INT NOT NULL
   ) ENGINE=InnoDB`,
  `CREATE TABLE IF NOT EXISTS f_effect (
     id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
     op_id VARCHAR(64) NOT NULL,
     resource_id VARCHAR(64) NOT NULL,
     grant_id BIGINT UNSIGNED NOT NULL,
     prev INT NOT NULL,
     next INT NOT NULL,
     section TINYINT NOT NULL DEFAULT 0,
     from_at DATETIME(6) NOT NULL,
     at DATETIME(6) NOT NULL,
     KEY ix_effect_op (op_id)
   ) ENGINE=InnoDB`,
  `CREATE TABLE IF NOT EXISTS f_read (
     id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
     op_id VARCHAR(64) NOT NULL,
     resource_id VARCHAR(64) NOT NULL,
     grant_id BIGINT UNSIGNED NOT NULL,
     seen INT NOT NULL,
     seen_again INT NOT NULL,
     fenced TINYINT NOT NULL,
     section TINYINT NOT NULL DEFAULT 0,
     from_at DATETIME(6) NOT NULL,
     at DATETIME(6) NOT NULL,
     KEY ix_read_op (op_id)
   ) ENGINE=InnoDB`,
];

export async function createBusinessTables(db: Knex, resources: string[]): Promise<void> {
  for (const ddl of BUSINESS_TABLES) await db.raw(ddl);
  for (const r of resources)
    await db.raw('INSERT INTO f_counter (resource_id, value) VALUES (?, 0) ON DUPLICATE KEY UPDATE value = value', [r]);
}

type Rows<T> = [T[], unknown];

/** The statement's database time as text, so it goes back into a DATETIME(6) unchanged by any time zone. */
const NOW_TEXT = 'CAST(UTC_TIMESTAMP(6) AS CHAR)';

/**
 * The critical section of a write: a plain (consistent, non-locking) read of the counter, a pause,
 * a blind write of prev + 1 and the effect row last, so `at` is as close to the commit as it gets.
 * Only the lock keeps two of these from reading the same prev: without it they lose an update.
 */
export async function writeStep(
  trx: Knex.Transaction,
  op: string,
  resource: string,
  grantId: number,
  pauseMs: number | (() => number),
  onRead?: () => Promise<void>,
  section = false,
): Promise<{ prev: number; next: number }> {
  const [rows] = (await trx.raw(`SELECT value, ${NOW_TEXT} AS t FROM f_counter WHERE resource_id = ?`, [
    resource,
  ])) as unknown as Rows<{ value: number; t: string }>;
  const prev = Number(rows[0]?.value);
  const from = rows[0]?.t ?? null;
  if (onRead) await onRead();
  const ms = typeof pauseMs === 'function' ? pauseMs() : pauseMs;
  if (ms > 0) await new Promise((r) => setTimeout(r, ms));
  await trx.raw('UPDATE f_counter SET value = ? WHERE resource_id = ?', [prev + 1, resource]);
  await trx.raw(
    'INSERT INTO f_effect (op_id, resource_id, grant_id, prev, next, section, from_at, at) VALUES (?, ?, ?, ?, ?, ?, COALESCE(?, UTC_TIMESTAMP(6)), UTC_TIMESTAMP(6))',
    [op, resource, grantId, prev, prev + 1, section ? 1 : 0, from],
  );
  return { prev, next: prev + 1 };
}

/**
 * A read: the counter twice with a pause between, at READ COMMITTED so a writer that committed in
 * between would show as a changed value, then a row recording both.
 */
export async function readStep(
  trx: Knex.Transaction,
  op: string,
  resource: string,
  grantId: number,
  pauseMs: number,
  fenced: boolean,
  onRead?: () => Promise<void>,
  section = false,
): Promise<number> {
  let from: string | null = null;
  const read = async (): Promise<number> => {
    const [rows] = (await trx.raw(`SELECT value, ${NOW_TEXT} AS t FROM f_counter WHERE resource_id = ?`, [
      resource,
    ])) as unknown as Rows<{ value: number; t: string }>;
    from ??= rows[0]?.t ?? null;
    return Number(rows[0]?.value);
  };
  const seen = await read();
  if (onRead) await onRead();
  if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
  const again = await read();
  await trx.raw(
    'INSERT INTO f_read (op_id, resource_id, grant_id, seen, seen_again, fenced, section, from_at, at) VALUES (?, ?, ?, ?, ?, ?, ?, COALESCE(?, UTC_TIMESTAMP(6)), UTC_TIMESTAMP(6))',
    [op, resource, grantId, seen, again, fenced ? 1 : 0, section ? 1 : 0, from],
  );
  return seen;
}
