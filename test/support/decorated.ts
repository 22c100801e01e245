// The cases both decorator test files run (test/decorators.test.ts: TypeScript 5+ standard
// decorators; test/legacy-decorators/: experimentalDecorators, as NestJS compiles). Each file
// declares its decorated class under its own compiler settings and hands it here; the bodies of the
// decorated methods are these functions, so both flavours run the same work.
import type { Knex } from 'knex';
import { describe, expect, it } from 'vitest';
import { createLockManager, InvalidOptionsError, type LockManager } from '../../src/index.js';
import { registerLockManager } from '../../src/decorators/index.js';
import type { TestDatabase } from './db.js';
import { invariantViolations } from './state.js';

/** What a decorated service holds: its manager (found by the decorator as `self.locks`), a trace. */
export interface LoanServiceState {
  readonly locks: LockManager;
  readonly db: Knex;
  readonly name: string;
  readonly events: string[];
}

export interface LoanService extends LoanServiceState {
  /** Decorated @WithWriteLock(loan id): decrements the balance, waits for `hold`, returns its scope's grant id. */
  repay(loanId: string, cents: number, hold?: Promise<void>): Promise<number | undefined>;
  /** The same body, undecorated: the negative control. */
  repayUnlocked(loanId: string, cents: number, hold?: Promise<void>): Promise<number | undefined>;
  /** Decorated @WithReadLock(loan id): the balance, read after `hold`. */
  balance(loanId: string, hold?: Promise<void>): Promise<number>;
  /** Decorated @WithWriteLock: writes, then throws. */
  failRepay(loanId: string): Promise<never>;
}

/** Decorated @WithWriteLock with no manager option: the registered manager. */
export interface RegisteredService {
  /** The owner of `locks` if the method runs in a scope of `locks` on the loan. */
  touch(loanId: string, locks: LockManager): Promise<string | undefined>;
}

export async function touchBody(loanId: string, locks: LockManager): Promise<string | undefined> {
  return locks.current(`loan:${loanId}`) === undefined ? undefined : locks.owner;
}

export async function repayBody(
  self: LoanServiceState,
  loanId: string,
  cents: number,
  hold: Promise<void> | undefined,
): Promise<number | undefined> {
  const scope = self.locks.current(`loan:${loanId}`);
  self.events.push(`enter ${self.name}`);
  await (scope?.trx ?? self.db)('loan').where({ id: loanId }).decrement('balance', cents);
  await hold;
  self.events.push(`exit ${self.name}`);
  return scope?.grant.id;
}

export async function balanceBody(self: LoanServiceState, loanId: string, hold?: Promise<void>): Promise<number> {
  const scope = self.locks.current();
  if (scope?.grant.mode !== 'read' || scope.trx === undefined) throw new Error('balance ran outside its read scope');
  self.events.push(`enter ${self.name}`);
  await hold;
  const row = (await scope.trx('loan').where({ id: loanId }).first('balance')) as { balance: number };
  self.events.push(`exit ${self.name}`);
  return row.balance;
}

export async function failBody(self: LoanServiceState, loanId: string): Promise<never> {
  await self.locks.current()!.trx!('loan').where({ id: loanId }).decrement('balance', 1_000);
  throw new RangeError('declined');
}

function gate(): { open: () => void; hold: Promise<void> } {
  let open!: () => void;
  const hold = new Promise<void>((resolve) => (open = resolve));
  return { open, hold };
}

