// The two kinds of work on a loan. Both run inside the transaction withWriteLock/withReadLock
// commits with; the grant id and UTC_TIMESTAMP(6) go on every business row for the verifier.
import type { Knex } from 'knex';
import type { Grant } from '../../src/index.js';

type Rows<T> = [T[], unknown];

export type OpResult = { outcome: 'done' } | { outcome: 'declined' | 'noop'; reason: string };

interface ClaimRow {
  id: number;
  investor_id: number;
  principal_cents: number;
  outstanding_cents: number;
}

/**
 * Repayment (under the loan's write lock): the borrower pays one installment, split over every
 * claim on the loan and paid to each claim's current owner. `bankCall` is the slow external step.
 * Claims are read without FOR UPDATE on purpose: the write lock is what keeps transfers out.
 */
export async function repay(
  trx: Knex.Transaction,
  grant: Grant,
  loanId: string,
  worker: string,
  bankCall: () => Promise<void>,
): Promise<OpResult> {
  const [[loan]] = (await trx.raw('SELECT monthly_rate_bp, installments FROM loans WHERE id = ?', [loanId])) as Rows<{
    monthly_rate_bp: number;
    installments: number;
  }>;
  if (!loan) throw new Error(`no loan ${loanId}`);
  const [claims] = (await trx.raw(
    'SELECT id, investor_id, principal_cents, outstanding_cents FROM claims WHERE loan_id = ? AND outstanding_cents > 0 ORDER BY id',
    [loanId],
  )) as Rows<ClaimRow>;
  if (claims.length === 0) return { outcome: 'noop', reason: 'loan fully repaid' };
  const shares = claims.map((c) => {
    const principal = Math.min(c.outstanding_cents, Math.ceil(c.principal_cents / loan.installments));
    const interest = Math.floor((c.outstanding_cents * loan.monthly_rate_bp) / 10_000);
    return { claim: c, principal, interest };
  });
  const amount = shares.reduce((s, x) => s + x.principal + x.interest, 0);

  await bankCall(); // the borrower's money arrives from the bank: slow, and where faults strike

  const [ins] = (await trx.raw(
    'INSERT INTO repayments (loan_id, grant_id, worker, amount_cents, committed_at) VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6))',
    [loanId, grant.id, worker, amount],
  )) as [{ insertId: number }, unknown];
  const repaymentId = ins.insertId;
  await trx.raw(
    `INSERT INTO payments (repayment_id, grant_id, claim_id, investor_id, principal_cents, interest_cents, committed_at)
     VALUES ${shares.map(() => '(?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6))').join(', ')}`,
    shares.flatMap((s) => [repaymentId, grant.id, s.claim.id, s.claim.investor_id, s.principal, s.interest]),
  );
  await trx.raw(
    `UPDATE claims c JOIN payments p ON p.claim_id = c.id AND p.repayment_id = ?
        SET c.outstanding_cents = c.outstanding_cents - p.principal_cents`,
    [repaymentId],
  );
  // Investors hold claims on many loans, so concurrent repayments credit overlapping rows:
  // lock them in id order first so two repayments wait for each other instead of deadlocking.
  const investorIds = [...new Set(claims.map((c) => c.investor_id))];
  await trx.raw('SELECT id FROM investors WHERE id IN (?) ORDER BY id FOR UPDATE', [investorIds]);
  await trx.raw(
    `UPDATE investors i JOIN (
        SELECT investor_id, SUM(principal_cents + interest_cents) AS cents FROM payments WHERE repayment_id = ? GROUP BY investor_id
     ) x ON x.investor_id = i.id
        SET i.balance_cents = i.balance_cents + x.cents`,
    [repaymentId],
  );
  return { outcome: 'done' };
}

/**
 * Debt transfer (under the loan's read lock, so many run at once): the buyer buys one claim from
 * whoever owns it now, at `discountPct` below its outstanding principal. The read lock only keeps
 * repayments out; two transfers of the same claim are serialised by FOR UPDATE on the claim row,
 * and the second one sees the new owner as its seller.
 */
export async function transfer(
  trx: Knex.Transaction,
  grant: Grant,
  claimId: number,
  buyerId: number,
  discountPct: number,
  worker: string,
): Promise<OpResult> {
  const [[claim]] = (await trx.raw(
    'SELECT loan_id, investor_id, outstanding_cents FROM claims WHERE id = ? FOR UPDATE',
    [claimId],
  )) as Rows<{ loan_id: string; investor_id: number; outstanding_cents: number }>;
  if (!claim) throw new Error(`no claim ${claimId}`);
  if (claim.loan_id !== grant.resourceId)
    throw new Error(`claim ${claimId} is on ${claim.loan_id}, not ${grant.resourceId}`);
  const sellerId = claim.investor_id;
  if (sellerId === buyerId) return { outcome: 'declined', reason: 'buyer already owns the claim' };
  if (claim.outstanding_cents === 0) return { outcome: 'declined', reason: 'claim fully repaid' };
  const price = Math.floor((claim.outstanding_cents * (100 - discountPct)) / 100);
  const [balances] = (await trx.raw(
    'SELECT id, balance_cents FROM investors WHERE id IN (?, ?) ORDER BY id FOR UPDATE',
    [sellerId, buyerId],
  )) as Rows<{ id: number; balance_cents: number }>;
  const buyer = balances.find((b) => b.id === buyerId);
  if (!buyer || buyer.balance_cents < price) return { outcome: 'declined', reason: 'buyer cannot pay' };
  await trx.raw('UPDATE investors SET balance_cents = balance_cents - ? WHERE id = ?', [price, buyerId]);
  await trx.raw('UPDATE investors SET balance_cents = balance_cents + ? WHERE id = ?', [price, sellerId]);
  const [moved] = (await trx.raw('UPDATE claims SET investor_id = ? WHERE id = ? AND investor_id = ?', [
    buyerId,
    claimId,
    sellerId,
  ])) as [{ affectedRows: number }, unknown];
  if (moved.affectedRows !== 1) throw new Error(`claim ${claimId} changed owner under FOR UPDATE`);
  await trx.raw(
    `INSERT INTO transfers (claim_id, loan_id, seller_id, buyer_id, price_cents, grant_id, worker, committed_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6))`,
    [claimId, claim.loan_id, sellerId, buyerId, price, grant.id, worker],
  );
  return { outcome: 'done' };
}
