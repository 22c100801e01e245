// @WithWriteLock / @WithReadLock compiled under experimentalDecorators (this directory's
// tsconfig.json), as NestJS apps compile them: the cases of test/decorators.test.ts, which runs them
// as standard decorators.
// covers: src/decorators/index.ts
import 'reflect-metadata';
import { expect, it } from 'vitest';
import type { LockManager } from '../../src/index.js';
import { WithReadLock, WithWriteLock } from '../../src/decorators/index.js';
import { useTestDatabase } from '../support/db.js';
import {
  balanceBody,
  decoratorCases,
  failBody,
  repayBody,
  touchBody,
  type LoanService,
  type LoanServiceState,
  type RegisteredService,
} from '../support/decorated.js';

const db = useTestDatabase(import.meta.filename);

let observed = 'none';
function probe(_target: object, key: string | symbol, descriptor?: PropertyDescriptor): void {
  observed = typeof key === 'string' && descriptor !== undefined ? 'legacy' : 'standard';
}

const byLoan = (loanId: string) => `loan:${loanId}`;

class Loans implements LoanService {
  readonly locks;
  readonly db;
  readonly name;
  readonly events;
  constructor(state: LoanServiceState) {
    ({ locks: this.locks, db: this.db, name: this.name, events: this.events } = state);
  }

  @probe
  @WithWriteLock(byLoan, { manager: (self: Loans) => self.locks, waitMs: 60_000 })
  async repay(loanId: string, cents: number, hold?: Promise<void>): Promise<number | undefined> {
    return repayBody(this, loanId, cents, hold);
  }

  async repayUnlocked(loanId: string, cents: number, hold?: Promise<void>): Promise<number | undefined> {
    return repayBody(this, loanId, cents, hold);
  }

  @WithReadLock(byLoan, { manager: (self: Loans) => self.locks, waitMs: 60_000 })
  async balance(loanId: string, hold?: Promise<void>): Promise<number> {
    return balanceBody(this, loanId, hold);
  }

  @WithWriteLock(byLoan, { manager: (self: Loans) => self.locks })
  async failRepay(loanId: string): Promise<never> {
    return failBody(this, loanId);
  }
}

class Registered implements RegisteredService {
  @WithWriteLock(byLoan)
  async touch(loanId: string, locks: LockManager): Promise<string | undefined> {
    return touchBody(loanId, locks);
  }
}

class Member implements RegisteredService {
  constructor(private readonly locks: LockManager) {}

  @WithWriteLock(byLoan)
  async touch(loanId: string, locks: LockManager): Promise<string | undefined> {
    return this.locks === locks ? touchBody(loanId, locks) : undefined;
  }
}

/** A framework's method decorator: metadata on the method function, as NestJS routes and guards keep it. */
function tagged(_target: object, _key: string | symbol, descriptor: PropertyDescriptor): void {
  Reflect.defineMetadata('example:tag', 'kept', descriptor.value as object);
}

class Tagged {
  @WithWriteLock(byLoan, { manager: (self: Tagged) => self.locks })
  @tagged
  async touch(_loanId: string): Promise<void> {}

  constructor(readonly locks: LockManager) {}
}

it('keeps the reflect-metadata of the method it replaces', () => {
  expect(Reflect.getMetadata('example:tag', Tagged.prototype.touch)).toBe('kept');
});

decoratorCases({
  flavour: 'legacy',
  observedFlavour: () => observed,
  db,
  service: (state) => new Loans(state),
  registered: () => new Registered(),
  member: (locks) => new Member(locks),
});
