// `mysql-rwlock/decorators`: method decorators that run a method inside `withWriteLock` or
// `withReadLock`, or as an exclusive job (`runExclusive`), for TypeScript's standard decorators and
// for `experimentalDecorators` (NestJS) from one implementation. A subpath, so that the main entry
// stays small.
import { InvalidOptionsError } from '../errors.js';
import { LockManager } from '../lock/manager.js';
import {
  booleanOption,
  optionsObject,
  resolveExclusiveOptions,
  type ExclusiveOptions,
  type WithLockOptions,
} from '../options.js';

/**
 * Where a decorated method finds its lock manager: the manager, or a function called at each call
 * with the instance the method is called on (`this`) that returns it, e.g. a member of the class.
 */
export type LockManagerSource<This = unknown> = LockManager | ((self: This) => LockManager);

/** Options of `@WithWriteLock` and `@WithReadLock`: those of `withWriteLock`, and where the manager is. */
export interface LockDecoratorOptions<This = unknown> extends WithLockOptions {
  /**
   * The manager to lock with.
   * @defaultValue the instance's LockManager member if it has one (as a NestJS service has the one it
   * injects; with two, name one here), else the one given to {@link registerLockManager} (the NestJS
   * module registers its own)
   */
  manager?: LockManagerSource<This>;
  /**
   * Run the method inside `withWriteGrant`/`withReadGrant` instead: for another ORM, the body opens
   * its own transaction, reaches the grant with `manager.current()` and makes
   * `grant.fence(adapter)` its last statement (`isolationLevel` is then refused: the transaction is
   * the body's). The method then resolves `undefined` when its COMMIT's reply was lost but it committed.
   * @defaultValue false
   */
  grant?: boolean;
}

/**
 * A method decorator, usable with TypeScript's standard decorators `(value, context)` and under
 * `experimentalDecorators` `(target, key, descriptor)`. The method's first arguments must be those
 * `keyOf` takes, and it must return a promise.
 */
export interface LockDecorator<Args extends unknown[], This = unknown> {
  <T extends This, A extends [...Args, ...unknown[]], R>(
    value: (this: T, ...args: A) => Promise<R>,
    context: ClassMethodDecoratorContext<T, (this: T, ...args: A) => Promise<R>>,
  ): (this: T, ...args: A) => Promise<R>;
  <A extends [...Args, ...unknown[]], R>(
    target: This,
    key: string | symbol,
    descriptor: TypedPropertyDescriptor<(...args: A) => Promise<R>>,
  ): TypedPropertyDescriptor<(...args: A) => Promise<R>>;
}

let registered: LockManager | undefined;

/**
 * Makes `manager` the one decorated methods lock with when their decorator names none, and returns
 * a function that undoes it (if it is still the registered one). One manager at a time: a second
 * registration replaces the first.
 *
 * @example
 * ```ts
 * import { createLockManager } from 'mysql-rwlock';
 * import { registerLockManager } from 'mysql-rwlock/decorators';
 * import type { Knex } from 'knex';
 * declare const db: Knex;
 *
 * const locks = createLockManager({ knex: db });
 * const unregister = registerLockManager(locks);
 * // ... decorated methods lock with `locks`
 * unregister();
 * await locks.close();
 * ```
 */
export function registerLockManager(manager: LockManager): () => void {
  if (!(manager instanceof LockManager))
    throw new InvalidOptionsError('registerLockManager needs a LockManager (from createLockManager)');
  registered = manager;
  return () => {
    if (registered === manager) registered = undefined;
  };
}

/**
 * Runs the decorated method inside `withWriteLock(keyOf(...args), ..., options)`: the method's body
 * is the work, its database writes go through `manager.current()?.trx` (or `current(id)`), and the
 * method's promise settles as `withWriteLock`'s does. Like that work, the body runs again after a
 * deadlock or a certification conflict. Options are checked when the class is defined (unknown
 * keys, null) and at each call as `withWriteLock` checks them.
 *
 * @example
 * ```ts
 * import type { LockManager } from 'mysql-rwlock';
 * import { WithWriteLock } from 'mysql-rwlock/decorators';
 * declare const locks: LockManager;
 *
 * class Repayments {
 *   @WithWriteLock((loanId: number) => `loan:${loanId}`, { manager: locks, waitMs: 5_000 })
 *   async repay(loanId: number, cents: number): Promise<void> {
 *     const trx = locks.current()!.trx!;
 *     await trx('loan').where({ id: loanId }).decrement('balance_cents', cents);
 *   }
 * }
 * await new Repayments().repay(42, 12_500);
 * ```
 */
