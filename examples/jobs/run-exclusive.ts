// A nightly job that runs on one instance at a time, its writes fenced: runExclusive and @Exclusive.
// Run: MYSQL_URL=mysql://user:password@127.0.0.1:3306/app node run-exclusive.js
// Compile with "target": "es2022": TypeScript lowers @Exclusive there (no Node runs decorators as written).
import knex from 'knex';
import { createLockManager } from 'mysql-rwlock';
import { migrate } from 'mysql-rwlock/admin';
import { Exclusive } from 'mysql-rwlock/decorators';

const db = knex({ client: 'mysql2', connection: process.env.MYSQL_URL! });
await migrate(db);
await db.raw('CREATE TABLE IF NOT EXISTS invoice (id INT PRIMARY KEY, status VARCHAR(8) NOT NULL)');
await db('invoice')
  .insert([
    { id: 1, status: 'due' },
    { id: 2, status: 'due' },
  ])
  .onConflict()
  .ignore();

const locks = createLockManager({ knex: db, owner: `billing@${process.pid}` });
// At most 10 minutes (then its grant is stale: another instance may run it, and this run commits nothing); at least 2 s.
const job = { lockAtMostFor: 600_000, lockAtLeastFor: 2_000 };

const run = await locks.runExclusive(
  'invoices:nightly',
  (trx) => trx('invoice').where({ status: 'due' }).update({ status: 'sent' }),
  job,
);
if (run.ran) console.log(`sent ${run.value} invoices`);

// Another instance, a moment later: the job's grant is kept for lockAtLeastFor, so it does not run again.
const other = createLockManager({ knex: db, owner: 'billing@other-host' });
class Billing {
  @Exclusive('invoices:nightly', { manager: other, ...job })
  async sendInvoices(): Promise<number | undefined> {
    return other.current()!.trx!('invoice').where({ status: 'due' }).update({ status: 'sent' });
  }
}
const again = await new Billing().sendInvoices();
console.log(again === undefined ? 'the other instance did not run it' : `the other instance sent ${again}`);

await other.close();
await locks.close(); // waits for the job's grant to be released, 2 s after it was granted
await db.destroy();
