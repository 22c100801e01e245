// `mysql-rwlock/nestjs`: a NestJS module that provides a LockManager, optionally migrates at
// bootstrap, registers the manager for the decorators of `mysql-rwlock/decorators`, and closes it
// when the application shuts down. @nestjs/common is an optional peer: only this entry imports it.
import {
  Inject,
  type DynamicModule,
  type FactoryProvider,
  type ModuleMetadata,
  type OnModuleDestroy,
  type Provider,
} from '@nestjs/common';
import { migrate, type MigrateOptions } from '../admin/migrate.js';
import { registerLockManager } from '../decorators/index.js';
import { InvalidOptionsError } from '../errors.js';
import { createLockManager, type LockManager } from '../lock/manager/manager.js';
import type { LockManagerOptions } from '../options.js';

/** The injection token of the module's LockManager (the class is exported as a type only). */
export const LOCK_MANAGER = 'mysql-rwlock:LockManager';

/** `@InjectLockManager()`: the parameter or property decorator that injects the module's LockManager. */
export function InjectLockManager(): PropertyDecorator & ParameterDecorator {
  return Inject(LOCK_MANAGER);
}

/** The options of `createLockManager`, and whether to run `migrate()` before creating the manager. */
export interface MysqlRwlockModuleOptions extends LockManagerOptions {
  /** true, or migrate()'s options: run migrate() on `knex` at bootstrap, before the manager is made. @defaultValue false */
  migrate?: boolean | MigrateOptions;
}

/** `forRootAsync`: the options made by a factory, with the providers it injects. */
export interface MysqlRwlockModuleAsyncOptions {
  /** Modules whose providers `inject` names. */
  imports?: ModuleMetadata['imports'];
  /** Providers passed to `useFactory`, in order. */
  inject?: FactoryProvider['inject'];
  useFactory: (...args: never[]) => MysqlRwlockModuleOptions | Promise<MysqlRwlockModuleOptions>;
}

const MODULE_OPTIONS = 'mysql-rwlock:ModuleOptions';
const LIFECYCLE = 'mysql-rwlock:Lifecycle';

/**
 * Provides the LockManager as `LOCK_MANAGER` to the whole application (a global module), registers
 * it as the manager of `@WithWriteLock`/`@WithReadLock` methods that name none, and on shutdown
 * (`app.close()`, or a signal with `enableShutdownHooks()`) unregisters and closes it in
 * `onModuleDestroy`: the in-flight scoped calls finish first. The knex instance stays the caller's:
 * destroy it after the manager, e.g. in `onApplicationShutdown`.
 *
 * @example
 * ```ts legacy-decorators
 * import { Module } from '@nestjs/common';
 * import knex from 'knex';
 * import { MysqlRwlockModule } from 'mysql-rwlock/nestjs';
 *
 * const db = knex({ client: 'mysql2', connection: process.env.MYSQL_URL! });
 *
 * @Module({ imports: [MysqlRwlockModule.forRoot({ knex: db, owner: 'loans-api', migrate: true })] })
 * export class AppModule {}
 * ```
 */
export class MysqlRwlockModule {
  /** The module with options known when the application module is defined. */
  static forRoot(options: MysqlRwlockModuleOptions): DynamicModule {
    return MysqlRwlockModule.#module([], [{ provide: MODULE_OPTIONS, useValue: options }]);
  }

  /** The module with options from a factory (configuration, a knex provider), awaited at bootstrap. */
  static forRootAsync(options: MysqlRwlockModuleAsyncOptions): DynamicModule {
    if (typeof options !== 'object' || options === null || typeof options.useFactory !== 'function')
      throw new InvalidOptionsError('MysqlRwlockModule.forRootAsync needs { useFactory, inject?, imports? }');
    return MysqlRwlockModule.#module(options.imports ?? [], [
      {
        provide: MODULE_OPTIONS,
        useFactory: options.useFactory as (...args: unknown[]) => unknown,
        inject: options.inject ?? [],
      },
    ]);
  }

  static #module(imports: NonNullable<ModuleMetadata['imports']>, optionProviders: Provider[]): DynamicModule {
    return {
      module: MysqlRwlockModule,
      global: true,
      imports,
      providers: [
        ...optionProviders,
        { provide: LOCK_MANAGER, useFactory: managerFromOptions, inject: [MODULE_OPTIONS] },
        { provide: LIFECYCLE, useFactory: lifecycle, inject: [LOCK_MANAGER] },
      ],
      exports: [LOCK_MANAGER],
    };
  }
}

async function managerFromOptions(options: MysqlRwlockModuleOptions): Promise<LockManager> {
  if (typeof options !== 'object' || options === null)
    throw new InvalidOptionsError('MysqlRwlockModule needs the options of createLockManager');
  const { migrate: migration, ...managerOptions } = options;
  if (
    migration !== undefined &&
    typeof migration !== 'boolean' &&
    (typeof migration !== 'object' || migration === null)
  )
    throw new InvalidOptionsError('migrate: true, false or the options of migrate()');
  // Made before migrating, so bad options are refused with nothing written.
  const manager = createLockManager(managerOptions);
  if (migration) await migrate(managerOptions.knex, migration === true ? undefined : migration);
  return manager;
}

/** A provider Nest calls on shutdown: the manager stops being the decorators' and is closed. */
function lifecycle(manager: LockManager): OnModuleDestroy {
  const unregister = registerLockManager(manager);
  return {
    async onModuleDestroy() {
      unregister();
      await manager.close();
    },
  };
}
