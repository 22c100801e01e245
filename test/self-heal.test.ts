// Locks that heal on their own: an acquire refused because its resource is held by a stale grant (the
// reaper's test on the database clock: older than the cutoff, no lease running) releases it as the
// reaper would (guarded, versioned, recorded as `reaper` with a note naming the healer) and is
// granted in the same call, with no reaper running: try and waiting, write and read, single and
// groups; the lane runs it with and without stored procedures. Controls: `selfHeal: false` leaves
// the crashed holder's grant in place; a heal that judges by age alone (ignoring the lease) takes a
// live, leased holder's grant, which the real heal never does.
// covers: src/lock/durable/heal-stale.ts, src/sql/heal.ts, src/sql/reap.ts
import { afterEach, describe, expect, it } from 'vitest';
import {
  createLockManager,
  DEFAULTS,
  LockTimeoutError,
  PermitLimitError,
  ResourceKindError,
  type Grant,
} from '../src/index.js';
import { HEAL_REASON } from '../src/lock/durable/heal-stale.js';
import { testSwitches } from '../src/test-switches.js';
import { useTestDatabase } from './support/db.js';
import { backdate, grantRow, invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);
/** The cutoff of these tests' managers; a crashed holder's grant is backdated past it. */
const CUTOFF_MS = 60_000;
const PAST_CUTOFF_MS = 11 * 60_000;

afterEach(() => {
  testSwitches.heal.ageOnly = false;
  testSwitches.heal.rememberToCutoff = false;
});

/** A holder that crashed holding `mode` on `resource`: its grant is never released, and older than the cutoff. */
async function crashedHolder(resource: string, mode: 'write' | 'read'): Promise<Grant> {
  const dead = createLockManager({ knex: db.knex, owner: `dead-${resource}` });
  const grant = mode === 'write' ? await dead.tryAcquireWrite(resource) : await dead.tryAcquireRead(resource);
  expect(grant).not.toBeNull();
  await backdate(db.knex, grant!.id, PAST_CUTOFF_MS);
  return grant!;
}

function healer(owner: string, options: { selfHeal?: boolean } = {}) {
  return createLockManager({ knex: db.knex, owner, staleAfterMs: CUTOFF_MS, ...options });
}

/** The crashed grant was released as the reaper releases, with the note of the manager that healed it. */
async function expectHealedBy(resource: string, grantId: number, owner: string): Promise<void> {
  expect(await grantRow(db.knex, grantId)).toMatchObject({ status: 2, released_by: 2 });
  const { grants } = await healer('reader').history(resource);
  expect(grants.find((g) => g.id === grantId)).toMatchObject({
    releasedBy: 'reaper',
    releaser: owner,
    reason: HEAL_REASON,
  });
}