export function WithWriteLock<Args extends unknown[], This = unknown>(
  keyOf: (...args: Args) => string,
  options?: LockDecoratorOptions<This>,
): LockDecorator<Args, NoInfer<This>> {
  return lockDecorator('write', 'WithWriteLock', keyOf, options);
}

/**
 * As {@link WithWriteLock}, inside `withReadLock`.
 *
 * @example
 * ```ts
 * import type { LockManager } from 'mysql-rwlock';
 * import { WithReadLock } from 'mysql-rwlock/decorators';
 * declare const locks: LockManager;
 *
 * class Loans {
 *   @WithReadLock((loanId: number) => `loan:${loanId}`, { manager: () => locks })
 *   async balance(loanId: number): Promise<number> {
 *     const row = (await locks.current()!.trx!('loan').where({ id: loanId }).first('balance_cents')) as {
 *       balance_cents: number;
 *     };
 *     return row.balance_cents;
 *   }
 * }
 * ```
 */
export function WithReadLock<Args extends unknown[], This = unknown>(
  keyOf: (...args: Args) => string,
  options?: LockDecoratorOptions<This>,
): LockDecorator<Args, NoInfer<This>> {
  return lockDecorator('read', 'WithReadLock', keyOf, options);
}

/** Options of `@Exclusive`: those of `runExclusive`, and where the manager is (as for `@WithWriteLock`). */
export interface ExclusiveDecoratorOptions<This = unknown> extends ExclusiveOptions {
  /** The manager to run the job with. @defaultValue as for {@link LockDecoratorOptions.manager} */
  manager?: LockManagerSource<This>;
}

/**
 * Runs the decorated method as `runExclusive(name, ..., options)`: on one instance at a time, its
 * body the work (its writes through `manager.current()?.trx`, or with `{ grant: true }` its own
 * transaction fenced by `manager.current()!.grant`). The method resolves to its value when it ran,
 * and to `undefined` at once when another instance runs the job. Options are checked when the class
 * is defined.
 *
 * @example
 * ```ts
 * import type { LockManager } from 'mysql-rwlock';
 * import { Exclusive } from 'mysql-rwlock/decorators';
 * declare const locks: LockManager;
 *
 * class Billing {
 *   @Exclusive('billing:nightly-invoices', { manager: locks, lockAtMostFor: 600_000, lockAtLeastFor: 30_000 })
 *   async sendInvoices(): Promise<number | undefined> {
 *     return locks.current()!.trx!('invoice').where({ status: 'due' }).update({ status: 'sent' });
 *   }
 * }
 * ```
 */
export function Exclusive<This = unknown>(
  name: string,
  options: ExclusiveDecoratorOptions<This>,
): LockDecorator<[], NoInfer<This>> {
  const what = 'Exclusive';
  if (typeof name !== 'string') throw new InvalidOptionsError(`name: @${what} needs the job's name, a string`);
  const { manager, ...jobOptions } = optionsObject(`@${what}`, options, [
    'manager',
    'lockAtMostFor',
    'lockAtLeastFor',
    'leaseMs',
    'grant',
  ]) as unknown as ExclusiveDecoratorOptions<This>;
  resolveExclusiveOptions(`@${what}`, jobOptions);
  return methodDecorator<[], This>(what, manager, async (locks, _args, work) => {
    const result = await locks.runExclusive(name, work, jobOptions as ExclusiveOptions & { grant?: false });
    return result.ran ? result.value : undefined;
  });
}

const WITH_LOCK_KEYS = ['waitMs', 'signal', 'isolationLevel', 'leaseMs', 'maxHoldMs'] as const;

function lockDecorator<Args extends unknown[], This>(
  mode: 'write' | 'read',
  what: string,
  keyOf: (...args: Args) => string,
  options: LockDecoratorOptions<This> | undefined,
): LockDecorator<Args, This> {
  if (typeof keyOf !== 'function')
    throw new InvalidOptionsError(`keyOf: @${what} needs a function that builds the resource id from the arguments`);
  const o = optionsObject(`@${what}`, options, ['manager', 'grant', ...WITH_LOCK_KEYS]);
  const granted = booleanOption('grant', o.grant, false);
  if (granted && o.isolationLevel !== undefined)
    throw new InvalidOptionsError(
      `isolationLevel: @${what} with { grant: true } runs the method's own transaction; set its isolation level there`,
    );
  const lockOptions: WithLockOptions = {};
  for (const key of WITH_LOCK_KEYS) if (o[key] !== undefined) Object.assign(lockOptions, { [key]: o[key] });
  return methodDecorator<Args, This>(what, o.manager as LockManagerSource<This> | undefined, (manager, args, work) => {
    const resourceId = keyOf(...args);
    if (granted)
      return mode === 'write'
        ? manager.withWriteGrant(resourceId, work, lockOptions)
        : manager.withReadGrant(resourceId, work, lockOptions);
    return mode === 'write'
      ? manager.withWriteLock(resourceId, work, lockOptions)
      : manager.withReadLock(resourceId, work, lockOptions);
  });
}

