// A NestJS service as a NestJS app compiles it, with experimentalDecorators (.ci/consumer-matrix.sh
// type-checks this directory with its own tsconfig): the legacy calling convention of
// `mysql-rwlock/decorators` (the use files beside index.ts type-check the standard one) and the
// parameter decorator of `mysql-rwlock/nestjs`.
import { Inject, Injectable, Module } from '@nestjs/common';
import type { Knex } from 'knex';
import type { LockManager } from 'mysql-rwlock';
import { WithReadLock, WithWriteLock } from 'mysql-rwlock/decorators';
import { InjectLockManager, LOCK_MANAGER, MysqlRwlockModule } from 'mysql-rwlock/nestjs';

const byLoan = (loanId: string): string => `loan:${loanId}`;

@Injectable()
export class Repayments {
  constructor(
    @InjectLockManager() private readonly locks: LockManager,
    @Inject(LOCK_MANAGER) readonly same: LockManager,
  ) {}

  @WithWriteLock(byLoan, { waitMs: 5_000 })
  async repay(loanId: string, cents: number): Promise<number> {
    const trx: Knex.Transaction | undefined = this.locks.current(byLoan(loanId))?.trx;
    if (trx === undefined) throw new Error('not under the loan lock');
    return trx('loan').where({ id: loanId }).decrement('balance_cents', cents);
  }

  @WithReadLock(byLoan, { manager: (self: Repayments) => self.same })
  async balance(loanId: string): Promise<string | undefined> {
    return this.same.current()?.grant.resourceId ?? loanId;
  }
}

export function appModule(db: Knex): unknown {
  @Module({ imports: [MysqlRwlockModule.forRoot({ knex: db, migrate: true })], providers: [Repayments] })
  class AppModule {}
  return AppModule;
}
