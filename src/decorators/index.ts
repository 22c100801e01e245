// `mysql-rwlock/decorators`: method decorators that run a method inside `withWriteLock` or
// `withReadLock`, or as an exclusive job (`runExclusive`), for TypeScript's standard decorators and
// for `experimentalDecorators` (NestJS) from one implementation. A subpath, so that the main entry
// stays small.
import { InvalidOptionsError } from '../errors.js';
import { LockManager } from '../lock/manager/manager.js';
import { checkJobName } from '../lock/scheduled/exclusive.js';
import {
  booleanOption,
  keysOf,
  OPTION_KEYS,
  optionsObject,
  resolveCallOptions,
  resolveExclusiveOptions,
  type ExclusiveOptions,
  type WithGrantOptions,
  type WithLockOptions,
} from '../options.js';

/**
 * Where a decorated method finds its lock manager: the manager, or a function called at each call
 * with the instance the method is called on (`this`) that returns it, e.g. a member of the class.
 */
export type LockManagerSource<This = unknown> = LockManager | ((self: This) => LockManager);

/**
 * Options of `@WithWriteLock` and `@WithReadLock` that run the method inside `withWriteLock`/`withReadLock`:
 * those of that call, and where the manager is. With `grant: true`, {@link GrantDecoratorOptions}.
 */
export interface LockDecoratorOptions<This = unknown> extends WithLockOptions {
  /**
   * The manager to lock with.
   * @defaultValue the instance's LockManager member if it has one (as a NestJS service has the one it
   * injects; with two, name one here), else the one given to {@link registerLockManager} (the NestJS
   * module registers its own)
   */
  manager?: LockManagerSource<This>;
  /** `true` runs the method inside `withWriteGrant`/`withReadGrant`: see {@link GrantDecoratorOptions}. @defaultValue false */
  grant?: false;
}

/**
 * Options of `@WithWriteLock` and `@WithReadLock` with `grant: true`: those of
 * `withWriteGrant`/`withReadGrant`, and where the manager is.
 */
export interface GrantDecoratorOptions<This = unknown> extends WithGrantOptions {
  /** The manager to lock with. @defaultValue as for {@link LockDecoratorOptions.manager} */
  manager?: LockManagerSource<This>;
  /**
   * Run the method inside `withWriteGrant`/`withReadGrant`: for another ORM, the body opens its own
   * transaction, reaches the grant with `manager.current()` and makes `grant.fence(adapter)` its last
   * statement (so `isolationLevel`, `section` and `history`, options of the transaction, are not taken). The
   * method then resolves `undefined` when its COMMIT's reply was lost but it committed.
   */
  grant: true;
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
 * deadlock or a certification conflict. Options are those of `withWriteLock` (with `grant: true`,
 * of `withWriteGrant`), checked when the class is defined by the validator that call uses.
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
  options?: LockDecoratorOptions<This> | GrantDecoratorOptions<This>,
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
  options?: LockDecoratorOptions<This> | GrantDecoratorOptions<This>,
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
  const { manager, ...jobOptions } = optionsObject(
    `@${what}`,
    options,
    DECORATOR_KEYS.exclusive,
  ) as unknown as ExclusiveDecoratorOptions<This>;
  // The name too, when the class is defined: a name no run could lock is refused before any run.
  resolveExclusiveOptions(`@${what}`, jobOptions);
  checkJobName(name);
  return methodDecorator<[], This>(what, manager, async (locks, _args, work) => {
    const result = await locks.runExclusive(name, work, jobOptions as ExclusiveOptions & { grant?: false });
    return result.ran ? result.value : undefined;
  });
}

/**
 * The options each decorator takes: those of the call it runs the method in (the one list that call
 * validates with, `OPTION_KEYS`) and its own. `keysOf` holds each list to its type.
 */
const DECORATOR_KEYS = Object.freeze({
  lock: keysOf<LockDecoratorOptions>()(['manager', 'grant', ...OPTION_KEYS.scoped]),
  grant: keysOf<GrantDecoratorOptions>()(['manager', 'grant', ...OPTION_KEYS.granted]),
  exclusive: keysOf<ExclusiveDecoratorOptions>()(['manager', ...OPTION_KEYS.exclusive]),
});

function lockDecorator<Args extends unknown[], This>(
  mode: 'write' | 'read',
  what: string,
  keyOf: (...args: Args) => string,
  options: LockDecoratorOptions<This> | GrantDecoratorOptions<This> | undefined,
): LockDecorator<Args, This> {
  if (typeof keyOf !== 'function')
    throw new InvalidOptionsError(`keyOf: @${what} needs a function that builds the resource id from the arguments`);
  // The grant form's names are a subset of the lock form's: checked against the lock form's, then,
  // with grant: true, against the grant form's.
  const o = optionsObject(`@${what}`, options, DECORATOR_KEYS.lock);
  const granted = booleanOption('grant', o.grant, false);
  if (granted) optionsObject(`@${what} with { grant: true }`, o, DECORATOR_KEYS.grant);
  const { manager } = o;
  const callOptions = Object.fromEntries(Object.entries(o).filter(([key]) => key !== 'manager' && key !== 'grant'));
  // Checked now, when the class is defined, by the validator of the call the method will run in.
  resolveCallOptions(`@${what}`, callOptions, granted ? 'granted' : 'scoped');
  return methodDecorator<Args, This>(what, manager as LockManagerSource<This> | undefined, (manager, args, work) => {
    const resourceId = keyOf(...args);
    if (granted)
      return mode === 'write'
        ? manager.withWriteGrant(resourceId, work, callOptions)
        : manager.withReadGrant(resourceId, work, callOptions);
    return mode === 'write'
      ? manager.withWriteLock(resourceId, work, callOptions)
      : manager.withReadLock(resourceId, work, callOptions);
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
