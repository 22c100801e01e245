// The fence's executor for a knex transaction, and the checks every executor shares. In the lock
// client because the lock runs withWriteLock's fence through fromKnex; `mysql-rwlock/adapters`
// (src/adapters/) re-exports fromKnex beside the other ORMs' executors, built on the checks here.
// Like them, it is typed with the few members it calls, so no knex type is named.
import { InvalidOptionsError } from '../../errors.js';
import type { FenceExecutor } from '../../contract/api.js';

/** The fence's parameters, as the executors hand them on. */
export type Params = (number | string)[];

/** The affected-row count of a mysql2 result header (what knex, mysql2, TypeORM and Drizzle resolve to). */
export function affectedRows(header: unknown): number {
  // Anything but a number (a driver that resolves otherwise) makes the fence throw LockInvariantError.
  return (header as { affectedRows?: number } | null | undefined)?.affectedRows as number;
}

export function refuse(what: string, why: string): never {
  throw new InvalidOptionsError(`${what}: ${why}`);
}

export function needObject(what: string, value: unknown): void {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null)
    refuse(what, `expected the transaction, got ${value === null ? 'null' : typeof value}`);
}

/** A knex transaction (client mysql2): what {@link fromKnex} calls. The knex instance has no `isCompleted`. */
export interface KnexTransactionLike {
  raw(sql: string, bindings: Params): PromiseLike<unknown>;
  isCompleted(): boolean;
}

/**
 * The fence's executor for a knex transaction (client mysql2). Refuses the knex instance (it has no
 * `isCompleted`), which would run the fence on a pool connection of its own.
 *
 * @example
 * ```ts
 * import type { LockManager } from 'mysql-rwlock';
 * import { fromKnex } from 'mysql-rwlock/adapters';
 * import type { Knex } from 'knex';
 * declare const locks: LockManager;
 * declare const db: Knex;
 *
 * await locks.withWriteGrant('loan:7', (grant) =>
 *   db.transaction(async (trx) => {
 *     await trx('payments').insert({ loan_id: '7', amount: 10 });
 *     await grant.fence(fromKnex(trx));
 *   }),
 * );
 * ```
 */
export function fromKnex(trx: KnexTransactionLike): FenceExecutor {
  needObject('fromKnex', trx);
  if (typeof trx.isCompleted !== 'function') refuse('fromKnex', 'expected a knex transaction, got the knex instance');
  return async (sql, params) => affectedRows(((await trx.raw(sql, params)) as unknown[])[0]);
}
