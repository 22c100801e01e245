// Leader election with fenced terms: one campaign leads at a time, a term's fence commits only
// while it leads and leaves it leading, resign/close hand over at once, a lost or unrenewed term
// aborts its signal and the campaign leads again only with a higher term; bad input refused.
// covers: src/lock/leader/calls.ts, src/lock/leader/campaign.ts, src/lock/leader/campaign-options.ts, src/lock/leader/term.ts, src/sql/leader.ts
import { describe, expect, it } from 'vitest';
import type { Knex } from 'knex';
import {
  createLockManager,
  InvalidOptionsError,
  InvalidResourceIdError,
  LeadershipError,
  LockLostError,
  ResourceKindError,
  type Campaign,
  type LockManager,
  type Term,
} from '../src/index.js';
import { fromKnex } from '../src/adapters/index.js';
import { useTestDatabase } from './support/db.js';
import { useProxiedKnex } from './support/proxy.js';
import { grantRow, invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);
const proxied = useProxiedKnex(db, 4);

/** Terms handed to one campaign's callback, in order, each with a promise of its abort. */
function recorder(): { terms: Term[]; lead: (t: Term) => void; next: () => Promise<Term> } {
  const terms: Term[] = [];
  const waiting: Array<(t: Term) => void> = [];
  return {
    terms,
    lead: (t) => {
      terms.push(t);
      waiting.shift()?.(t);
    },
    next: () => new Promise((resolve) => waiting.push(resolve)),
  };
}

function aborted(signal: AbortSignal): Promise<unknown> {
  return new Promise((resolve) =>
    signal.aborted ? resolve(signal.reason) : signal.addEventListener('abort', () => resolve(signal.reason)),
  );
}

async function ensureTable(knex: Knex): Promise<void> {
  await knex.raw(
    'CREATE TABLE IF NOT EXISTS leader_writes (seq INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(64), term BIGINT)',
  );
}

async function fencedWrite(knex: Knex, term: Term): Promise<void> {
  await knex.transaction(async (trx) => {
    await trx('leader_writes').insert({ name: term.name, term: term.id });
    await term.fence(fromKnex(trx));
  });
}

async function writesOf(knex: Knex, name: string): Promise<number[]> {
  const rows = (await knex('leader_writes').where({ name }).orderBy('seq').select('term')) as Array<{ term: number }>;
  return rows.map((r) => Number(r.term));
}

async function logRows(knex: Knex, name: string): Promise<number> {
  const [[row]] = (await knex.raw('SELECT COUNT(*) AS n FROM t_lock_log WHERE resource_id = ?', [
    Buffer.from(name),
  ])) as unknown as [[{ n: number }]];
  return Number(row.n);
}

async function liveGrants(knex: Knex, name: string): Promise<number> {
  const [[row]] = (await knex.raw('SELECT COUNT(*) AS n FROM t_lock_log WHERE resource_id = ? AND status = 0', [
    Buffer.from(name),
  ])) as unknown as [[{ n: number }]];
  return Number(row.n);
}

function managers(n: number, options: { staleAfterMs?: number } = {}): LockManager[] {
  return Array.from({ length: n }, (_, i) => createLockManager({ knex: db.knex, owner: `node-${i}`, ...options }));
}

