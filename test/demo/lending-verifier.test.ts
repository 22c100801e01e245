// The lending verifier against a real database: a clean history PASSes, and each check FAILs on a
// history broken in exactly the way it exists to catch (negative controls).
// covers: demo/verify/lending-verifier.ts
import { randomBytes } from 'node:crypto';
import { beforeEach, describe, expect, it } from 'vitest';
import { createLockManager } from '../../src/index.js';
import { verifyLending } from '../../demo/verify/lending-verifier.js';
import { useTestDatabase } from '../support/db.js';
import { buildFixture, CHAINED_CLAIM, failing, UNTOUCHED_CLAIM, type Fixture } from './lending-fixture.js';

const db = useTestDatabase(import.meta.filename);

const MONEY = 'Money conserved to the cent';
const OUTSTANDING = 'Outstanding principal reconciles';
const CLAIMS = 'Every claim has one owner, none sold twice';
const EXCLUSION = 'No transfer committed while a repayment held the loan';
const FENCING = 'Reaped grants left no business behind (fencing)';
const LOCKS = 'All grants released, lock counts match the log';

describe('lending verifier', () => {
  let fx: Fixture;
  beforeEach(async () => {
    fx = await buildFixture(db.knex);
  });

  it('passes a clean history, reaped paused repayment included', async () => {
    const verdict = await verifyLending(db.knex);
    expect(failing(verdict)).toEqual([]);
    expect(verdict.pass).toBe(true);
    expect(verdict.checks.map((c) => c.name)).toEqual([MONEY, OUTSTANDING, CLAIMS, EXCLUSION, FENCING, LOCKS]);
    const fencing = verdict.checks.find((c) => c.name === FENCING)!;
    expect(fencing.summary).toContain(`grant ${fx.pausedGrantId}`);
    expect(fencing.summary).toContain('released_by=2');
    expect(fencing.figures).toMatchObject({ reapedWithBusinessRows: 0, faultsAsExpected: fencing.figures.faults });
    for (const c of verdict.checks) expect(Object.values(c.figures).every(Number.isFinite), c.name).toBe(true);
    expect(verdict.checks.find((c) => c.name === LOCKS)!.figures).toMatchObject({ live: 0, countLogMismatches: 0 });
  });

  it('fails money conservation when a cent is created', async () => {
    await db.knex.raw('UPDATE investors SET balance_cents = balance_cents + 1 WHERE id = 3');
    const verdict = await verifyLending(db.knex);
    expect(failing(verdict)).toEqual([MONEY]);
    expect(verdict.checks[0]!.problems.join('\n')).toMatch(/off by 0\.01/);
  });

  it('fails outstanding principal when a claim is written down without a payment', async () => {
    await db.knex.raw('UPDATE claims SET outstanding_cents = outstanding_cents - 100 WHERE id = ?', [UNTOUCHED_CLAIM]);
    expect(failing(await verifyLending(db.knex))).toEqual([OUTSTANDING]);
  });

  it('fails the claim chain when a seller sells the same claim twice', async () => {
    // A second sale by the original owner inside the first sale's own grant, money moved too,
    // so only the chain is wrong.
    const [a, , c] = fx.owners;
    const [[first]] = (await db.knex.raw('SELECT * FROM transfers WHERE claim_id = ? ORDER BY id LIMIT 1', [
      CHAINED_CLAIM,
    ])) as [Array<{ price_cents: number; [column: string]: unknown }>, unknown];
    const other = c === 1 ? 2 : 1;
    await db.knex('transfers').insert({ ...first, id: undefined, buyer_id: other });
    await db.knex.raw('UPDATE investors SET balance_cents = balance_cents - ? WHERE id = ?', [
      first!.price_cents,
      other,
    ]);
    await db.knex.raw('UPDATE investors SET balance_cents = balance_cents + ? WHERE id = ?', [first!.price_cents, a]);
    const verdict = await verifyLending(db.knex);
    expect(failing(verdict)).toEqual([CLAIMS]);
    expect(verdict.checks.find((x) => x.name === CLAIMS)!.problems.join('\n')).toMatch(/sold twice/);
  });

  it('fails exclusion when a transfer committed inside a repayment write interval', async () => {
    // A read grant and a (money-neutral) transfer placed in the middle of the first repayment's write grant.
    const [[w]] = (await db.knex.raw(
      `SELECT g.id, g.create_time, g.released_at FROM t_lock_log g JOIN repayments r ON r.grant_id = g.id
        WHERE g.resource_id = 'loan-0001' ORDER BY g.id LIMIT 1`,
    )) as [Array<{ id: number }>, unknown];
    const [ins] = (await db.knex.raw(
      `INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token, released_at, released_by)
       SELECT resource_id, 1, 2, create_time + INTERVAL 1 MICROSECOND, 2, 'intruder', ?, released_at - INTERVAL 1 MICROSECOND, 1
         FROM t_lock_log WHERE id = ?`,
      [randomBytes(16), w!.id],
    )) as [{ insertId: number }, unknown];
    const [[owner]] = (await db.knex.raw('SELECT investor_id FROM claims WHERE id = ?', [UNTOUCHED_CLAIM])) as [
      Array<{ investor_id: number }>,
      unknown,
    ];
    await db.knex.raw(
      `INSERT INTO transfers (claim_id, loan_id, seller_id, buyer_id, price_cents, grant_id, worker, committed_at)
       SELECT ?, 'loan-0001', ?, ?, 0, ?, 'intruder', create_time + INTERVAL 2 MICROSECOND FROM t_lock_log WHERE id = ?`,
      [UNTOUCHED_CLAIM, owner!.investor_id, owner!.investor_id, ins.insertId, w!.id],
    );
    const verdict = await verifyLending(db.knex);
    expect(failing(verdict)).toEqual([EXCLUSION]);
    const problems = verdict.checks.find((x) => x.name === EXCLUSION)!.problems.join('\n');
    expect(problems).toMatch(/overlaps/);
    expect(problems).toMatch(new RegExp(`while W grant ${w!.id}`));
  });

  it('fails fencing when the reaped grant has a committed payment', async () => {
    await db.knex.raw(
      `INSERT INTO payments (repayment_id, grant_id, claim_id, investor_id, principal_cents, interest_cents, committed_at)
       SELECT 0, ?, id, investor_id, 0, 0, UTC_TIMESTAMP(6) FROM claims WHERE id = 4`,
      [fx.pausedGrantId],
    );
    const verdict = await verifyLending(db.knex);
    expect(failing(verdict)).toContain(FENCING);
    expect(verdict.checks.find((x) => x.name === FENCING)!.problems.join('\n')).toMatch(
      new RegExp(`reaped grant ${fx.pausedGrantId} .* 1 payment`),
    );
  });

  it('fails fencing when the paused worker never reported its late commit refused', async () => {
    await db.knex.raw("UPDATE demo_faults SET outcome = 'no-lock-lost' WHERE grant_id = ?", [fx.pausedGrantId]);
    expect(failing(await verifyLending(db.knex))).toEqual([FENCING]);
  });

  it('fails lock cleanliness on a leftover live grant', async () => {
    const locks = createLockManager({ knex: db.knex, owner: 'forgetful' });
    const g = await locks.tryAcquireRead('loan-0003');
    expect(g).not.toBeNull();
    const verdict = await verifyLending(db.knex);
    expect(failing(verdict)).toEqual([LOCKS]);
    expect(verdict.checks.find((x) => x.name === LOCKS)!.problems.join('\n')).toMatch(
      new RegExp(`grant ${g!.id} .*still live`),
    );
  });

  it('fails lock cleanliness when a count disagrees with the log', async () => {
    await db.knex.raw("UPDATE t_read_write_lock SET r_count = 1 WHERE resource_id = 'loan-0002'");
    const verdict = await verifyLending(db.knex);
    expect(failing(verdict)).toEqual([LOCKS]);
    expect(verdict.checks.find((x) => x.name === LOCKS)!.problems.join('\n')).toMatch(
      /loan-0002: w_count=0 r_count=1 but the log has 0 W \/ 0 R live/,
    );
  });
});
