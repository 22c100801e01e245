// Inside a job, current(name) gives the job's grant, whatever lockAtLeastFor: in runExclusive's knex form
// its transaction too, and with { grant: true } the grant the work fences its own transaction with. The
// run holds grants of the job's resource only: no list, history or count shows a resource of its own
// for the run, during it or during the hold after it. With lockAtLeastFor the run's commit hands the hold
// over to a successor grant of the same resource and grant time (the negative control, a run whose commit
// frees the job at once, is test/exclusive-jobs.test.ts's run without lockAtLeastFor). The NestJS form
// is in test/nestjs.test.ts.
// covers: src/sql/hand-over.ts, src/lock/scheduled/exclusive.ts, src/lock/manager/operator-calls.ts
import { describe, expect, it } from 'vitest';
import { createLockManager, type Grant } from '../src/index.js';
import { fromKnex } from '../src/adapters/index.js';
import { useTestDatabase } from './support/db.js';
import { invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);

/** The resources with a live grant, as list() and stats() see them. */
async function liveResources(): Promise<string[]> {
  const locks = createLockManager({ knex: db.knex });
  const { grants } = await locks.list({ limit: 100 });
  return [...new Set(grants.map((g) => g.resourceId))].sort();
}

/** Every resource the lock log names: a run's own resource would appear here, live or released. */
async function loggedResources(): Promise<string[]> {
  const [rows] = (await db.knex.raw(
    'SELECT DISTINCT CAST(resource_id AS CHAR) AS r FROM t_read_write_lock ORDER BY r',
  )) as unknown as [Array<{ r: string }>];
  return rows.map((r) => r.r);
}

describe.each([0, 1_000])('current(name) inside runExclusive, lockAtLeastFor %i', (atLeast) => {
  const options = { lockAtMostFor: 60_000, lockAtLeastFor: atLeast };

  it('the knex form: the job’s grant and the work’s transaction', async () => {
    const locks = createLockManager({ knex: db.knex, owner: 'knex-form' });
    const name = `report-knex-${atLeast}`;
    const result = await locks.runExclusive(
      name,
      async (trx, grant) => {
        const held = locks.current(name);
        expect(locks.current()).toEqual(held);
        expect(await liveResources()).toEqual([name]);
        return { same: held?.grant === grant && held.trx === trx, resourceId: held?.grant.resourceId };
      },
      options,
    );
    expect(result).toEqual({ ran: true, value: { same: true, resourceId: name } });
    // During the hold after the run (with lockAtLeastFor), still only the job's resource.
    expect(await liveResources()).toEqual(atLeast > 0 ? [name] : []);
    await locks.close();
    expect(await liveResources()).toEqual([]);
    expect(await loggedResources()).toEqual([name]);
    expect(await invariantViolations(db.knex)).toEqual([]);
    await db.knex.raw('DELETE FROM t_read_write_lock');
  });

  it('{ grant: true }: the grant the work fences its own transaction with', async () => {
    await db.knex.raw('CREATE TABLE IF NOT EXISTS job_report (tag VARCHAR(64) PRIMARY KEY) ENGINE=InnoDB');
    const locks = createLockManager({ knex: db.knex, owner: 'grant-form' });
    const name = `report-grant-${atLeast}`;
    const result = await locks.runExclusive(
      name,
      async (grant: Grant) => {
        const held = locks.current(name);
        expect(held?.trx).toBeUndefined();
        // The docs' pattern: a transaction of the caller's, fenced by current(name)!.grant.
        await db.knex.transaction(async (trx) => {
          await trx.raw('INSERT INTO job_report (tag) VALUES (?)', [name]);
          await locks.current(name)!.grant.fence(fromKnex(trx));
        });
        locks.current(name)!.grant.committed();
        return held?.grant === grant && held.grant.resourceId === name;
      },
      { ...options, grant: true },
    );
    expect(result).toEqual({ ran: true, value: true });
    expect(await db.knex('job_report').where({ tag: name })).toHaveLength(1);
    await locks.close();
    expect(await loggedResources()).toEqual([name]);
    expect(await invariantViolations(db.knex)).toEqual([]);
    await db.knex.raw('DELETE FROM t_read_write_lock');
  });
});

describe('lockAtLeastFor: the hand-over at the run’s commit', () => {
  it('the job stays held, by a successor of the same resource and grant time, until lockAtLeastFor', async () => {
    const a = createLockManager({ knex: db.knex, owner: 'first' });
    const b = createLockManager({ knex: db.knex, owner: 'second' });
    const options = { lockAtMostFor: 60_000, lockAtLeastFor: 2_000 };
    const run = await a.runExclusive('nightly', async (_trx, grant) => grant.id, options);
    expect(run.ran).toBe(true);
    const jobId = run.ran ? run.value : 0;
    // Committed at once, and still held: the next instance is told so.
    expect(await b.runExclusive('nightly', async () => 'again', options)).toEqual({ ran: false, heldBy: 'first' });
    const [successor] = (await a.inspect('nightly')).holders;
    expect(successor).toMatchObject({ owner: 'first', mode: 'write' });
    expect(successor!.id).toBeGreaterThan(jobId);
    await a.close(); // waits for the hold to end
    const { grants } = await b.history('nightly', { limit: 10 });
    const job = grants.find((g) => g.id === jobId)!;
    const held = grants.find((g) => g.id === successor!.id)!;
    expect(job).toMatchObject({ releasedBy: 'holder' });
    expect(held).toMatchObject({ releasedBy: 'holder', createTime: job.createTime });
    // Held from the job's grant to the successor's release: at least lockAtLeastFor, on the database clock.
    expect(held.heldMs).toBeGreaterThanOrEqual(2_000);
    expect(await b.runExclusive('nightly', async () => 'next', options)).toEqual({ ran: true, value: 'next' });
    await b.close();
    expect(await invariantViolations(db.knex)).toEqual([]);
  });
});