describe('campaign', () => {
  it('one campaign leads; leader() tells who, since when and its term, which is the write grant id', async () => {
    const [a, b] = managers(2);
    const ra = recorder();
    const rb = recorder();
    const first = ra.next();
    const ca = await a!.campaign('elect:one', ra.lead, { leaseMs: 5_000 });
    const t1 = await first;
    const cb = await b!.campaign('elect:one', rb.lead, { leaseMs: 5_000 });
    expect(ca.term).toBe(t1);
    expect(cb.term).toBeNull();
    const who = await a!.leader('elect:one');
    expect(who).toMatchObject({ owner: 'node-0', term: t1.id });
    expect(who!.since).toBeInstanceOf(Date);
    expect(who!.leaseUntil.getTime()).toBeGreaterThan(who!.since.getTime());
    const holders = (await a!.inspect('elect:one')).holders;
    expect(holders).toEqual([expect.objectContaining({ id: t1.id, mode: 'write', owner: 'node-0' })]);
    expect(rb.terms).toEqual([]);
    await ca.close();
    await cb.close();
    expect(await a!.leader('elect:one')).toBeNull();
    await a!.close();
    await b!.close();
  });

  it('resign hands over at once to a waiting campaign, whose term is higher; close does the same', async () => {
    const [a, b, c] = managers(3);
    const ra = recorder();
    const rb = recorder();
    const rc = recorder();
    const aLeads = ra.next();
    const ca = await a!.campaign('elect:handover', ra.lead, { leaseMs: 30_000 });
    const t1 = await aLeads;
    const bLeads = rb.next();
    const cb = await b!.campaign('elect:handover', rb.lead, { leaseMs: 30_000 });
    // The hand-over cannot be the lease running out: it is 30 s, the bound here is 1 s.
    const resignedAt = performance.now();
    await ca.resign();
    expect(t1.signal.aborted).toBe(true);
    const t2 = await bLeads;
    const resignMs = performance.now() - resignedAt;
    expect(t2.id).toBeGreaterThan(t1.id);
    expect(resignMs).toBeLessThan(1_000);

    // a stays in (it would lead again later); out of the way of the close hand-over below.
    await ca.close();
    const cLeads = rc.next();
    const cc = await c!.campaign('elect:handover', rc.lead, { leaseMs: 30_000 });
    const closedAt = performance.now();
    await cb.close();
    expect(t2.signal.aborted).toBe(true);
    const t3 = await cLeads;
    const closeMs = performance.now() - closedAt;
    expect(t3.id).toBeGreaterThan(t2.id);
    expect(closeMs).toBeLessThan(1_000);
    console.log(`[leader] hand-over: resign ${resignMs.toFixed(0)} ms, close ${closeMs.toFixed(0)} ms`);
    await cc.close();
    const history = await a!.history('elect:handover');
    expect(history.grants.map((g) => [g.id, g.releasedBy])).toEqual([
      [t3.id, 'holder'],
      [t2.id, 'holder'],
      [t1.id, 'holder'],
    ]);
    for (const m of [a, b, c]) await m!.close();
  });

  it('a campaign that resigned with nobody else campaigning leads again, with a higher term, after a lease', async () => {
    const [a] = managers(1);
    const r = recorder();
    const leads = r.next();
    const c = await a!.campaign('elect:alone', r.lead, { leaseMs: 300 });
    const t1 = await leads;
    const again = r.next();
    await c.resign();
    expect(t1.signal.aborted).toBe(true);
    expect((await again).id).toBeGreaterThan(t1.id);
    await c.close();
    await a!.close();
  });

  it('closing the manager closes its campaigns and releases the term', async () => {
    const [a] = managers(1);
    const r = recorder();
    const leads = r.next();
    await a!.campaign('elect:manager-close', r.lead, { leaseMs: 5_000 });
    const t = await leads;
    await a!.close();
    expect(t.signal.aborted).toBe(true);
    expect(await liveGrants(db.knex, 'elect:manager-close')).toBe(0);
  });
});