export function decoratorCases(options: {
  flavour: 'standard' | 'legacy';
  /** What the file's probe decorator saw: the calling convention its compiler used. */
  observedFlavour: () => string;
  db: TestDatabase;
  service: (state: LoanServiceState) => LoanService;
  registered: () => RegisteredService;
  /** The same undecorated-manager method on a class with a LockManager member. */
  member: (locks: LockManager) => RegisteredService;
}): void {
  const { db } = options;
  let n = 0;
  /** Two services on one database, each with a manager of its own, as two processes have. */
  async function twoServices(): Promise<{ loan: string; a: LoanService; b: LoanService; events: string[] }> {
    await db.knex.raw('CREATE TABLE IF NOT EXISTS loan (id VARCHAR(16) PRIMARY KEY, balance INT NOT NULL)');
    const loan = `L${++n}`;
    await db.knex('loan').insert({ id: loan, balance: 10_000 });
    const events: string[] = [];
    const a = options.service({
      locks: createLockManager({ knex: db.knex, owner: 'a' }),
      db: db.knex,
      name: 'a',
      events,
    });
    const b = options.service({
      locks: createLockManager({ knex: db.knex, owner: 'b' }),
      db: db.knex,
      name: 'b',
      events,
    });
    return { loan, a, b, events };
  }
  const balanceOf = async (loan: string) =>
    ((await db.knex('loan').where({ id: loan }).first('balance')) as { balance: number }).balance;

  describe(`decorators compiled as ${options.flavour} decorators`, () => {
    it(`ran the ${options.flavour} calling convention`, () => {
      expect(options.observedFlavour()).toBe(options.flavour);
    });

    it('runs the method inside withWriteLock on keyOf(args): current() gives its grant and transaction', async () => {
      const { loan, a } = await twoServices();
      expect(a.locks.current()).toBeUndefined();
      const grantId = await a.repay(loan, 2_500);
      expect(grantId).toBeTypeOf('number');
      expect(await balanceOf(loan)).toBe(7_500);
      const { grants } = await a.locks.history(`loan:${loan}`);
      expect(grants.map((g) => [g.id, g.mode, g.releasedBy])).toEqual([[grantId, 'write', 'holder']]);
      expect(await invariantViolations(db.knex)).toEqual([]);
    });

    it('two decorated writes on one loan exclude each other; undecorated, the same bodies overlap', async () => {
      const { loan, a, b, events } = await twoServices();
      const first = gate();
      const repayA = a.repay(loan, 100, first.hold);
      await expect.poll(() => events).toContain('enter a');
      const repayB = b.repay(loan, 200);
      // b is queued on the lock in the database, not merely slow to start: it has not entered.
      await expect.poll(async () => (await a.locks.inspect(`loan:${loan}`)).writerWaiting).toBe(true);
      expect(events).toEqual(['enter a']);
      first.open();
      await Promise.all([repayA, repayB]);
      expect(events).toEqual(['enter a', 'exit a', 'enter b', 'exit b']);
      expect(await balanceOf(loan)).toBe(9_700);

      // Negative control: without the decorator nothing keeps b out while a is inside.
      events.length = 0;
      const second = gate();
      const unlockedA = a.repayUnlocked(loan, 100, second.hold);
      await expect.poll(() => events).toContain('enter a');
      const unlockedB = b.repayUnlocked(loan, 200);
      await expect.poll(() => events).toContain('enter b');
      expect(events.slice(0, 2)).toEqual(['enter a', 'enter b']);
      second.open();
      await Promise.all([unlockedA, unlockedB]);
    });

    it('decorated reads of one loan share it', async () => {
      const { loan, a, b, events } = await twoServices();
      const g = gate();
      const reads = [a.balance(loan, g.hold), b.balance(loan, g.hold)];
      await expect.poll(() => events.filter((e) => e.startsWith('enter')).sort()).toEqual(['enter a', 'enter b']);
      g.open();
      expect(await Promise.all(reads)).toEqual([10_000, 10_000]);
    });

    it('a method that throws rolls its writes back, releases the grant and rejects with its error', async () => {
      const { loan, a } = await twoServices();
      await expect(a.failRepay(loan)).rejects.toThrow(RangeError);
      expect(await balanceOf(loan)).toBe(10_000);
      expect((await a.locks.inspect(`loan:${loan}`)).live).toEqual({ write: 0, read: 0 });
    });

    it('with no manager option, uses the registered manager, and refuses without one', async () => {
      const { loan, a } = await twoServices();
      const service = options.registered();
      await expect(service.touch(loan, a.locks)).rejects.toThrow(InvalidOptionsError);
      expect(await a.locks.history(`loan:${loan}`)).toEqual({ grants: [], next: null });
      const unregister = registerLockManager(a.locks);
      try {
        expect(await service.touch(loan, a.locks)).toBe('a');
      } finally {
        unregister();
      }
      await expect(service.touch(loan, a.locks)).rejects.toThrow(InvalidOptionsError);
    });

    it("with no manager option, prefers the instance's LockManager member to the registered one", async () => {
      const { loan, a, b } = await twoServices();
      const unregister = registerLockManager(b.locks);
      try {
        expect(await options.member(a.locks).touch(loan, a.locks)).toBe('a');
        expect(await options.registered().touch(loan, b.locks)).toBe('b');
      } finally {
        unregister();
      }
    });
  });
}
