// Quick start: a payment recorded under a write lock on its loan.
// Run: MYSQL_URL=mysql://user:password@127.0.0.1:3306/app node quickstart.js
import knex from 'knex';
import { createLockManager, LockLostError } from 'mysql-rwlock';
import { migrate } from 'mysql-rwlock/admin';

const url = process.env.MYSQL_URL;
if (!url) {
  console.error('MYSQL_URL is not set: export MYSQL_URL=mysql://user:password@host:3306/database');
  process.exit(1);
}

const db = knex({ client: 'mysql2', connection: url });
try {
  await migrate(db); // creates or updates the lock tables; idempotent, safe from many processes at once
  await db.raw(`CREATE TABLE IF NOT EXISTS payments (
    id BIGINT AUTO_INCREMENT PRIMARY KEY,
    loan_id VARCHAR(64) NOT NULL,
    amount_cents BIGINT NOT NULL,
    grant_id BIGINT
  )`);
  const locks = createLockManager({ knex: db });

  const loanId = 'loan-42';
  try {
    const grantId = await locks.withWriteLock(`loan:${loanId}`, async (trx, grant) => {
      await trx('payments').insert({ loan_id: loanId, amount_cents: 12_500, grant_id: grant.id });
      return grant.id;
    }); // commits only if the grant is still live, and releases it in the same commit
    console.log(`payment of 125.00 on ${loanId} committed under write grant ${grantId}`);
  } catch (err) {
    if (!(err instanceof LockLostError)) throw err;
    // The reaper or an operator released the grant before the commit: nothing was written.
    console.error(`payment on ${loanId} not committed: ${err.message}`);
    process.exitCode = 1;
  }
} finally {
  await db.destroy(); // close the pool, or the process never exits
}
