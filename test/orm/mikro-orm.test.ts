// The fence on a MikroORM transaction (@mikro-orm/mysql on mysql2: through Kysely from 7, through
// knex in 6, which the previous-versions lane runs). No entities: the fence and these business
// writes are plain SQL through the transaction's EntityManager.
// covers: src/adapters/index.ts
import { MikroORM } from '@mikro-orm/mysql';
import { databaseUrl, parseMysqlUrl } from '../../harness/database.js';
import type { Grant } from '../../src/index.js';
import { useTestDatabase } from '../support/db.js';
import { fromMikroORM } from '../../src/adapters/index.js';
import { fenceSuite, installedVersion } from './support/suite.js';

const db = useTestDatabase(import.meta.filename);
const MAJOR = Number(installedVersion('@mikro-orm/core').split('.')[0]);

// docs/orms.md recipe: begin
/** MikroORM on the database at `url`, e.g. mysql://app:secret@db.internal:3306/app. */
function connect(url: string): Promise<MikroORM> {
  return MikroORM.init({ clientUrl: url, entities: [], discovery: { warnWhenNoEntities: false } });
}

async function repay(orm: MikroORM, grant: Grant, loanId: string, amount: number): Promise<void> {
  await orm.em.transactional(async (em) => {
    await em.execute(
      'INSERT INTO loans (id, repaid_cents) VALUES (?, ?) ON DUPLICATE KEY UPDATE repaid_cents = repaid_cents + ?',
      [loanId, amount, amount],
      'run',
    );
    await em.execute('INSERT INTO payments (loan_id, amount_cents) VALUES (?, ?)', [loanId, amount], 'run');
    await em.flush(); // persisted entities go out now, so the fence is the last statement
    await grant.fence(fromMikroORM(em)); // last statement: LockLostError (and a rollback) if the grant was lost
  });
}
// docs/orms.md recipe: end

fenceSuite({
  name: 'MikroORM',
  db,
  recipes: [import.meta.filename],
  packages: ['@mikro-orm/core', '@mikro-orm/mysql'],
  async connect({ foundRows, url = db.url }) {
    // The recipe's MikroORM has mysql2's default, CLIENT_FOUND_ROWS; the test's own has it off.
    // driverOptions go to mysql2's pool from MikroORM 7, and to knex's connection in 6.
    const { host, port, user, password } = parseMysqlUrl(url);
    const flags = ['-FOUND_ROWS'];
    const orm = foundRows
      ? await connect(databaseUrl(url, db.name))
      : await MikroORM.init({
          dbName: db.name,
          host,
          port,
          user,
          password,
          pool: { min: 0, max: 2 },
          entities: [],
          discovery: { warnWhenNoEntities: false },
          driverOptions: MAJOR >= 7 ? { flags } : { connection: { flags } },
        });
    return {
      repay: (grant, loanId, amount) => repay(orm, grant, loanId, amount),
      inTransaction: (body) => orm.em.transactional((em) => body(fromMikroORM(em))),
      adaptClient: () => fromMikroORM(orm.em),
      close: () => orm.close(true),
    };
  },
});
