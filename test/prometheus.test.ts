// The Prometheus helper against a real server, read back from the registry's exposition text as a
// scrape sees it; the campaigns gauge as real campaigns lead, resign, campaign again and close.
// covers: src/observability/prometheus.ts, src/observability/outcome.ts, src/observability/campaign-states.ts, src/lock/leader/channel.ts
import knexFactory from 'knex';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../harness/server.js';
import { createLockManager, InvalidOptionsError, LockLostError, LockTimeoutError, type Term } from '../src/index.js';
import { reapStaleGrants } from '../src/admin/index.js';
import { METRICS, registerLockMetrics } from '../src/observability/prometheus.js';
import { useTestDatabase } from './support/db.js';
import { backdate } from './support/state.js';

const db = useTestDatabase(import.meta.filename);

/** `name{a="x",b="y"}` → value, from the registry's text exposition. */
async function scrape(
  registry: Registry,
): Promise<{ text: string; value(name: string, labels?: Record<string, string>): number | undefined }> {
  const text = await registry.metrics();
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels = (m[2] ?? '').split(',').filter(Boolean).sort().join(',');
    samples.set(`${m[1]}{${labels}}`, Number(m[3]));
  }
  return {
    text,
    value(name, labels = {}) {
      const key = Object.entries(labels)
        .map(([k, v]) => `${k}="${v}"`)
        .sort()
        .join(',');
      return samples.get(`${name}{${key}}`);
    },
  };
}

let registered: { unregister(): void } | undefined;
afterEach(() => {
  registered?.unregister();
  registered = undefined;
});