/**
 * A method decorator, both ways, whose replacement finds its manager (`source`, an instance member
 * or the registered one) and hands `call` the method's body as the work.
 */
function methodDecorator<Args extends unknown[], This>(
  what: string,
  source: LockManagerSource<This> | undefined,
  call: (manager: LockManager, args: Args, work: () => Promise<unknown>) => Promise<unknown>,
): LockDecorator<Args, This> {
  if (source !== undefined && typeof source !== 'function' && !(source instanceof LockManager))
    throw new InvalidOptionsError(`manager: @${what} needs a LockManager or a function returning one`);

  const managerNow = (self: This, method: string): LockManager => {
    if (typeof source === 'function') {
      const found = source(self);
      if (!(found instanceof LockManager))
        throw new InvalidOptionsError(`manager: the function given to @${what} on ${method} returned no LockManager`);
      return found;
    }
    if (source !== undefined) return source;
    const members = memberManagers(self);
    if (members.length > 1)
      throw new InvalidOptionsError(
        `@${what} on ${method}: the instance has ${members.length} LockManager members; name one with { manager: (self) => self.locks }`,
      );
    const manager = members[0] ?? registered;
    if (manager === undefined)
      throw new InvalidOptionsError(
        `@${what} on ${method}: no lock manager; pass { manager }, give the class a LockManager member or call registerLockManager(locks)`,
      );
    return manager;
  };

  const wrap = (original: unknown, name: string): ((this: unknown, ...args: unknown[]) => Promise<unknown>) => {
    if (typeof original !== 'function') throw new InvalidOptionsError(`@${what} decorates methods; ${name} is not one`);
    const method = original as (this: unknown, ...args: unknown[]) => Promise<unknown>;
    const wrapped = async function (this: unknown, ...args: unknown[]): Promise<unknown> {
      const manager = managerNow(this as This, name);
      return call(manager, args as Args, () => method.apply(this, args));
    };
    Object.defineProperty(wrapped, 'name', { value: method.name });
    copyMetadata(method, wrapped);
    return wrapped;
  };

  // One function for both calling conventions: a standard decorator gets a context object with a
  // `kind`, a legacy one gets the prototype, the key and the property descriptor.
  return ((value: unknown, context: unknown, descriptor?: PropertyDescriptor) => {
    if (typeof context === 'object' && context !== null && 'kind' in context) {
      const c = context as ClassMethodDecoratorContext;
      if (c.kind !== 'method') throw new InvalidOptionsError(`@${what} decorates methods, not a ${String(c.kind)}`);
      return wrap(value, String(c.name));
    }
    if (descriptor === undefined) throw new InvalidOptionsError(`@${what} decorates methods`);
    return { ...descriptor, value: wrap(descriptor.value, String(context)) };
  }) as LockDecorator<Args, This>;
}

/** The LockManagers among the instance's own properties (an injected `private readonly locks`). */
function memberManagers(self: unknown): LockManager[] {
  if (typeof self !== 'object' || self === null) return [];
  return Object.values(self).filter((v): v is LockManager => v instanceof LockManager);
}

/**
 * Under experimentalDecorators, frameworks (NestJS routes, guards) keep their metadata on the method
 * function with reflect-metadata: when @WithWriteLock is applied after them, the replacement keeps it.
 */
function copyMetadata(from: object, to: object): void {
  const r = Reflect as unknown as {
    getOwnMetadataKeys?: (target: object) => unknown[];
    getOwnMetadata?: (key: unknown, target: object) => unknown;
    defineMetadata?: (key: unknown, value: unknown, target: object) => void;
  };
  if (!r.getOwnMetadataKeys || !r.getOwnMetadata || !r.defineMetadata) return;
  for (const key of r.getOwnMetadataKeys(from)) r.defineMetadata(key, r.getOwnMetadata(key, from), to);
}
