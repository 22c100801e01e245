// The fence on a MikroORM transaction (@mikro-orm/mysql, which runs on knex and mysql2). No
// entities: the fence and these business writes are plain SQL through the transaction's EntityManager.
import { MikroORM } from '@mikro-orm/mysql';
import { parseMysqlUrl } from '../../harness/database.js';
import type { Grant } from '../../src/index.js';
import { useTestDatabase } from '../support/db.js';
import { fromMikroORM } from '../../src/adapters/index.js';
import { fenceSuite } from './support/suite.js';

const db = useTestDatabase(import.meta.filename);

// docs/orms.md recipe: begin
async function repay(orm: MikroORM, grant: Grant, loanId: string, amount: number): Promise<void> {
  await orm.em.transactional(async (em) => {
    await em.execute(
      'INSERT INTO loans (id, repaid) VALUES (?, ?) ON DUPLICATE KEY UPDATE repaid = repaid + ?',
      [loanId, amount, amount],
      'run',
    );
    await em.execute('INSERT INTO payments (loan_id, amount) VALUES (?, ?)', [loanId, amount], 'run');
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
    const { host, port, user, password } = parseMysqlUrl(url);
    const orm = await MikroORM.init({
      dbName: db.name,
      host,
      port,
      user,
      password,
      pool: { min: 0, max: 2 },
      entities: [],
      discovery: { warnWhenNoEntities: false },
      driverOptions: { connection: { flags: [foundRows ? 'FOUND_ROWS' : '-FOUND_ROWS'] } },
    });
    return {
      repay: (grant, loanId, amount) => repay(orm, grant, loanId, amount),
      inTransaction: (body) => orm.em.transactional((em) => body(fromMikroORM(em))),
      adaptClient: () => fromMikroORM(orm.em),
      close: () => orm.close(true),
    };
  },
});