describe('registerLockMetrics', () => {
  it('counts a section under section="true": its take in the acquire waits, take to commit in the hold times', async () => {
    const registry = new Registry();
    registered = registerLockMetrics({ registry });
    const locks = createLockManager({ knex: db.knex });
    await locks.withWriteLock('metric-section', async () => undefined, { section: true });
    await locks.withReadLock('metric-section', async () => undefined, { section: true });
    const s = await scrape(registry);
    for (const mode of ['write', 'read']) {
      expect(s.value(`${METRICS.acquireWait}_count`, { mode, outcome: 'granted', section: 'true' })).toBe(1);
      expect(s.value(`${METRICS.hold}_count`, { mode, section: 'true' })).toBe(1);
      expect(s.value(`${METRICS.acquireWait}_count`, { mode, outcome: 'granted', section: 'false' })).toBeUndefined();
    }
  });

  it('counts acquire waits by mode and outcome, hold times, fence refusals, lost grants and reaps, with no resource id in any label', async () => {
    const registry = new Registry();
    registered = registerLockMetrics({ registry });
    const locks = createLockManager({ knex: db.knex });
    const before = await scrape(registry);
    expect(before.value(`${METRICS.lost}`, { released_by: 'operator' })).toBe(0);
    expect(
      before.value(`${METRICS.acquireWait}_count`, { mode: 'write', outcome: 'granted', section: 'false' }),
    ).toBeUndefined();

    const held = await locks.tryAcquireWrite('secret-resource-A');
    expect(await locks.tryAcquireRead('secret-resource-A')).toBeNull();
    await expect(locks.acquireRead('secret-resource-A', { waitMs: 20 })).rejects.toBeInstanceOf(LockTimeoutError);
    await held!.release();
    await locks.withWriteLock('secret-resource-B', async () => undefined);
    await expect(
      locks.withReadLock('secret-resource-C', async (_trx, g) => locks.forceRelease(g.id)),
    ).rejects.toBeInstanceOf(LockLostError);
    const stale = await locks.tryAcquireRead('secret-resource-D');
    await backdate(db.knex, stale!.id, 3_600_000);
    expect((await reapStaleGrants(db.knex, { staleAfterMs: 60_000 })).reaped).toBe(1);
    expect(await stale!.release()).toBe(false);

    const after = await scrape(registry);
    expect(after.value(`${METRICS.acquireWait}_count`, { mode: 'write', outcome: 'granted', section: 'false' })).toBe(
      2,
    );
    expect(after.value(`${METRICS.acquireWait}_count`, { mode: 'read', outcome: 'busy', section: 'false' })).toBe(1);
    expect(after.value(`${METRICS.acquireWait}_count`, { mode: 'read', outcome: 'timeout', section: 'false' })).toBe(1);
    expect(after.value(`${METRICS.acquireWait}_count`, { mode: 'read', outcome: 'granted', section: 'false' })).toBe(2);
    // The timed-out wait lasted at least its waitMs.
    expect(
      after.value(`${METRICS.acquireWait}_sum`, { mode: 'read', outcome: 'timeout', section: 'false' }),
    ).toBeGreaterThanOrEqual(0.02);
    // Held: the released write grant and the fenced commit; not the lost or reaped ones.
    expect(after.value(`${METRICS.hold}_count`, { mode: 'write', section: 'false' })).toBe(2);
    expect(after.value(`${METRICS.hold}_count`, { mode: 'read', section: 'false' }) ?? 0).toBe(0);
    expect(after.value(METRICS.fenceRefusals, { mode: 'read' })).toBe(1);
    expect(after.value(METRICS.fenceRefusals, { mode: 'write' })).toBe(0);
    expect(after.value(METRICS.reaped, { mode: 'read' })).toBe(1);
    expect(after.value(METRICS.reapRuns, { outcome: 'ok' })).toBe(1);
    await expect.poll(async () => (await scrape(registry)).value(METRICS.lost, { released_by: 'operator' })).toBe(1);
    expect((await scrape(registry)).value(METRICS.lost, { released_by: 'reaper' })).toBe(1);
    expect(after.text).not.toContain('secret-resource');
    // Without knex: no gauges.
    expect(after.value(METRICS.liveGrants, { mode: 'write' })).toBeUndefined();
  });

  it('counts permit grants under mode="permit": acquire waits, hold times, fence refusals and the live gauge', async () => {
    const registry = new Registry();
    registered = registerLockMetrics({ registry, knex: db.knex, staleAfterMs: 60_000 });
    const locks = createLockManager({ knex: db.knex });
    expect((await scrape(registry)).value(METRICS.fenceRefusals, { mode: 'permit' })).toBe(0);
    const held = await locks.acquirePermit('metric-permit', { permits: 2, count: 2 });
    expect(await locks.tryAcquirePermit('metric-permit', { permits: 2 })).toBeNull();
    const s = await scrape(registry);
    expect(s.value(METRICS.liveGrants, { mode: 'permit' })).toBe(1);
    expect(s.value(METRICS.liveGrants, { mode: 'read' })).toBe(0);
    expect(s.value(`${METRICS.acquireWait}_count`, { mode: 'permit', outcome: 'granted', section: 'false' })).toBe(1);
    expect(s.value(`${METRICS.acquireWait}_count`, { mode: 'permit', outcome: 'busy', section: 'false' })).toBe(1);
    await held.release();
    const done = await scrape(registry);
    expect(done.value(`${METRICS.hold}_count`, { mode: 'permit', section: 'false' })).toBe(1);
    expect(done.value(METRICS.liveGrants, { mode: 'permit' })).toBe(0);
    await locks.close();
  });

  it('reads live, stale and waiting-writer gauges from the database at scrape time', async () => {
    const registry = new Registry();
    registered = registerLockMetrics({ registry, knex: db.knex, staleAfterMs: 60_000 });
    const locks = createLockManager({ knex: db.knex });
    const empty = await scrape(registry);
    expect(empty.value(METRICS.databaseUp)).toBe(1);
    expect(empty.value(METRICS.liveGrants, { mode: 'write' })).toBe(0);
    expect(empty.value(METRICS.waitingWriters)).toBe(0);

    const r1 = await locks.tryAcquireRead('g-1');
    const r2 = await locks.tryAcquireRead('g-2');
    const w = await locks.tryAcquireWrite('g-3');
    await backdate(db.knex, r2!.id, 3_600_000);
    const extended = await locks.tryAcquireRead('g-4');
    await backdate(db.knex, extended!.id, 3_600_000);
    await extended!.extend(600_000); // old but leased: not stale
    const ac = new AbortController();
    const writer = locks.acquireWrite('g-1', { signal: ac.signal, waitMs: 60_000 }).catch((e: unknown) => e);
    await expect.poll(async () => (await scrape(registry)).value(METRICS.waitingWriters)).toBe(1);
    const s = await scrape(registry);
    expect(s.value(METRICS.liveGrants, { mode: 'read' })).toBe(3);
    expect(s.value(METRICS.liveGrants, { mode: 'write' })).toBe(1);
    expect(s.value(METRICS.staleGrants)).toBe(1);
    expect(s.value(METRICS.oldestGrantAge)).toBeGreaterThanOrEqual(3600);
    ac.abort();
    expect(await writer).toMatchObject({ name: 'AbortError' });
    for (const g of [r1, r2, w, extended]) await g!.release();
    const done = await scrape(registry);
    expect(done.value(METRICS.liveGrants, { mode: 'read' })).toBe(0);
    expect(done.value(METRICS.staleGrants)).toBe(0);
  });

  it('a database it cannot read gives gauges_up 0 and no gauges, and the scrape still succeeds', async () => {
    const registry = new Registry();
    const closed = await freePort();
    const dead = knexFactory({
      client: 'mysql2',
      connection: `mysql://nobody@127.0.0.1:${closed}/x`,
      pool: { min: 0, max: 1 },
      acquireConnectionTimeout: 5_000,
      log: { warn() {}, error() {}, deprecate() {}, debug() {} },
    });
    try {
      registered = registerLockMetrics({ registry, knex: dead });
      const s = await scrape(registry);
      expect(s.value(METRICS.databaseUp)).toBe(0);
      expect(s.value(METRICS.liveGrants, { mode: 'read' })).toBeUndefined();
      expect(s.value(METRICS.reapRuns, { outcome: 'ok' })).toBe(0);
    } finally {
      await dead.destroy();
    }
  });

  it('refuses bad options and a second registration on one registry; unregister removes metrics and subscriptions', async () => {
    const registry = new Registry();
    expect(() => registerLockMetrics({ registry: {} as Registry })).toThrow(InvalidOptionsError);
    expect(() => registerLockMetrics({ registry, staleAfterMs: -1 })).toThrow(/^staleAfterMs/);
    expect(() => registerLockMetrics({ registry, bogus: 1 } as never)).toThrow(/^bogus: unknown option/);
    expect((await registry.metrics()).trim()).toBe('');
    const first = registerLockMetrics({ registry });
    expect(() => registerLockMetrics({ registry })).toThrow(/already registered/);
    first.unregister();
    expect((await registry.metrics()).trim()).toBe('');
    // Unsubscribed: a later acquire counts nowhere, and a new registration starts from zero.
    const locks = createLockManager({ knex: db.knex });
    await (await locks.tryAcquireWrite('after-unregister'))!.release();
    registered = registerLockMetrics({ registry });
    expect(
      (await scrape(registry)).value(`${METRICS.acquireWait}_count`, {
        mode: 'write',
        outcome: 'granted',
        section: 'false',
      }),
    ).toBeUndefined();
  });

  it("the campaigns gauge follows this process's campaigns by name and state as they lead, resign and campaign again", async () => {
    const registry = new Registry();
    registered = registerLockMetrics({ registry });
    const NAME = 'metric-leader';
    const gauge = async () => {
      const s = await scrape(registry);
      return ['leading', 'campaigning'].map((state) => s.value(METRICS.campaigns, { name: NAME, state }));
    };
    // No campaign yet: no series (a name appears once a campaign of it is seen).
    expect(await gauge()).toEqual([undefined, undefined]);
    const [a, b] = ['metric@a', 'metric@b'].map((owner) => createLockManager({ knex: db.knex, owner }));
    const aTerms: Term[] = [];
    const bTerms: Term[] = [];
    const ca = await a!.campaign(NAME, (t) => void aTerms.push(t), { leaseMs: 30_000 });
    await expect.poll(() => aTerms.length).toBe(1);
    expect(await gauge()).toEqual([1, 0]);
    const cb = await b!.campaign(NAME, (t) => void bTerms.push(t), { leaseMs: 30_000 });
    await expect.poll(gauge).toEqual([1, 1]);
    // A resigns: B leads, A stands aside, counted as campaigning (it leads again when nobody else does).
    await ca.resign();
    await expect.poll(() => bTerms.length).toBe(1);
    await expect.poll(gauge).toEqual([1, 1]);
    expect(aTerms[0]!.signal.aborted).toBe(true);
    // B closes: A campaigns again and leads; B's campaign is gone from the gauge.
    await cb.close();
    await expect.poll(() => aTerms.length).toBe(2);
    await expect.poll(gauge).toEqual([1, 0]);
    expect(aTerms[1]!.id).toBeGreaterThan(bTerms[0]!.id);
    // A closes: the name stays, at 0, so that a graph shows the fall.
    await ca.close();
    await expect.poll(gauge).toEqual([0, 0]);

    // Negative control: the gauge is this process's channel, not the database. A campaign that began
    // before the metrics were registered is not seen until it changes state, though it leads.
    const c = await a!.campaign(`${NAME}:early`, () => undefined, { leaseMs: 30_000 });
    await expect.poll(async () => (await a!.leader(`${NAME}:early`))?.owner).toBe('metric@a');
    registered.unregister();
    registered = registerLockMetrics({ registry });
    const early = await scrape(registry);
    expect(early.value(METRICS.campaigns, { name: `${NAME}:early`, state: 'leading' })).toBeUndefined();
    await c.close();
    expect((await scrape(registry)).value(METRICS.campaigns, { name: `${NAME}:early`, state: 'leading' })).toBe(0);
    await a!.close();
    await b!.close();
  });
});
