import { Inject, Injectable } from '@nestjs/common';
import type { LockManager } from 'mysql-rwlock';
import { WithReadLock } from 'mysql-rwlock/decorators';
import { InjectLockManager } from 'mysql-rwlock/nestjs';
import { AuditLog } from './audit.js';

/**
 * Transfers of a loan's claim to another investor, at the loan's balance: under the loan's read
 * lock, so that no repayment changes the balance during a transfer, while transfers run together.
 */
@Injectable()
export class TransferService {
  constructor(
    @InjectLockManager() private readonly locks: LockManager,
    @Inject(AuditLog) private readonly audit: AuditLog,
  ) {}

  /** The balance the claim was transferred at. */
  @WithReadLock((loanId: string) => `loan:${loanId}`, { waitMs: 30_000 })
  async transferClaim(loanId: string, investor: string): Promise<number> {
    const trx = this.locks.current(`loan:${loanId}`)!.trx!;
    await this.audit.record(trx, 'transfer', loanId);
    const row = (await trx('loan').where({ id: loanId }).first('balance_cents')) as { balance_cents: number };
    await trx('claim_transfer').insert({ loan_id: loanId, investor, balance_cents: row.balance_cents });
    return Number(row.balance_cents);
  }
}
