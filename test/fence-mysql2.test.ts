// The driver-neutral fence with bare mysql2 (promise pool), as the README's recipe writes it: the
// three outcomes, and a rollback after a successful fence.
// covers: src/adapters/index.ts, src/lock/fence/fence-executor.ts
import mysql, { type Pool, type ResultSetHeader } from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseMysqlUrl } from '../harness/database.js';
import { createLockManager, LockLostError, type Grant } from '../src/index.js';
import { useTestDatabase } from './support/db.js';
import { grantRow, invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);
let pool: Pool;

beforeAll(async () => {
  pool = mysql.createPool({ ...parseMysqlUrl(db.url), database: db.name, connectionLimit: 4 });
  await pool.query('CREATE TABLE loans (id VARCHAR(32) PRIMARY KEY, repaid INT NOT NULL) ENGINE=InnoDB');
});

afterAll(async () => {
  await pool?.end();
});

/** The README's recipe: the business transaction on a pool connection, fenced as its last statement. */
async function repay(grant: Grant, loanId: string, amount: number, fail?: Error): Promise<void> {
  const conn = await pool.getConnection();
  try {
    await conn.beginTransaction();
    await conn.execute('INSERT INTO loans (id, repaid) VALUES (?, ?) ON DUPLICATE KEY UPDATE repaid = repaid + ?', [
      loanId,
      amount,
      amount,
    ]);
    if (fail) throw fail;
    await grant.fence(
      async (sql, params) => ((await conn.execute(sql, params)) as [ResultSetHeader, unknown])[0].affectedRows,
    );
    await conn.commit();
    grant.committed();
  } catch (err) {
    await conn.rollback();
    throw err;
  } finally {
    conn.release();
    await grant.release();
  }
}

async function repaid(loanId: string): Promise<number | undefined> {
  const [rows] = await pool.query('SELECT repaid FROM loans WHERE id = ?', [loanId]);
  return (rows as Array<{ repaid: number }>)[0]?.repaid;
}

describe('grant.fence with mysql2', () => {
  it('commits when the grant is live, and the commit released it', async () => {
    const locks = createLockManager({ knex: db.knex });
    const grant = await locks.acquireWrite('loan-live');
    await repay(grant, 'loan-live', 100);
    expect(await repaid('loan-live')).toBe(100);
    expect(await grantRow(db.knex, grant.id)).toMatchObject({ status: 2, released_by: 1 });
    expect(grant.settled).toBe(true);
    expect(await grant.release()).toBe(false);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('rolls back with LockLostError when the grant was force-released before the commit', async () => {
    const locks = createLockManager({ knex: db.knex });
    const grant = await locks.acquireWrite('loan-lost');
    expect(await locks.forceRelease(grant.id)).toBe(true);
    const err = await repay(grant, 'loan-lost', 100).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(LockLostError);
    expect(grant.signal.aborted).toBe(true);
    expect(await repaid('loan-lost')).toBeUndefined();
    expect(await grantRow(db.knex, grant.id)).toMatchObject({ status: 2, released_by: 3 });
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('a business error rolls back and the grant is released', async () => {
    const locks = createLockManager({ knex: db.knex });
    const grant = await locks.acquireWrite('loan-error');
    const boom = new Error('bank declined');
    await expect(repay(grant, 'loan-error', 100, boom)).rejects.toBe(boom);
    expect(await repaid('loan-error')).toBeUndefined();
    expect(await grantRow(db.knex, grant.id)).toMatchObject({ status: 2, released_by: 1 });
    expect(await locks.tryAcquireWrite('loan-error')).not.toBeNull();
  });

  it('a rollback after a successful fence leaves the grant live, and release() releases it once', async () => {
    const locks = createLockManager({ knex: db.knex });
    const grant = await locks.acquireRead('loan-rollback');
    const conn = await pool.getConnection();
    try {
      await conn.beginTransaction();
      await grant.fence(
        async (sql, params) => ((await conn.execute(sql, params)) as [ResultSetHeader, unknown])[0].affectedRows,
      );
      await conn.rollback();
    } finally {
      conn.release();
    }
    expect(await grantRow(db.knex, grant.id)).toMatchObject({ status: 0 });
    expect(await grant.release()).toBe(true);
    expect(await grant.release()).toBe(false);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('negative control: a commit without the fence lands although the grant was force-released', async () => {
    const locks = createLockManager({ knex: db.knex });
    const grant = await locks.acquireWrite('loan-unfenced');
    await locks.forceRelease(grant.id);
    const conn = await pool.getConnection();
    try {
      await conn.beginTransaction();
      await conn.execute('INSERT INTO loans (id, repaid) VALUES (?, 100)', ['loan-unfenced']);
      await conn.commit();
    } finally {
      conn.release();
    }
    expect(await repaid('loan-unfenced')).toBe(100);
  });
});