describe('a crashed holder’s resource is acquired again, with no reaper running', () => {
  for (const [held, asked] of [
    ['write', 'write'],
    ['write', 'read'],
    ['read', 'write'],
  ] as const) {
    it(`try: a stale ${held} grant, a ${asked} try is granted in the same call`, async () => {
      const resource = `try-${held}-${asked}`;
      const dead = await crashedHolder(resource, held);
      const locks = healer(`healer-${resource}`);
      const grant = asked === 'write' ? await locks.tryAcquireWrite(resource) : await locks.tryAcquireRead(resource);
      expect(grant).not.toBeNull();
      await expectHealedBy(resource, dead.id, `healer-${resource}`);
      await grant!.release();
      expect(await invariantViolations(db.knex)).toEqual([]);
    });
  }

  it('negative control: with selfHeal: false the stale grant stays and the try answers null', async () => {
    const dead = await crashedHolder('off', 'write');
    const locks = healer('no-heal', { selfHeal: false });
    expect(await locks.tryAcquireWrite('off')).toBeNull();
    await expect(locks.acquireRead('off', { waitMs: 300 })).rejects.toBeInstanceOf(LockTimeoutError);
    expect(await grantRow(db.knex, dead.id)).toMatchObject({ status: 0 });
    // The same grant, asked for by a manager that heals: it goes.
    expect(await healer('heals').tryAcquireWrite('off')).not.toBeNull();
    await expectHealedBy('off', dead.id, 'heals');
  });

  it('a waiting acquire is granted once the holder’s grant passes the cutoff during the wait', async () => {
    const dead = createLockManager({ knex: db.knex, owner: 'dies-soon' });
    const grant = (await dead.tryAcquireWrite('soon'))!;
    // Stale 2 s from now on the database clock; the wait allows far more than that.
    await backdate(db.knex, grant.id, CUTOFF_MS - 2_000);
    const locks = healer('waits');
    const mine = await locks.acquireWrite('soon', { waitMs: 30_000 });
    await expectHealedBy('soon', grant.id, 'waits');
    await mine.release();
  });

  it('groups: acquireMany and withLocks heal each stale resource they take', async () => {
    const a = await crashedHolder('group-a', 'write');
    const b = await crashedHolder('group-b', 'read');
    const locks = healer('group');
    const group = await locks.acquireMany({ write: ['group-a', 'group-b'] }, { waitMs: 5_000 });
    await expectHealedBy('group-a', a.id, 'group');
    await expectHealedBy('group-b', b.id, 'group');
    await group.release();
    const c = await crashedHolder('group-c', 'write');
    expect(await locks.withLocks({ write: ['group-c'], read: ['group-a'] }, async () => 'ran')).toBe('ran');
    await expectHealedBy('group-c', c.id, 'group');
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('sections: a one-commit section on a crashed holder’s resource heals it and runs', async () => {
    const w = await crashedHolder('section-w', 'write');
    const r = await crashedHolder('section-r', 'write');
    const locks = healer('sections');
    expect(await locks.withWriteLock('section-w', async () => 'wrote', { section: true, waitMs: 5_000 })).toBe('wrote');
    expect(await locks.withReadLock('section-r', async () => 'read', { section: true, waitMs: 5_000 })).toBe('read');
    await expectHealedBy('section-w', w.id, 'sections');
    await expectHealedBy('section-r', r.id, 'sections');
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('a paused holder that comes back after the heal has lost its grant: its release changes nothing', async () => {
    const paused = await crashedHolder('paused', 'write');
    const locks = healer('takes-over');
    const mine = (await locks.tryAcquireWrite('paused'))!;
    expect(await paused.release()).toBe(false);
    expect((await locks.inspect('paused')).live).toEqual({ write: 1, read: 0 });
    await mine.release();
    expect(await invariantViolations(db.knex)).toEqual([]);
  });
});

describe('a live holder is never healed away', () => {
  /** A holder whose grant is older than the cutoff but whose lease runs a minute ahead. */
  async function leasedOldHolder(resource: string): Promise<Grant> {
    const holder = createLockManager({ knex: db.knex, owner: `leased-${resource}` });
    const grant = (await holder.tryAcquireWrite(resource))!;
    expect(await grant.extend(60_000)).toBe(true);
    await backdate(db.knex, grant.id, PAST_CUTOFF_MS);
    return grant;
  }

  it('an old grant under a lease: tries and a wait are refused, the grant stays live', async () => {
    const holder = await leasedOldHolder('leased');
    const locks = healer('must-not-heal');
    for (let n = 0; n < 3; n++) expect(await locks.tryAcquireWrite('leased')).toBeNull();
    await expect(locks.acquireRead('leased', { waitMs: 300 })).rejects.toBeInstanceOf(LockTimeoutError);
    expect(await grantRow(db.knex, holder.id)).toMatchObject({ status: 0 });
    expect(await holder.release()).toBe(true);
  });

  it('negative control: a heal that judges by age alone takes the leased grant', async () => {
    const holder = await leasedOldHolder('leased-control');
    testSwitches.heal.ageOnly = true;
    const grant = await healer('age-only').tryAcquireWrite('leased-control');
    expect(grant).not.toBeNull();
    expect(await grantRow(db.knex, holder.id)).toMatchObject({ status: 2, released_by: 2 });
    expect(await holder.release()).toBe(false);
    await grant!.release();
  });

  it('a stale grant whose row another transaction holds is left alone, and the try still answers at once', async () => {
    // Without NOWAIT the heal would wait the server's lock wait timeout (checked here to exceed this
    // test's own timeout), as the reaper does before it skips a busy grant.
    const [[{ t }]] = (await db.knex.raw('SELECT @@GLOBAL.innodb_lock_wait_timeout AS t')) as unknown as [
      [{ t: number }],
    ];
    expect(Number(t)).toBeGreaterThan(20);
    const dead = await crashedHolder('busy', 'write');
    const trx = await db.knex.transaction();
    try {
      await trx.raw('SELECT id FROM t_lock_log WHERE id = ? FOR UPDATE', [dead.id]); // as a committing fence would
      expect(await healer('nowait').tryAcquireWrite('busy')).toBeNull();
    } finally {
      await trx.rollback();
    }
    expect(await grantRow(db.knex, dead.id)).toMatchObject({ status: 0 });
    expect(await healer('after').tryAcquireWrite('busy')).not.toBeNull();
  }, 20_000);
});

describe('a lease set after a refused look', () => {
  /**
   * A holder takes `resource` without a lease (stale only at the default cutoff, 10 minutes); a
   * healer's try is refused and looks; then the holder sets a 300 ms lease and dies. Resolves with
   * the healer's try made once the lease and the grace have passed on the database clock.
   */
  async function tryAfterShortLease(resource: string): Promise<{ dead: Grant; taken: Grant | null }> {
    const holder = createLockManager({ knex: db.knex, owner: `short-${resource}` });
    const dead = (await holder.tryAcquireWrite(resource))!;
    const locks = createLockManager({ knex: db.knex, owner: `healer-${resource}` });
    expect(await locks.tryAcquireWrite(resource)).toBeNull();
    expect(await dead.extend(300)).toBe(true);
    // The holder is gone: nothing extends its lease again. Awaited on the database clock, which judges it.
    for (;;) {
      const [[row]] = (await db.knex.raw(
        `SELECT lease_until + INTERVAL ${DEFAULTS.leaseGraceMs} * 1000 MICROSECOND < UTC_TIMESTAMP(6) AS past FROM t_lock_log WHERE id = ?`,
        [dead.id],
      )) as unknown as [[{ past: number }]];
      if (Number(row.past) === 1) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return { dead, taken: await locks.tryAcquireWrite(resource) };
  }

  it('the healer that looked while the grant had no lease heals it once the lease and the grace have passed', async () => {
    const { dead, taken } = await tryAfterShortLease('short-lease');
    expect(taken).not.toBeNull();
    expect(await grantRow(db.knex, dead.id)).toMatchObject({ status: 2, released_by: 2 });
    await taken!.release();
  });

  it('negative control: a look remembered up to the cutoff leaves the dead holder’s grant in place', async () => {
    testSwitches.heal.rememberToCutoff = true;
    const { dead, taken } = await tryAfterShortLease('short-lease-control');
    expect(taken).toBeNull();
    expect(await grantRow(db.knex, dead.id)).toMatchObject({ status: 0 });
  });
});

describe('healing comes before a refusal by kind or limit', () => {
  /** A crashed holder of `permits` permits of a semaphore of `limit` on `resource`, past the cutoff. */
  async function crashedPermit(resource: string, limit: number): Promise<Grant> {
    const dead = createLockManager({ knex: db.knex, owner: `dead-${resource}` });
    const grant = await dead.tryAcquirePermit(resource, { permits: limit });
    expect(grant).not.toBeNull();
    await backdate(db.knex, grant!.id, PAST_CUTOFF_MS);
    return grant!;
  }

  it('permits: a crashed holder of the old limit is healed by a caller of the new one, try and wait', async () => {
    const tried = await crashedPermit('limit-try', 2);
    const locks = healer('new-limit');
    const a = await locks.tryAcquirePermit('limit-try', { permits: 3 });
    expect(a).not.toBeNull();
    await expectHealedBy('limit-try', tried.id, 'new-limit');
    const waited = await crashedPermit('limit-wait', 2);
    const b = await locks.acquirePermit('limit-wait', { permits: 3, waitMs: 1_500 });
    await expectHealedBy('limit-wait', waited.id, 'new-limit');
    await a!.release();
    await b.release();
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('kinds: a dead reader gives way to permits, dead permits to a writer, a reader, a group, a section and runExclusive', async () => {
    const reader = await crashedHolder('kind-r', 'read');
    const locks = healer('kind');
    const permit = await locks.tryAcquirePermit('kind-r', { permits: 2 });
    expect(permit).not.toBeNull();
    await expectHealedBy('kind-r', reader.id, 'kind');
    await permit!.release();
    const calls: Array<[string, (id: string) => Promise<unknown>]> = [
      ['try-write', async (id) => (await locks.tryAcquireWrite(id))!.release()],
      ['wait-read', async (id) => (await locks.acquireRead(id, { waitMs: 1_500 })).release()],
      ['group', (id) => locks.withLocks({ write: [id, `${id}-other`] }, async () => 'ran', { waitMs: 1_500 })],
      ['section', (id) => locks.withWriteLock(id, async () => 'ran', { section: true, waitMs: 1_500 })],
      ['exclusive', (id) => locks.runExclusive(id, async () => 'ran', { lockAtMostFor: 10_000 })],
    ];
    for (const [name, call] of calls) {
      const id = `kind-p-${name}`;
      const dead = await crashedPermit(id, 3);
      await call(id);
      await expectHealedBy(id, dead.id, 'kind');
    }
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('the refusal stands while a holder that is not stale disagrees; a stale one beside it is healed', async () => {
    const dead = await crashedPermit('mixed-holders', 2);
    const live = (await createLockManager({ knex: db.knex, owner: 'alive' }).tryAcquirePermit('mixed-holders', {
      permits: 2,
    }))!;
    const locks = healer('refused');
    await expect(locks.acquirePermit('mixed-holders', { permits: 3, waitMs: 300 })).rejects.toBeInstanceOf(
      PermitLimitError,
    );
    await expect(locks.tryAcquireWrite('mixed-holders')).rejects.toBeInstanceOf(ResourceKindError);
    await expectHealedBy('mixed-holders', dead.id, 'refused');
    expect(await grantRow(db.knex, live.id)).toMatchObject({ status: 0 });
    await live.release();
  });

  it('negative control: refused before healing (selfHeal: false), the dead holder of the old limit locks the new one out', async () => {
    const dead = await crashedPermit('limit-off', 2);
    const reader = await crashedHolder('kind-off', 'read');
    const locks = healer('no-heal-limit', { selfHeal: false });
    await expect(locks.acquirePermit('limit-off', { permits: 3, waitMs: 300 })).rejects.toBeInstanceOf(
      PermitLimitError,
    );
    await expect(locks.tryAcquirePermit('kind-off', { permits: 2 })).rejects.toBeInstanceOf(ResourceKindError);
    expect(await grantRow(db.knex, dead.id)).toMatchObject({ status: 0 });
    expect(await grantRow(db.knex, reader.id)).toMatchObject({ status: 0 });
  });
});
