import { Injectable } from '@nestjs/common';
import type { Knex } from 'knex';

/** Records each service call on a loan, in the call's transaction. */
@Injectable()
export class AuditLog {
  async record(trx: Knex.Transaction, event: 'repay' | 'transfer', loanId: string): Promise<void> {
    await trx('loan_audit').insert({ loan_id: loanId, event });
  }
}