describe('the term fence', () => {
  it('commits many transactions in one term, each fenced, and leaves the term leading', async () => {
    await ensureTable(db.knex);
    const [a] = managers(1);
    const r = recorder();
    const leads = r.next();
    const c = await a!.campaign('elect:fence', r.lead, { leaseMs: 5_000 });
    const t = await leads;
    for (let i = 0; i < 5; i++) await fencedWrite(db.knex, t);
    expect(await writesOf(db.knex, 'elect:fence')).toEqual([t.id, t.id, t.id, t.id, t.id]);
    expect(t.signal.aborted).toBe(false);
    expect(await grantRow(db.knex, t.id)).toMatchObject({ status: 0 });
    expect((await a!.leader('elect:fence'))?.term).toBe(t.id);
    await c.close();
    await a!.close();
  });

  it('a deposed term (released by an operator) commits nothing; the campaign leads again with a higher term', async () => {
    await ensureTable(db.knex);
    const [a, op] = managers(2);
    const r = recorder();
    const leads = r.next();
    const c = await a!.campaign('elect:deposed', r.lead, { leaseMs: 5_000 });
    const t1 = await leads;
    await fencedWrite(db.knex, t1);
    const again = r.next();
    expect(await op!.forceRelease(t1.id, { reason: 'test' })).toBe(true);
    await expect(fencedWrite(db.knex, t1)).rejects.toBeInstanceOf(LockLostError);
    expect(t1.signal.aborted).toBe(true);
    const t2 = await again;
    expect(t2.id).toBeGreaterThan(t1.id);
    // Known lost here: refused without a round trip, still nothing written.
    await expect(fencedWrite(db.knex, t1)).rejects.toBeInstanceOf(LockLostError);
    await fencedWrite(db.knex, t2);
    expect(await writesOf(db.knex, 'elect:deposed')).toEqual([t1.id, t2.id]);
    await c.close();
    await a!.close();
    await op!.close();
  });

  it('a term whose lease ran out on the database clock commits nothing, even before anyone released it', async () => {
    await ensureTable(db.knex);
    const [a] = managers(1);
    const r = recorder();
    const leads = r.next();
    const c = await a!.campaign('elect:expired', r.lead, { leaseMs: 60_000, renewEveryMs: 30_000 });
    const t = await leads;
    // A paused leader: its lease has run out and nobody reaped it yet.
    await db.knex.raw('UPDATE t_lock_log SET lease_until = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE id = ?', [t.id]);
    expect(await grantRow(db.knex, t.id)).toMatchObject({ status: 0 });
    expect(await a!.leader('elect:expired')).toBeNull();
    await expect(fencedWrite(db.knex, t)).rejects.toBeInstanceOf(LockLostError);
    expect(await writesOf(db.knex, 'elect:expired')).toEqual([]);
    expect(t.signal.aborted).toBe(true);
    await c.close();
    await a!.close();
  });

  it('serialises with a release: the release waits for the fenced commit, and the next fence is refused', async () => {
    await ensureTable(db.knex);
    const [a, op] = managers(2);
    const r = recorder();
    const leads = r.next();
    const c = await a!.campaign('elect:serialise', r.lead, { leaseMs: 30_000 });
    const t = await leads;
    const trx = await db.knex.transaction();
    let releasing: Promise<boolean> | undefined;
    try {
      await trx('leader_writes').insert({ name: 'elect:serialise', term: t.id });
      await t.fence(fromKnex(trx));
      releasing = op!.forceRelease(t.id, { reason: 'racing the fence' });
      // The release is blocked on the row the fence locked.
      await expect
        .poll(
          async () => {
            const [[row]] = (await db.knex.raw(
              "SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = ? AND INFO LIKE 'UPDATE t_lock_log%' AND INFO NOT LIKE '%PROCESSLIST%'",
              [db.name],
            )) as unknown as [[{ n: number }]];
            return Number(row.n);
          },
          { timeout: 20_000, interval: 50 },
        )
        .toBeGreaterThan(0);
      await trx.commit();
    } catch (err) {
      await trx.rollback();
      throw err;
    }
    expect(await releasing).toBe(true);
    expect(await writesOf(db.knex, 'elect:serialise')).toEqual([t.id]);
    await expect(fencedWrite(db.knex, t)).rejects.toBeInstanceOf(LockLostError);
    expect(await writesOf(db.knex, 'elect:serialise')).toEqual([t.id]);
    await c.close();
    await a!.close();
    await op!.close();
  });

  it('negative control: a check that reads without locking lets the release through before the commit', async () => {
    await ensureTable(db.knex);
    const [a, op] = managers(2);
    const r = recorder();
    const leads = r.next();
    const c = await a!.campaign('elect:unlocked', r.lead, { leaseMs: 30_000 });
    const t = await leads;
    const trx = await db.knex.transaction();
    try {
      await trx('leader_writes').insert({ name: 'elect:unlocked', term: t.id });
      // The broken fence: the same condition as a plain (consistent, non-locking) read.
      const [[row]] = (await trx.raw(
        'SELECT COUNT(*) AS n FROM t_lock_log WHERE id = ? AND status = 0 AND lease_until > UTC_TIMESTAMP(6)',
        [t.id],
      )) as unknown as [[{ n: number }]];
      expect(Number(row.n)).toBe(1);
      // Nothing holds the row: the release commits at once, while the leader's transaction is open...
      expect(await op!.forceRelease(t.id, { reason: 'control' })).toBe(true);
      await trx.commit();
    } catch (err) {
      await trx.rollback();
      throw err;
    }
    // ...and the write of a term already released committed after its release: what the fence prevents.
    const [[after]] = (await db.knex.raw(
      "SELECT COUNT(*) AS n FROM leader_writes WHERE name = 'elect:unlocked' AND term = ?",
      [t.id],
    )) as unknown as [[{ n: number }]];
    expect(Number(after.n)).toBe(1);
    expect(await grantRow(db.knex, t.id)).toMatchObject({ status: 2, released_by: 3 });
    await c.close();
    await a!.close();
    await op!.close();
  });
});

