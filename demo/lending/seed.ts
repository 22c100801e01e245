// Seeds a realistic, reproducible lending book: every loan is funded by many claims, each claim
// held by one investor, every investor has a cash balance. Sizes come from the flags.
import type { Knex } from 'knex';
import { randomInt, type Random } from '../random.js';

export interface BookSize {
  loans: number;
  investors: number;
  claims: number;
}

export interface SeededBook extends BookSize {
  balanceCents: bigint;
  principalCents: bigint;
}

export function loanId(index: number): string {
  return `loan-${String(index + 1).padStart(4, '0')}`;
}

async function insertInBatches(db: Knex, table: string, rows: Record<string, unknown>[]): Promise<void> {
  for (let i = 0; i < rows.length; i += 1000) await db(table).insert(rows.slice(i, i + 1000));
}

export async function seedBook(db: Knex, size: BookSize, rnd: Random): Promise<SeededBook> {
  const investors = Array.from({ length: size.investors }, (_, i) => {
    const cents = randomInt(rnd, 1_000_00, 20_000_00); // 1,000.00 .. 20,000.00
    return { id: i + 1, name: `investor-${i + 1}`, initial_balance_cents: cents, balance_cents: cents };
  });
  // Claim i funds loan i mod loans, so every loan has claims; the owner is random.
  const claims = Array.from({ length: size.claims }, (_, i) => {
    const cents = randomInt(rnd, 50_00, 2_000_00);
    const owner = randomInt(rnd, 1, size.investors);
    return {
      id: i + 1,
      loan_id: loanId(i % size.loans),
      original_investor_id: owner,
      investor_id: owner,
      principal_cents: cents,
      outstanding_cents: cents,
    };
  });
  const principal = new Map<string, number>();
  for (const c of claims) principal.set(c.loan_id, (principal.get(c.loan_id) ?? 0) + c.principal_cents);
  const loans = Array.from({ length: size.loans }, (_, i) => ({
    id: loanId(i),
    borrower: `borrower-${i + 1}`,
    principal_cents: principal.get(loanId(i)) ?? 0,
    monthly_rate_bp: randomInt(rnd, 50, 150), // 0.5% .. 1.5% a month
    installments: randomInt(rnd, 3, 8) * 12,
  }));
  await insertInBatches(db, 'investors', investors);
  await insertInBatches(db, 'loans', loans);
  await insertInBatches(db, 'claims', claims);
  return {
    ...size,
    balanceCents: investors.reduce((s, r) => s + BigInt(r.balance_cents), 0n),
    principalCents: claims.reduce((s, r) => s + BigInt(r.principal_cents), 0n),
  };
}
