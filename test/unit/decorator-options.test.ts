// The decorators take exactly the options of the call they run the method in, plus their own
// (`manager`, and `grant` for @WithWriteLock/@WithReadLock), in types and at run time. At run time the
// lists are read back from the refusals of an unknown option, which name every known one: the
// decorator's when the class is defined, the call's when it is made (on a manager whose knex never
// connects: options are checked before anything is sent). In types, the keys are compared here, and
// `keysOf` (which ties each run-time list to its type in src/) is shown to refuse a list that parts.
// covers: src/decorators/index.ts, src/options/keys.ts
import knexFactory from 'knex';
import { afterAll, describe, expect, it } from 'vitest';
import { createLockManager, InvalidOptionsError, type WithLockOptions } from '../../src/index.js';
import {
  Exclusive,
  WithReadLock,
  WithWriteLock,
  type ExclusiveDecoratorOptions,
  type GrantDecoratorOptions,
  type LockDecoratorOptions,
} from '../../src/decorators/index.js';
import { keysOf, optionsObject, type ExclusiveOptions, type WithGrantOptions } from '../../src/options.js';

const knex = knexFactory({ client: 'mysql2' });
const locks = createLockManager({ knex });
afterAll(async () => {
  await locks.close();
  await knex.destroy();
});

/** The option names a call's refusal of an unknown one lists, sorted. */
async function known(call: () => unknown): Promise<string[]> {
  try {
    await call();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidOptionsError);
    const listed = /: unknown option of .* \(known: (.*)\)$/.exec((error as Error).message);
    if (listed) return listed[1]!.split(', ').sort();
    throw error;
  }
  throw new Error('an unknown option was accepted');
}

const work = async () => 1;
const key = () => 'k';
const BOGUS = { bogus: 1 } as never;

describe('decorator options are those of their call', () => {
  it('@WithWriteLock and @WithReadLock: withWriteLock/withReadLock, manager and grant', async () => {
    const withWrite = await known(() => locks.withWriteLock('r', work, BOGUS));
    const withRead = await known(() => locks.withReadLock('r', work, BOGUS));
    expect(withWrite).toContain('section');
    expect(await known(() => WithWriteLock(key, BOGUS))).toEqual([...withWrite, 'manager', 'grant'].sort());
    expect(await known(() => WithReadLock(key, BOGUS))).toEqual([...withRead, 'manager', 'grant'].sort());
  });

  it('with grant: true: withWriteGrant/withReadGrant, manager and grant', async () => {
    const withGrant = await known(() => locks.withWriteGrant('r', work, BOGUS));
    const extra = { grant: true, isolationLevel: 'serializable' } as never;
    expect(await known(() => WithWriteLock(key, extra))).toEqual([...withGrant, 'manager', 'grant'].sort());
    expect(await known(() => WithReadLock(key, extra))).toEqual(
      [...(await known(() => locks.withReadGrant('r', work, BOGUS))), 'manager', 'grant'].sort(),
    );
  });

  it('@Exclusive: runExclusive and manager', async () => {
    const bad = { lockAtMostFor: 1_000, bogus: 1 } as never;
    const runExclusive = await known(() => locks.runExclusive('job', work, bad));
    expect(await known(() => Exclusive('job', bad))).toEqual([...runExclusive, 'manager'].sort());
  });

  it('accepts every option its call accepts, values checked by the same validator when the class is defined', () => {
    const all: Required<Omit<WithLockOptions, 'section' | 'history'>> = {
      waitMs: 1,
      signal: new AbortController().signal,
      isolationLevel: 'serializable',
      leaseMs: 1_000,
      maxHoldMs: 5_000,
    };
    expect(() => WithWriteLock(key, all)).not.toThrow();
    expect(() => WithReadLock(key, { section: true, waitMs: 1 })).not.toThrow();
    expect(() => WithReadLock(key, { section: true, history: false })).not.toThrow();
    expect(() => WithReadLock(key, { history: false })).toThrow(/^history: false needs section: true/);
    const { isolationLevel: _, ...granted } = all;
    expect(() => WithWriteLock(key, { ...granted, grant: true })).not.toThrow();
    expect(() => WithWriteLock(key, { waitMs: -1 })).toThrow(/^waitMs must be an integer from 0/);
    expect(() => WithWriteLock(key, { maxHoldMs: 5_000 })).toThrow(/^maxHoldMs needs leaseMs/);
  });

  it('negative control: the list @WithWriteLock kept before (no section) parts from withWriteLock, and the check sees it', async () => {
    const before = ['manager', 'grant', 'waitMs', 'signal', 'isolationLevel', 'leaseMs', 'maxHoldMs'];
    const withWrite = await known(() => locks.withWriteLock('r', work, BOGUS));
    expect(await known(() => optionsObject('@WithWriteLock', { bogus: 1 }, before))).not.toEqual(
      [...withWrite, 'manager', 'grant'].sort(),
    );
  });
});

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

describe('decorator option types are those of their call', () => {
  it('compiles only while the keys match (checked by npm run typecheck)', () => {
    const same: [
      Equal<keyof LockDecoratorOptions, keyof WithLockOptions | 'manager' | 'grant'>,
      Equal<keyof GrantDecoratorOptions, keyof WithGrantOptions | 'manager' | 'grant'>,
      Equal<keyof ExclusiveDecoratorOptions, keyof ExclusiveOptions | 'manager'>,
      Equal<Parameters<typeof WithWriteLock>[1], LockDecoratorOptions | GrantDecoratorOptions | undefined>,
      Equal<Parameters<typeof Exclusive>[1], ExclusiveDecoratorOptions>,
    ] = [true, true, true, true, true];
    expect(same).toEqual([true, true, true, true, true]);
  });

  it('negative control: keysOf refuses a list that leaves out a name of its type, or names one it lacks', () => {
    interface Two {
      a?: number;
      b?: number;
    }
    // @ts-expect-error 'b' is left out
    const short = keysOf<Two>()(['a']);
    // @ts-expect-error 'c' is not an option of Two
    const long = keysOf<Two>()(['a', 'b', 'c']);
    expect(keysOf<Two>()(['a', 'b'])).toEqual(['a', 'b']);
    expect([short, long]).toHaveLength(2);
  });
});
