// The lending verdict, from the database after the run and nothing else.
import type { Knex } from 'knex';
import { verdictOf, type Verdict } from './check.js';
import { checkClaimChains } from './lending-claims.js';
import { checkNoTransferDuringRepayment } from './lending-exclusion.js';
import { checkReapedWorkDidNotCommit } from './lending-fencing.js';
import { checkMoneyConserved, checkOutstanding } from './lending-money.js';
import { checkLocksClean } from './locks-clean.js';

export async function verifyLending(db: Knex): Promise<Verdict> {
  return verdictOf([
    await checkMoneyConserved(db),
    await checkOutstanding(db),
    await checkClaimChains(db),
    await checkNoTransferDuringRepayment(db),
    await checkReapedWorkDidNotCommit(db),
    await checkLocksClean(db),
  ]);
}
