// The reference article's read-write lock, statement by statement, on its own ref_ tables, for
// comparison only. Its outright bugs are fixed so it can run under load without corrupting itself
// (defects 1 and 3 listed in docs/guarantees.md: resource_id and w_count = 0 in the acquire UPDATE, one primary
// key), but the sequence of statements, transactions and commits is the article's:
//   acquire: SELECT pre-check -> INSERT if absent -> BEGIN, conditional UPDATE, INSERT log, COMMIT
//   release: BEGIN, UPDATE counts, UPDATE log status = 2, COMMIT
//   fenced business: acquire -> BEGIN, business, UPDATE log SET status = 1 WHERE id AND status = 0, COMMIT -> release
// It runs on the same knex pool path as the library (raw mysql2 connections from knex's pool).
import type { Knex } from 'knex';
import { query as libraryQuery, withConnection, type RawConnection, type SqlValue } from '../../src/sql/connection.js';

/** The reference sends its VARCHAR ids as strings, escaped by mysql2 as the article's code would. */
function query<T = unknown>(conn: RawConnection, sql: string, values: unknown[] = []): Promise<T> {
  return libraryQuery<T>(conn, sql, values as SqlValue[]);
}

export const REF_TABLES = [
  `CREATE TABLE IF NOT EXISTS ref_read_write_lock (
     resource_id VARCHAR(255) NOT NULL,
     w_count TINYINT NOT NULL DEFAULT 0,
     r_count INT NOT NULL DEFAULT 0,
     version BIGINT NOT NULL DEFAULT 0,
     PRIMARY KEY (resource_id)
   ) ENGINE=InnoDB`,
  `CREATE TABLE IF NOT EXISTS ref_lock_log (
     id BIGINT NOT NULL AUTO_INCREMENT,
     resource_id VARCHAR(255) NOT NULL,
     lock_type TINYINT NOT NULL,
     status TINYINT NOT NULL DEFAULT 0,
     create_time DATETIME(3) NOT NULL,
     version INT NOT NULL DEFAULT 0,
     PRIMARY KEY (id),
     KEY ix_ref_status_time (status, create_time)
   ) ENGINE=InnoDB`,
];

export async function createReferenceTables(db: Knex): Promise<void> {
  for (const ddl of REF_TABLES) await db.raw(ddl);
}

type Mode = 'write' | 'read';
interface Counts {
  w_count: number;
  r_count: number;
}

async function tx<T>(conn: RawConnection, body: () => Promise<T>): Promise<T> {
  await query(conn, 'BEGIN');
  try {
    const value = await body();
    await query(conn, 'COMMIT');
    return value;
  } catch (err) {
    await query(conn, 'ROLLBACK').catch(() => undefined);
    throw err;
  }
}

class NotGranted extends Error {}

/** The article's acquire: the log row id, or null when the pre-check or the UPDATE refused. */
export function refAcquire(db: Knex, resource: string, mode: Mode): Promise<number | null> {
  return withConnection(db, async (conn) => {
    const rows = await query<Counts[]>(conn, 'SELECT w_count, r_count FROM ref_read_write_lock WHERE resource_id = ?', [
      resource,
    ]);
    let row = rows[0];
    if (!row) {
      try {
        await query(
          conn,
          'INSERT INTO ref_read_write_lock (resource_id, w_count, r_count, version) VALUES (?, 0, 0, 0)',
          [resource],
        );
      } catch (err) {
        if ((err as { errno?: number }).errno !== 1062) throw err;
      }
      row = { w_count: 0, r_count: 0 };
    }
    if (mode === 'write' ? row.w_count !== 0 || row.r_count !== 0 : row.w_count !== 0) return null;
    try {
      return await tx(conn, async () => {
        const upd = await query<{ changedRows: number }>(
          conn,
          mode === 'write'
            ? 'UPDATE ref_read_write_lock SET w_count = 1, version = version + 1 WHERE resource_id = ? AND w_count = 0 AND r_count = 0'
            : 'UPDATE ref_read_write_lock SET r_count = r_count + 1, version = version + 1 WHERE resource_id = ? AND w_count = 0',
          [resource],
        );
        if (upd.changedRows !== 1) throw new NotGranted();
        const ins = await query<{ insertId: number }>(
          conn,
          'INSERT INTO ref_lock_log (resource_id, lock_type, status, create_time, version) VALUES (?, ?, 0, NOW(3), 0)',
          [resource, mode === 'write' ? 0 : 1],
        );
        return ins.insertId;
      });
    } catch (err) {
      if (err instanceof NotGranted) return null;
      throw err;
    }
  });
}

/** The article's release transaction (counts first, then the log row). */
export function refRelease(db: Knex, resource: string, mode: Mode, id: number): Promise<void> {
  return withConnection(db, (conn) =>
    tx(conn, async () => {
      await query(
        conn,
        mode === 'write'
          ? 'UPDATE ref_read_write_lock SET w_count = 0, version = version + 1 WHERE resource_id = ? AND w_count = 1'
          : 'UPDATE ref_read_write_lock SET r_count = r_count - 1, version = version + 1 WHERE resource_id = ? AND r_count - 1 >= 0',
        [resource],
      );
      await query(conn, 'UPDATE ref_lock_log SET status = 2, version = version + 1 WHERE id = ?', [id]);
    }),
  );
}

/** The article's fenced business operation: three commits (acquire, business + mark done, release). */
export async function refFenced(
  db: Knex,
  resource: string,
  business: (trx: Knex.Transaction) => Promise<unknown>,
): Promise<boolean> {
  const id = await refAcquire(db, resource, 'write');
  if (id === null) return false;
  try {
    await db.transaction(async (trx) => {
      await business(trx);
      const res = (await trx.raw(
        'UPDATE ref_lock_log SET status = 1, version = version + 1 WHERE id = ? AND status = 0',
        [id],
      )) as unknown as [{ affectedRows: number }];
      if (res[0].affectedRows !== 1) throw new Error('reference: grant lost before commit');
    });
  } finally {
    await refRelease(db, resource, 'write', id);
  }
  return true;
}
