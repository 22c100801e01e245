// Money is conserved to the cent. The only money entering the book is what borrowers repay, and
// it all goes to investors; transfers only move money between investors. So:
//   sum(initial balances) + sum(repayments) = sum(final balances),
//   each repayment's amount = the sum of its payments,
//   and per investor: final = initial + payments received + sale proceeds - purchase prices.
// Claims: principal - principal repaid = outstanding, per claim, never negative.
import type { Knex } from 'knex';
import { big, cents, check, count, money, type Check } from './check.js';

type Rows<T> = [T[], unknown];

export async function checkMoneyConserved(db: Knex): Promise<Check> {
  const [[b]] = (await db.raw(
    'SELECT SUM(initial_balance_cents) AS initial, SUM(balance_cents) AS final FROM investors',
  )) as Rows<Record<string, unknown>>;
  const [[r]] = (await db.raw('SELECT COUNT(*) AS n, SUM(amount_cents) AS paid_in FROM repayments')) as Rows<
    Record<string, unknown>
  >;
  const [[p]] = (await db.raw('SELECT SUM(principal_cents + interest_cents) AS paid_out FROM payments')) as Rows<
    Record<string, unknown>
  >;
  const [[t]] = (await db.raw('SELECT COUNT(*) AS n, SUM(price_cents) AS traded FROM transfers')) as Rows<
    Record<string, unknown>
  >;
  const initial = big(b?.initial);
  const final = big(b?.final);
  const paidIn = big(r?.paid_in);
  const paidOut = big(p?.paid_out);
  const [badRepayments] = (await db.raw(
    `SELECT r.id, r.amount_cents, COALESCE(SUM(p.principal_cents + p.interest_cents), 0) AS paid
       FROM repayments r LEFT JOIN payments p ON p.repayment_id = r.id
      GROUP BY r.id, r.amount_cents HAVING r.amount_cents <> paid`,
  )) as Rows<{ id: number; amount_cents: number; paid: string }>;
  const [badLedgers] = (await db.raw(
    `SELECT * FROM (
       SELECT i.id, i.balance_cents,
              i.initial_balance_cents + COALESCE(p.cents, 0) + COALESCE(s.cents, 0) - COALESCE(bt.cents, 0) AS expected
         FROM investors i
         LEFT JOIN (SELECT investor_id, SUM(principal_cents + interest_cents) AS cents FROM payments GROUP BY investor_id) p ON p.investor_id = i.id
         LEFT JOIN (SELECT seller_id, SUM(price_cents) AS cents FROM transfers GROUP BY seller_id) s ON s.seller_id = i.id
         LEFT JOIN (SELECT buyer_id, SUM(price_cents) AS cents FROM transfers GROUP BY buyer_id) bt ON bt.buyer_id = i.id
     ) x WHERE balance_cents <> expected ORDER BY id`,
  )) as Rows<{ id: number; balance_cents: number; expected: string }>;
  const problems = [
    ...(initial + paidIn !== final
      ? [
          `initial ${money(initial)} + repaid ${money(paidIn)} = ${money(initial + paidIn)}, but balances sum to ${money(final)} (off by ${money(final - initial - paidIn)})`,
        ]
      : []),
    ...(paidIn !== paidOut ? [`repayments took in ${money(paidIn)} but payments paid out ${money(paidOut)}`] : []),
    ...badRepayments.map(
      (x) => `repayment ${x.id}: amount ${money(big(x.amount_cents))} but its payments sum to ${money(big(x.paid))}`,
    ),
    ...badLedgers.map(
      (x) => `investor ${x.id}: balance ${money(big(x.balance_cents))} but the ledger says ${money(big(x.expected))}`,
    ),
  ];
  const figures = {
    initialCents: cents(initial),
    repaidCents: cents(paidIn),
    repayments: Number(r?.n ?? 0),
    finalCents: cents(final),
    transfers: Number(t?.n ?? 0),
    tradedCents: cents(big(t?.traded)),
    repaymentsOff: badRepayments.length,
    ledgersOff: badLedgers.length,
  };
  const summary =
    `initial ${money(initial)} + repaid ${money(paidIn)} (${count(figures.repayments)} repayments) = ${money(initial + paidIn)}; ` +
    `final balances ${money(final)}; ${count(figures.transfers)} transfers moved ${money(big(t?.traded))} between investors; ` +
    `${count(badRepayments.length)} repayments ≠ their payments, ${count(badLedgers.length)} investor ledgers off`;
  return check('Money conserved to the cent', figures, summary, problems);
}

export async function checkOutstanding(db: Knex): Promise<Check> {
  const [[c]] = (await db.raw(
    'SELECT SUM(principal_cents) AS principal, SUM(outstanding_cents) AS outstanding FROM claims',
  )) as Rows<Record<string, unknown>>;
  const [[p]] = (await db.raw('SELECT SUM(principal_cents) AS repaid FROM payments')) as Rows<Record<string, unknown>>;
  const [bad] = (await db.raw(
    `SELECT c.id, c.principal_cents, c.outstanding_cents, COALESCE(p.cents, 0) AS repaid
       FROM claims c LEFT JOIN (SELECT claim_id, SUM(principal_cents) AS cents FROM payments GROUP BY claim_id) p ON p.claim_id = c.id
      WHERE c.outstanding_cents <> c.principal_cents - COALESCE(p.cents, 0) OR c.outstanding_cents < 0`,
  )) as Rows<{ id: number; principal_cents: number; outstanding_cents: number; repaid: string }>;
  const principal = big(c?.principal);
  const outstanding = big(c?.outstanding);
  const repaid = big(p?.repaid);
  const problems = [
    ...(principal - repaid !== outstanding
      ? [`principal ${money(principal)} - repaid ${money(repaid)} ≠ outstanding ${money(outstanding)}`]
      : []),
    ...bad.map(
      (x) =>
        `claim ${x.id}: principal ${money(big(x.principal_cents))} - repaid ${money(big(x.repaid))} ≠ outstanding ${money(big(x.outstanding_cents))}`,
    ),
  ];
  const figures = {
    principalCents: cents(principal),
    principalRepaidCents: cents(repaid),
    outstandingCents: cents(outstanding),
    claimsOff: bad.length,
  };
  const summary = `principal ${money(principal)} - principal repaid ${money(repaid)} = ${money(principal - repaid)}; outstanding ${money(outstanding)}; ${count(bad.length)} claims off`;
  return check('Outstanding principal reconciles', figures, summary, problems);
}
