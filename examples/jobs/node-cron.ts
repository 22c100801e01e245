// A scheduled task that runs on one instance per fire, however many instances schedule it.
// Run on several machines: MYSQL_URL=mysql://user:password@127.0.0.1:3306/app node node-cron.js
import knex from 'knex';
import cron from 'node-cron';
import { createLockManager } from 'mysql-rwlock';
import { migrate } from 'mysql-rwlock/admin';
import { createRunCoordinator } from 'mysql-rwlock/cron';

const db = knex({ client: 'mysql2', connection: process.env.MYSQL_URL! });
await migrate(db);
const locks = createLockManager({ knex: db, owner: `reports@${process.pid}` });

const task = cron.schedule(
  '* * * * * *', // every second, to see it at once; '0 3 * * *' is 03:00 every day
  ({ date }) => console.log(`fire ${date.toISOString()} ran here`),
  { name: 'daily-report', distributed: true, runCoordinator: createRunCoordinator(locks) },
);

process.once('SIGTERM', async () => {
  await task.destroy();
  await locks.close();
  await db.destroy();
});
