// `mysql-rwlock/adapters`: the fence's executor for each ORM's transaction. Each adapter is typed
// with the few members it calls, declared here, so this module imports no ORM, at run time or in
// its declarations: an app without the ORM installed type-checks it too. fromKnex and the checks
// the adapters share are in src/lock/fence/fence-executor.ts, since the lock's own fence uses fromKnex.
import type { FenceExecutor } from '../contract/api.js';
import { affectedRows, needObject, refuse, type Params } from '../lock/fence/fence-executor.js';

export type { FenceExecutor, GrantedWork } from '../contract/api.js';
export type { WithGrantOptions } from '../options.js';
export { fromKnex, type KnexTransactionLike } from '../lock/fence/fence-executor.js';

/** A mysql2 promise connection: what {@link fromMysql2} calls. */
export interface Mysql2ConnectionLike {
  execute(sql: string, values: Params): Promise<[unknown, unknown]>;
}

/**
 * The fence's executor for a mysql2 promise connection with a transaction open on it
 * (`beginTransaction()`). Refuses a pool (it has `getConnection`): each of its statements may run
 * on another connection.
 */
export function fromMysql2(connection: Mysql2ConnectionLike): FenceExecutor {
  needObject('fromMysql2', connection);
  if ('getConnection' in connection)
    refuse('fromMysql2', 'expected a connection with a transaction open, got a pool (use pool.getConnection())');
  return async (sql, params) => affectedRows((await connection.execute(sql, params))[0]);
}

/** A Prisma interactive transaction's client: what {@link fromPrisma} calls. */
export interface PrismaTransactionLike {
  $executeRawUnsafe(query: string, ...values: unknown[]): PromiseLike<number>;
}

/**
 * The fence's executor for a Prisma interactive transaction (`prisma.$transaction(async (tx) => ...)`).
 * Refuses the PrismaClient itself with InvalidOptionsError: its statements run outside the
 * transaction. The client has `$disconnect`, a transaction's client has not (Prisma 7 gives the
 * transaction's client `$transaction` too, for nested transactions, so that cannot tell them apart).
 */
export function fromPrisma(tx: PrismaTransactionLike): FenceExecutor {
  needObject('fromPrisma', tx);
  if (typeof (tx as { $disconnect?: unknown }).$disconnect === 'function')
    refuse('fromPrisma', 'expected the interactive transaction `tx`, got the PrismaClient');
  return async (sql, params) => await tx.$executeRawUnsafe(sql, ...params);
}

/** A TypeORM EntityManager: what {@link fromTypeORM} calls. */
export interface TypeORMManagerLike {
  query(query: string, parameters?: unknown[]): Promise<unknown>;
  readonly queryRunner?: { readonly isTransactionActive: boolean } | undefined;
}

/**
 * The fence's executor for the EntityManager that `dataSource.transaction(async (manager) => ...)`
 * hands over (MySQL driver). Refuses a manager with no transaction active on its query runner
 * (`dataSource.manager`) with InvalidOptionsError.
 */
export function fromTypeORM(manager: TypeORMManagerLike): FenceExecutor {
  needObject('fromTypeORM', manager);
  if (manager.queryRunner?.isTransactionActive !== true)
    refuse('fromTypeORM', 'expected the EntityManager of an active transaction, got one with no transaction');
  return async (sql, params) => affectedRows(await manager.query(sql, params));
}

/** A Sequelize instance: what {@link fromSequelize} calls. */
export interface SequelizeLike {
  /** Takes Sequelize's query options (`type: QueryTypes.UPDATE`, the string 'UPDATE'): typed `never` here, so no Sequelize type is named. */
  query(sql: string, options: never): Promise<unknown>;
}

/**
 * The fence's executor for a Sequelize (v6, mysql dialect) transaction. An UPDATE query resolves to
 * `[undefined, affectedRows]`. Sequelize escapes the replacements into the statement: safe here,
 * the fence's values are numbers and hex digits.
 */
export function fromSequelize(sequelize: SequelizeLike, transaction: object): FenceExecutor {
  needObject('fromSequelize', sequelize);
  needObject('fromSequelize', transaction);
  return async (sql, params) =>
    (
      (await sequelize.query(sql, { replacements: params, transaction, type: 'UPDATE' } as never)) as [unknown, number]
    )[1];
}

/** A Drizzle mysql2 transaction: what {@link fromDrizzle} calls. The database object has no `rollback`. */
export interface DrizzleTransactionLike {
  /** Takes Drizzle's `SQLWrapper`: typed `never` here, so no Drizzle type is named; the adapter builds one. */
  execute(query: never): Promise<unknown>;
  rollback(): unknown;
}

/**
 * The fence's executor for a Drizzle (mysql2 driver) transaction. The statement goes to Drizzle as
 * an already-compiled query (text and bound parameters, what Drizzle's `sql` template compiles
 * to), so this module needs nothing from drizzle-orm.
 */
export function fromDrizzle(tx: DrizzleTransactionLike): FenceExecutor {
  needObject('fromDrizzle', tx);
  if (typeof tx.rollback !== 'function') refuse('fromDrizzle', 'expected a transaction, got the database');
  return async (sql, params) => {
    const compiled = { sql, params: [...params] };
    const query = { toQuery: () => compiled, getSQL: () => query };
    return affectedRows(((await tx.execute(query as never)) as unknown[])[0]);
  };
}

/** A Kysely transaction: what {@link fromKysely} calls. `Kysely` itself is typed `isTransaction: boolean`. */
export interface KyselyTransactionLike {
  readonly isTransaction: true;
  /** Takes Kysely's `CompiledQuery`: typed `never` here, so no Kysely type is named; the adapter builds one. */
  executeQuery(query: never): Promise<{ readonly numAffectedRows?: bigint }>;
}

let kyselyQueries = 0;

/**
 * The fence's executor for a Kysely transaction (MySQL dialect). Kysely counts affected rows in a
 * `bigint`; the executor hands the fence a number.
 */
export function fromKysely(trx: KyselyTransactionLike): FenceExecutor {
  needObject('fromKysely', trx);
  if (trx.isTransaction !== true) refuse('fromKysely', 'expected a transaction, got the Kysely instance');
  return async (sql, params) => {
    // CompiledQuery.raw(sql, params), built here: a raw node carrying the text, bound parameters.
    const compiled = {
      sql,
      parameters: [...params],
      query: { kind: 'RawNode', sqlFragments: [sql], parameters: [] },
      queryId: { queryId: `mysql-rwlock-fence-${++kyselyQueries}` },
    };
    const result = await trx.executeQuery(compiled as never);
    return Number(result.numAffectedRows);
  };
}

/** A MikroORM (SQL driver) EntityManager: what {@link fromMikroORM} calls. */
export interface MikroORMEntityManagerLike {
  execute(sql: string, params: unknown[], method: 'run'): Promise<unknown>;
  isInTransaction(): boolean;
}

/**
 * The fence's executor for the EntityManager that `em.transactional(async (em) => ...)` hands over.
 * Refuses an EntityManager outside a transaction (`orm.em`) with InvalidOptionsError. Call
 * `em.flush()` before the fence: MikroORM flushes pending entities after the callback.
 */
export function fromMikroORM(em: MikroORMEntityManagerLike): FenceExecutor {
  needObject('fromMikroORM', em);
  if (!em.isInTransaction()) refuse('fromMikroORM', 'expected the EntityManager of a transaction, got one outside any');
  return async (sql, params) => affectedRows(await em.execute(sql, [...params], 'run'));
}
