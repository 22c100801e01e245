// No debt transfer committed on a loan while a repayment of that loan held its write lock, judged
// from the grant log and the business rows alone, on the database clock:
//  - no two grants on a loan overlap in time where one is a writer (the lock itself);
//  - every repayment was written under a write grant on its loan, every transfer under a read grant
//    on its loan, each released by its holder (committed through the fence), and each business row's
//    UTC_TIMESTAMP(6) lies inside its own grant's interval;
//  - no transfer's commit time falls inside any write grant's interval on its loan.
import type { Knex } from 'knex';
import { check, count, type Check } from './check.js';
import { micros, showMicros } from './db-time.js';
import { conflictingPairs, loadGrants, type GrantInterval } from './grants.js';

type Rows<T> = [T[], unknown];

interface BusinessRow {
  kind: 'repayment' | 'transfer';
  id: number;
  loan: string;
  grantId: number;
  at: number;
}

async function loadBusinessRows(db: Knex): Promise<BusinessRow[]> {
  const [reps] = (await db.raw(
    `SELECT id, loan_id, grant_id, ${micros('committed_at')} AS at FROM repayments`,
  )) as Rows<{ id: number; loan_id: string; grant_id: number; at: string | number }>;
  const [xfers] = (await db.raw(
    `SELECT id, loan_id, grant_id, ${micros('committed_at')} AS at FROM transfers`,
  )) as Rows<{ id: number; loan_id: string; grant_id: number; at: string | number }>;
  return [
    ...reps.map((r) => ({
      kind: 'repayment' as const,
      id: r.id,
      loan: r.loan_id,
      grantId: Number(r.grant_id),
      at: Number(r.at),
    })),
    ...xfers.map((r) => ({
      kind: 'transfer' as const,
      id: r.id,
      loan: r.loan_id,
      grantId: Number(r.grant_id),
      at: Number(r.at),
    })),
  ];
}

function describe(g: GrantInterval): string {
  const end = Number.isFinite(g.end) ? showMicros(g.end) : 'live';
  return `${g.mode} grant ${g.id} (${g.owner}) ${showMicros(g.start)}..${end}`;
}

export async function checkNoTransferDuringRepayment(db: Knex): Promise<Check> {
  const grants = await loadGrants(db);
  const rows = await loadBusinessRows(db);
  const byId = new Map(grants.map((g) => [g.id, g]));
  const writersByLoan = new Map<string, GrantInterval[]>();
  for (const g of grants) {
    if (g.mode !== 'W') continue;
    const list = writersByLoan.get(g.resource) ?? [];
    list.push(g);
    writersByLoan.set(g.resource, list);
  }
  const problems: string[] = [];

  const pairs = conflictingPairs(grants);
  for (const [a, b] of pairs) problems.push(`${a.resource}: ${describe(a)} overlaps ${describe(b)}`);

  let misplaced = 0;
  for (const row of rows) {
    const g = byId.get(row.grantId);
    const wanted = row.kind === 'repayment' ? 'W' : 'R';
    const what = `${row.kind} ${row.id} on ${row.loan} (grant ${row.grantId}, at ${showMicros(row.at)})`;
    if (!g) problems.push(`${what}: no such grant in the log`);
    else if (g.resource !== row.loan || g.mode !== wanted)
      problems.push(`${what}: written under ${describe(g)} on ${g.resource}, not a ${wanted} grant on its loan`);
    else if (g.releasedBy !== 1)
      problems.push(
        `${what}: its grant was not released by its holder (released_by=${g.releasedBy}), so it committed without the fence`,
      );
    else if (row.at < g.start || row.at >= g.end) problems.push(`${what}: committed outside its own ${describe(g)}`);
    else continue;
    misplaced += 1;
  }

  let during = 0;
  const transfers = rows.filter((r) => r.kind === 'transfer');
  for (const t of transfers) {
    for (const w of writersByLoan.get(t.loan) ?? []) {
      if (t.at >= w.start && t.at < w.end) {
        during += 1;
        problems.push(
          `transfer ${t.id} on ${t.loan} committed at ${showMicros(t.at)}, while ${describe(w)} held the loan`,
        );
      }
    }
  }
  const writes = grants.filter((g) => g.mode === 'W').length;
  const figures = {
    grants: grants.length,
    writeGrants: writes,
    readGrants: grants.length - writes,
    resources: new Set(grants.map((g) => g.resource)).size,
    overlapsWithWriter: pairs.length,
    repayments: rows.length - transfers.length,
    transfers: transfers.length,
    outsideOwnGrant: misplaced,
    transfersInWriteInterval: during,
  };
  const summary =
    `${count(grants.length)} grants (${count(writes)} W, ${count(figures.readGrants)} R) on ${count(figures.resources)} resources: ` +
    `${count(pairs.length)} overlaps involving a writer; ${count(figures.repayments)} repayments + ${count(transfers.length)} transfers checked: ` +
    `${count(misplaced)} outside their own grant, ${count(during)} transfers inside a write interval`;
  return check('No transfer committed while a repayment held the loan', figures, summary, problems);
}
