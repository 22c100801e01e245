// `import ... from 'mysql-rwlock/nestjs'` as an app writes it: every name the entry exports is
// imported and used (see index.ts beside this file for why and how to update it). No decorator
// syntax here (the matrix's apps compile standard decorators; NestJS apps use experimentalDecorators,
// as examples/nestjs/ does): the modules are built as Nest's dynamic modules.
import type { DynamicModule } from '@nestjs/common';
import type { Knex } from 'knex';
import type { LockManager } from 'mysql-rwlock';
import {
  LOCK_MANAGER,
  InjectLockManager,
  MysqlRwlockModule,
  type MysqlRwlockModuleOptions,
  type MysqlRwlockModuleAsyncOptions,
} from 'mysql-rwlock/nestjs';

export function modules(db: Knex): DynamicModule[] {
  const options: MysqlRwlockModuleOptions = { knex: db, owner: 'loans-api', migrate: { procedures: false } };
  const async: MysqlRwlockModuleAsyncOptions = {
    inject: ['KNEX'],
    useFactory: (knex: Knex) => ({ knex, migrate: true }),
  };
  return [MysqlRwlockModule.forRoot(options), MysqlRwlockModule.forRootAsync(async)];
}

export class Repayments {
  constructor(readonly locks: LockManager) {}
}
// What `@InjectLockManager()` on the constructor's first parameter does.
InjectLockManager()(Repayments, undefined, 0);
export const token: string = LOCK_MANAGER;
