// One worker process's lending load: `concurrency` loops, each picking a random loan and doing a
// repayment (write lock) or a debt transfer (read lock) on it until told to stop.
import type { Knex } from 'knex';
import { setTimeout as sleep } from 'node:timers/promises';
import { LockLostError, LockTimeoutError, type LockManager } from '../../src/index.js';
import { WAITED_MS, type FaultKind, type FromWorker, type OpCounts } from '../messages.js';
import { randomInt, type Random } from '../random.js';
import { loanId } from './seed.js';
import { repay, transfer, type OpResult } from './operations.js';

/** Share of operations that are repayments; the rest are debt transfers. */
const REPAYMENT_SHARE = 0.25;
const REPAY_WAIT_MS = 3000;
const TRANSFER_WAIT_MS = 2000;
/**
 * The loan's lock, not a snapshot, is what isolates its work; investor rows are shared by every
 * loan and changed by transfers all the time. At REPEATABLE READ, MariaDB 11.6+ refuses a locking
 * read of a row changed after the transaction's snapshot (1020), so a repayment that reads, waits
 * for the bank, then locks its investors would be rolled back again and again.
 */
const ISOLATION = 'read committed';
/** An armed bank call waits this long at most for the supervisor's answer. */
const ARMED_BANK_CALL_MS = 15_000;

export interface LendingContext {
  db: Knex;
  locks: LockManager;
  name: string;
  loans: number;
  investors: number;
  rnd: Random;
  counts: OpCounts;
  send: (msg: FromWorker) => void;
  stopping: () => boolean;
  /** Takes the armed fault, if any: only one repayment stops for it. */
  takeArmed: () => FaultKind | null;
  /** Resolves when the supervisor lets the armed bank call answer. */
  bankAnswer: () => Promise<void>;
}

export async function runLendingLoops(ctx: LendingContext, concurrency: number): Promise<void> {
  const [rows] = (await ctx.db.raw('SELECT id, loan_id FROM claims')) as [
    Array<{ id: number; loan_id: string }>,
    unknown,
  ];
  const claimsByLoan = new Map<string, number[]>();
  for (const r of rows) claimsByLoan.set(r.loan_id, [...(claimsByLoan.get(r.loan_id) ?? []), r.id]);
  const loop = async (): Promise<void> => {
    while (!ctx.stopping()) await oneOperation(ctx, claimsByLoan);
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
}

async function oneOperation(ctx: LendingContext, claimsByLoan: Map<string, number[]>): Promise<void> {
  const loan = loanId(randomInt(ctx.rnd, 0, ctx.loans - 1));
  const isRepayment = ctx.rnd() < REPAYMENT_SHARE;
  const asked = performance.now();
  let waited = false;
  const granted = (): void => {
    waited ||= performance.now() - asked > WAITED_MS;
  };
  try {
    let result: OpResult;
    if (isRepayment) {
      result = await ctx.locks.withWriteLock(
        loan,
        (trx, grant) => {
          granted();
          return repay(trx, grant, loan, ctx.name, () => bankCall(ctx, grant.id, loan));
        },
        { waitMs: REPAY_WAIT_MS, isolationLevel: ISOLATION },
      );
    } else {
      const claims = claimsByLoan.get(loan) ?? [];
      const claimId = claims[randomInt(ctx.rnd, 0, claims.length - 1)];
      if (claimId === undefined) return;
      const buyer = randomInt(ctx.rnd, 1, ctx.investors);
      const discount = randomInt(ctx.rnd, 0, 5);
      result = await ctx.locks.withReadLock(
        loan,
        (trx, grant) => {
          granted();
          return transfer(trx, grant, claimId, buyer, discount, ctx.name);
        },
        { waitMs: TRANSFER_WAIT_MS, isolationLevel: ISOLATION },
      );
    }
    if (result.outcome === 'done') ctx.counts[isRepayment ? 'repayments' : 'transfers'] += 1;
    else if (result.outcome === 'declined') ctx.counts.declined += 1;
    else ctx.counts.noops += 1;
  } catch (err) {
    if (err instanceof LockTimeoutError) {
      waited = true;
      ctx.counts.timeouts += 1;
    } else if (err instanceof LockLostError) {
      ctx.counts.lost += 1;
      ctx.send({ type: 'lost', grantId: err.grantId, what: isRepayment ? 'repayment' : 'transfer' });
    } else {
      ctx.counts.errors += 1;
      ctx.send({
        type: 'error',
        message: `${isRepayment ? 'repayment' : 'transfer'} on ${loan}: ${(err as Error).message}`,
      });
    }
  } finally {
    if (waited) ctx.counts.waited += 1;
  }
}

/** The bank call of a repayment: 50-200 ms, or, when a fault is armed, until the supervisor answers. */
async function bankCall(ctx: LendingContext, grantId: number, loan: string): Promise<void> {
  const fault = ctx.takeArmed();
  if (!fault) {
    await sleep(randomInt(ctx.rnd, 50, 200));
    return;
  }
  const answered = ctx.bankAnswer();
  ctx.send({ type: 'fault-point', fault, grantId, loanId: loan });
  await Promise.race([answered, sleep(ARMED_BANK_CALL_MS)]);
}
