// A node-cron task that runs only on the leader: every instance campaigns, the one that leads runs
// the task, each tick's transaction fenced by the leader's term. Stop an instance (SIGTERM) and
// another leads at once; kill it and another leads once its lease has run out.
// Run on several machines: MYSQL_URL=mysql://user:password@127.0.0.1:3306/app node cron.js
import knex from 'knex';
import cron from 'node-cron';
import { createLockManager } from 'mysql-rwlock';
import { fromKnex } from 'mysql-rwlock/adapters';
import { migrate } from 'mysql-rwlock/admin';

const db = knex({ client: 'mysql2', connection: process.env.MYSQL_URL! });
await migrate(db);
await db.raw(`CREATE TABLE IF NOT EXISTS leader_ticks (
  id BIGINT AUTO_INCREMENT PRIMARY KEY,
  term BIGINT NOT NULL,
  owner VARCHAR(255) NOT NULL
)`);
const locks = createLockManager({ knex: db, owner: `ticker@${process.pid}` });

const campaign = await locks.campaign(
  'ticker',
  (term) => {
    console.log(`leading in term ${term.id}`);
    const task = cron.schedule('* * * * * *', async () => {
      try {
        await db.transaction(async (trx) => {
          await trx('leader_ticks').insert({ term: term.id, owner: locks.owner });
          await term.fence(fromKnex(trx)); // commits only while this term leads
        });
      } catch (err) {
        console.log(`tick of term ${term.id} refused: ${(err as { code?: string }).code ?? String(err)}`);
      }
    });
    // The term ends (lost, not renewed in time, closed): stop the task.
    term.signal.addEventListener('abort', () => void task.destroy(), { once: true });
  },
  { leaseMs: 5_000 },
);
console.log(`campaigning as ${locks.owner}`);

process.once('SIGTERM', async () => {
  await campaign.close(); // releases the term: a waiting instance leads at once
  await locks.close();
  await db.destroy();
});
