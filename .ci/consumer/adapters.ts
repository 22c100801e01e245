// `import ... from 'mysql-rwlock/adapters'` as an app writes it: every name the entry exports is
// imported and used (see index.ts beside this file for why and how to update it). The app has no
// ORM installed: each adapter is handed an object of the shape its ORM's transaction has.
import type { Grant, LockManager } from 'mysql-rwlock';
import {
  fromDrizzle,
  fromKnex,
  fromKysely,
  fromMikroORM,
  fromMysql2,
  fromPrisma,
  fromSequelize,
  fromTypeORM,
  type DrizzleTransactionLike,
  type FenceExecutor,
  type GrantedWork,
  type KnexTransactionLike,
  type KyselyTransactionLike,
  type MikroORMEntityManagerLike,
  type Mysql2ConnectionLike,
  type PrismaTransactionLike,
  type SequelizeLike,
  type TypeORMManagerLike,
  type WithGrantOptions,
} from 'mysql-rwlock/adapters';

declare const locks: LockManager;
declare const knexTrx: KnexTransactionLike;
declare const connection: Mysql2ConnectionLike;
declare const prismaTx: PrismaTransactionLike;
declare const manager: TypeORMManagerLike;
declare const sequelize: SequelizeLike;
declare const sequelizeTransaction: object;
declare const drizzleTx: DrizzleTransactionLike;
declare const kyselyTrx: KyselyTransactionLike;
declare const em: MikroORMEntityManagerLike;

const executors: FenceExecutor[] = [
  fromKnex(knexTrx),
  fromMysql2(connection),
  fromPrisma(prismaTx),
  fromTypeORM(manager),
  fromSequelize(sequelize, sequelizeTransaction),
  fromDrizzle(drizzleTx),
  fromKysely(kyselyTrx),
  fromMikroORM(em),
];

const options: WithGrantOptions = { waitMs: 5_000, leaseMs: 30_000 };
const work: GrantedWork<number> = async (grant: Grant) => {
  for (const execute of executors.slice(0, 1)) await grant.fence(execute);
  return grant.id;
};
export const id: Promise<number | undefined> = locks.withWriteGrant('loan:7', work, options);
export const read: Promise<void> = locks
  .withReadGrant('loan:7', (grant) => grant.fence(fromKnex(knexTrx)))
  .then(() => undefined);