describe('losing a term', () => {
  it('a leader whose link stalls aborts its signal within the lease; the campaign leads again later', async () => {
    const errors: unknown[] = [];
    const a = createLockManager({ knex: proxied.knex, owner: 'cut-off' });
    const r = recorder();
    const leads = r.next();
    const c = await a.campaign('elect:cut', r.lead, {
      leaseMs: 1_500,
      renewEveryMs: 300,
      onError: (e) => errors.push(e),
    });
    const t = await leads;
    const cutAt = performance.now();
    const again = r.next();
    proxied.proxy.stall();
    try {
      const reason = await aborted(t.signal);
      expect(reason).toBeInstanceOf(LockLostError);
      // The lease reaches 1.5 s past the last renewal sent before the stall: the signal aborts then,
      // before the database could let a successor in (plus a timer's lateness, here under a renewal period).
      expect(performance.now() - cutAt).toBeLessThan(1_500 + 300);
    } finally {
      proxied.proxy.resume();
    }
    // The link is back: the campaign leads again, with a higher term.
    expect((await again).id).toBeGreaterThan(t.id);
    await c.close();
    await a.close();
  });
});

describe('callbacks', () => {
  it('a callback that throws ends its term (released, reported as LeadershipError) and the campaign goes on', async () => {
    const errors: unknown[] = [];
    const [a] = managers(1);
    const ids: number[] = [];
    let failNext = true;
    let second: (t: Term) => void = () => undefined;
    const secondTerm = new Promise<Term>((resolve) => (second = resolve));
    const c = await a!.campaign(
      'elect:throws',
      (t) => {
        ids.push(t.id);
        if (failNext) {
          failNext = false;
          throw new Error('boom');
        }
        second(t);
      },
      { leaseMs: 1_000, onError: (e) => errors.push(e) },
    );
    const t2 = await secondTerm;
    expect(ids).toHaveLength(2);
    expect(t2.id).toBeGreaterThan(ids[0]!);
    expect(errors[0]).toBeInstanceOf(LeadershipError);
    expect(errors[0]).toMatchObject({ reason: 'work-failed', term: ids[0] });
    expect((errors[0] as Error).cause).toMatchObject({ message: 'boom' });
    expect(await grantRow(db.knex, ids[0]!)).toMatchObject({ status: 2, released_by: 1 });
    await c.close();
    await a!.close();
  });

  it('a callback that never returns: close() rejects with LeadershipError after stopTimeoutMs, nothing held', async () => {
    const [a] = managers(1);
    const r = recorder();
    const leads = r.next();
    const c = await a!.campaign(
      'elect:stuck',
      (t) => {
        r.lead(t);
        return new Promise(() => undefined);
      },
      { leaseMs: 5_000, stopTimeoutMs: 200 },
    );
    const t = await leads;
    await expect(c.close()).rejects.toMatchObject({ code: 'ERR_RWLOCK_LEADERSHIP', reason: 'work-stuck' });
    expect(t.signal.aborted).toBe(true);
    expect(await liveGrants(db.knex, 'elect:stuck')).toBe(0);
    await a!.close();
  });
});

