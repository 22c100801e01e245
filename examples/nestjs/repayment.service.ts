import { Inject, Injectable } from '@nestjs/common';
import type { LockManager } from 'mysql-rwlock';
import { WithWriteLock } from 'mysql-rwlock/decorators';
import { InjectLockManager } from 'mysql-rwlock/nestjs';
import { AuditLog } from './audit.js';

/** Repayments change a loan's balance: under the loan's write lock. */
@Injectable()
export class RepaymentService {
  // Explicit tokens: injection needs no emitted decorator metadata.
  constructor(
    @InjectLockManager() private readonly locks: LockManager,
    @Inject(AuditLog) private readonly audit: AuditLog,
  ) {}

  /** The new balance. Runs inside withWriteLock('loan:<id>'): commits only while the lock is held. */
  @WithWriteLock((loanId: string) => `loan:${loanId}`, { waitMs: 30_000 })
  async repay(loanId: string, cents: number): Promise<number> {
    const trx = this.locks.current()!.trx!;
    await this.audit.record(trx, 'repay', loanId);
    await trx('loan').where({ id: loanId }).decrement('balance_cents', cents);
    const row = (await trx('loan').where({ id: loanId }).first('balance_cents')) as { balance_cents: number };
    return Number(row.balance_cents);
  }
}
