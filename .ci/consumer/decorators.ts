// `import ... from 'mysql-rwlock/decorators'` as an app writes it: every name the entry exports is
// imported and used (see index.ts beside this file for why and how to update it). The app compiles
// them as TypeScript 5+ standard decorators; test/legacy-decorators/ type-checks experimentalDecorators.
import type { Knex } from 'knex';
import type { LockManager } from 'mysql-rwlock';
import {
  WithWriteLock,
  WithReadLock,
  Exclusive,
  registerLockManager,
  type ExclusiveDecoratorOptions,
  type GrantDecoratorOptions,
  type LockDecorator,
  type LockDecoratorOptions,
  type LockManagerSource,
} from 'mysql-rwlock/decorators';

const byLoan = (loanId: string): string => `loan:${loanId}`;

export class Loans {
  constructor(readonly locks: LockManager) {}

  @WithWriteLock(byLoan, { manager: (self: Loans) => self.locks, waitMs: 5_000, leaseMs: 30_000 })
  async repay(loanId: string, cents: number): Promise<number> {
    const trx: Knex.Transaction | undefined = this.locks.current(byLoan(loanId))?.trx;
    if (trx === undefined) throw new Error('not under the loan lock');
    return trx('loan').where({ id: loanId }).decrement('balance_cents', cents);
  }

  @WithReadLock(byLoan)
  async balance(loanId: string): Promise<number> {
    const scope = this.locks.current();
    return scope?.grant.mode === 'read' ? loanId.length : 0;
  }
}

export class Reports {
  constructor(readonly locks: LockManager) {}

  // One instance runs it; the others resolve undefined at once.
  @Exclusive('reports:nightly', { manager: (self: Reports) => self.locks, lockAtMostFor: 600_000 })
  async nightly(): Promise<number> {
    return 1;
  }
}

export const nightlyOptions: ExclusiveDecoratorOptions<Reports> = { lockAtMostFor: 60_000, lockAtLeastFor: 5_000 };

export function register(locks: LockManager): () => void {
  const source: LockManagerSource<Loans> = (self) => self.locks;
  const options: LockDecoratorOptions<Loans> = { manager: source, isolationLevel: 'read committed' };
  const decorator: LockDecorator<[string], Loans> = WithReadLock(byLoan, options);
  const granted: GrantDecoratorOptions<Loans> = { manager: source, grant: true, waitMs: 1_000 };
  console.log(typeof WithWriteLock(byLoan, granted));
  console.log(typeof decorator);
  return registerLockManager(locks);
}