describe('bad input', () => {
  it('refuses bad names, options and callbacks with typed errors, writing nothing', async () => {
    const [a] = managers(1);
    const lead = (): void => undefined;
    const before = await logRows(db.knex, 'elect:bad');
    const cases: Array<[() => Promise<Campaign>, new (...args: never[]) => Error]> = [
      [() => a!.campaign('', lead), InvalidResourceIdError],
      [() => a!.campaign('x'.repeat(256), lead), InvalidResourceIdError],
      [() => a!.campaign(7 as unknown as string, lead), InvalidResourceIdError],
      [() => a!.campaign('elect:bad', 'lead' as unknown as () => void), InvalidOptionsError],
      [() => a!.campaign('elect:bad', lead, { leaseMs: 29 }), InvalidOptionsError],
      [() => a!.campaign('elect:bad', lead, { leaseMs: 2 ** 31 }), InvalidOptionsError],
      [() => a!.campaign('elect:bad', lead, { leaseMs: 1_000, renewEveryMs: 501 }), InvalidOptionsError],
      [() => a!.campaign('elect:bad', lead, { leaseMs: 1_000, renewEveryMs: 9 }), InvalidOptionsError],
      [() => a!.campaign('elect:bad', lead, { stopTimeoutMs: -1 }), InvalidOptionsError],
      [() => a!.campaign('elect:bad', lead, { ttl: 5 } as never), InvalidOptionsError],
      [() => a!.campaign('elect:bad', lead, { onError: 'log' } as never), InvalidOptionsError],
      [() => a!.campaign('elect:bad', lead, null as never), InvalidOptionsError],
    ];
    for (const [call, type] of cases) await expect(call()).rejects.toBeInstanceOf(type);
    await expect(a!.leader('')).rejects.toBeInstanceOf(InvalidResourceIdError);
    expect(await logRows(db.knex, 'elect:bad')).toBe(before);
    await a!.close();
  });

  it('a name held as a semaphore or by readers is refused with nothing held', async () => {
    const [a, other] = managers(2);
    const permit = await other!.acquirePermit('elect:sem', { permits: 2 });
    await expect(a!.campaign('elect:sem', () => undefined)).rejects.toBeInstanceOf(ResourceKindError);
    await permit.release();
    const read = await other!.acquireRead('elect:read');
    await expect(a!.campaign('elect:read', () => undefined)).rejects.toMatchObject({
      code: 'ERR_RWLOCK_LEADERSHIP',
      reason: 'name-in-use',
    });
    expect(await liveGrants(db.knex, 'elect:read')).toBe(1);
    await read.release();
    expect(await liveGrants(db.knex, 'elect:sem')).toBe(0);
    expect(await invariantViolations(db.knex)).toEqual([]);
    await a!.close();
    await other!.close();
  });

  it('after close, campaign is refused by the closed manager', async () => {
    const [a] = managers(1);
    await a!.close();
    await expect(a!.campaign('elect:closed', () => undefined)).rejects.toMatchObject({ code: 'ERR_RWLOCK_CLOSED' });
  });
});
