// The fence: a grant the reaper took back must leave no business behind. For every reaped grant,
// no repayment, payment or transfer row carries its id; for each injected fault, the grant the
// supervisor saw inside the bank call was reaped (released_by = 2) and left no rows, and the paused
// worker's late commit was refused (it reported LockLostError for that grant).
import type { Knex } from 'knex';
import { check, count, type Check } from './check.js';

type Rows<T> = [T[], unknown];

interface FaultRow {
  kind: string;
  worker: string;
  grant_id: number | null;
  loan_id: string | null;
  outcome: string;
}

/** What each kind of fault must have ended as, in demo_faults.outcome. */
export const EXPECTED_OUTCOME: Readonly<Record<string, string>> = Object.freeze({ kill: 'reaped', pause: 'lock-lost' });

export async function checkReapedWorkDidNotCommit(db: Knex): Promise<Check> {
  const [[reaped]] = (await db.raw('SELECT COUNT(*) AS n FROM t_lock_log WHERE released_by = 2')) as Rows<{
    n: number;
  }>;
  const [leaks] = (await db.raw(
    `SELECT g.id, g.owner, x.what, x.n FROM t_lock_log g JOIN (
        SELECT grant_id, 'repayment' AS what, COUNT(*) AS n FROM repayments GROUP BY grant_id
        UNION ALL SELECT grant_id, 'payment', COUNT(*) FROM payments GROUP BY grant_id
        UNION ALL SELECT grant_id, 'transfer', COUNT(*) FROM transfers GROUP BY grant_id
     ) x ON x.grant_id = g.id
     WHERE g.released_by = 2 ORDER BY g.id`,
  )) as Rows<{ id: number; owner: string; what: string; n: number }>;
  const [faults] = (await db.raw(
    `SELECT f.kind, f.worker, f.grant_id, f.loan_id, f.outcome, g.released_by, g.status
       FROM demo_faults f LEFT JOIN t_lock_log g ON g.id = f.grant_id ORDER BY f.id`,
  )) as Rows<FaultRow & { released_by: number | null; status: number | null }>;
  const problems = leaks.map(
    (l) => `reaped grant ${l.id} (${l.owner}) carries ${l.n} ${l.what} row(s): its business committed after the reap`,
  );
  const described: string[] = [];
  for (const f of faults) {
    const expected = EXPECTED_OUTCOME[f.kind];
    const who = `${f.kind} of ${f.worker}${f.grant_id ? ` in repayment grant ${f.grant_id} on ${f.loan_id}` : ''}`;
    if (f.grant_id === null) problems.push(`${who}: did not land (${f.outcome})`);
    else if (f.released_by !== 2)
      problems.push(
        `${who}: grant was released_by=${f.released_by ?? 'nobody'} (status ${f.status ?? '?'}), not by the reaper`,
      );
    else if (f.outcome !== expected) problems.push(`${who}: outcome ${f.outcome}, expected ${expected}`);
    const rows = leaks.filter((l) => l.id === f.grant_id).reduce((s, l) => s + Number(l.n), 0);
    described.push(`${who}: released_by=${f.released_by ?? '-'}, ${f.outcome}, ${rows} business rows`);
  }
  const figures = {
    reaped: Number(reaped?.n ?? 0),
    reapedWithBusinessRows: new Set(leaks.map((l) => l.id)).size,
    faults: faults.length,
    faultsAsExpected: faults.filter(
      (f) => f.grant_id !== null && f.released_by === 2 && f.outcome === EXPECTED_OUTCOME[f.kind],
    ).length,
  };
  const summary =
    `${count(figures.reaped)} grants reaped, ${count(figures.reapedWithBusinessRows)} of them with business rows` +
    (described.length > 0 ? `; ${described.join('; ')}` : '; no faults were injected');
  return check('Reaped grants left no business behind (fencing)', figures, summary, problems);
}
