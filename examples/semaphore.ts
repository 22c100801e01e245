// Semaphore: at most 3 exports of one tenant at once, across every process that runs this.
// Run: MYSQL_URL=mysql://user:password@127.0.0.1:3306/app node semaphore.js
import knex from 'knex';
import { createLockManager } from 'mysql-rwlock';
import { migrate } from 'mysql-rwlock/admin';

const url = process.env.MYSQL_URL;
if (!url) {
  console.error('MYSQL_URL is not set: export MYSQL_URL=mysql://user:password@host:3306/database');
  process.exit(1);
}

const db = knex({ client: 'mysql2', connection: url, pool: { min: 0, max: 10 } });
try {
  await migrate(db);
  await db.raw(`CREATE TABLE IF NOT EXISTS exports (
    id BIGINT AUTO_INCREMENT PRIMARY KEY,
    tenant VARCHAR(64) NOT NULL,
    grant_id BIGINT NOT NULL
  )`);
  const locks = createLockManager({ knex: db });

  let running = 0;
  let most = 0;
  const exportOnce = (): Promise<void> =>
    locks.withPermit(
      'exports:tenant-7',
      async (trx, grant) => {
        most = Math.max(most, ++running);
        try {
          await trx('exports').insert({ tenant: 'tenant-7', grant_id: grant.id });
          await new Promise((resolve) => setTimeout(resolve, 50)); // the export's own work
        } finally {
          running--;
        }
      }, // commits only if the permit is still live, and gives it back in the same commit
      { permits: 3, waitMs: 30_000 },
    );
  await Promise.all(Array.from({ length: 8 }, exportOnce));
  console.log(`8 exports committed, at most ${most} at once`);
  await locks.close();
} finally {
  await db.destroy();
}
