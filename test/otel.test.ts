// mysql-rwlock/otel with the real OpenTelemetry SDK (in-memory exporter, AsyncLocalStorage context
// manager) and the real knex instrumentation, against a real server: the spans' names, attributes,
// statuses and parents, the knex query span made inside withWriteLock, withLocks and a section (one
// resource or two) as a child of the hold span, the resource id only on opt-in, and disable(); the
// term spans and the campaigns gauge (the real metrics SDK) as real campaigns lead and lose terms.
// covers: src/observability/otel.ts, src/observability/otel-servers.ts, src/observability/outcome.ts, src/contract/hold-wrappers.ts, src/observability/otel-leader.ts
import { context, SpanStatusCode, trace, type Span } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { KnexInstrumentation } from '@opentelemetry/instrumentation-knex';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider, type ReadableSpan } from '@opentelemetry/sdk-trace';
import { MeterProvider, MetricReader, type GaugeMetricData } from '@opentelemetry/sdk-metrics';
import type { Knex } from 'knex';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { FoundServer } from '../harness/server.js';

const exporter = new InMemorySpanExporter();
const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
// The instrumentation patches knex when knex is first loaded: so before the modules that load it,
// which are imported below, after it.
new KnexInstrumentation().setTracerProvider(provider);
const { useTestDatabase } = await import('./support/db.js');
const { backdate } = await import('./support/state.js');
const { createLockManager, InvalidOptionsError, LockLostError, LockTimeoutError } = await import('../src/index.js');
const { fromKnex } = await import('../src/adapters/index.js');
const { reapStaleGrants } = await import('../src/admin/index.js');
const { instrumentLocks, SPANS } = await import('../src/observability/otel.js');
const { inHoldWrappers } = await import('../src/contract/hold-wrappers.js');
const { migrate } = await import('../src/admin/index.js');
const { startFlavour } = await import('../harness/server.js');
const { connectKnex, createDatabase, dropDatabase, parseMysqlUrl } = await import('../harness/database.js');
const { TEST_PROCEDURES } = await import('./support/db.js');

const db = useTestDatabase(import.meta.filename);
const tracer = provider.getTracer('test');
let dbSystem: string;

beforeAll(async () => {
  await db.knex.raw('CREATE TABLE account (id INT PRIMARY KEY, balance INT NOT NULL)');
  await db.knex.raw('INSERT INTO account VALUES (1, 100)');
  const [rows] = (await db.knex.raw('SELECT VERSION() AS v')) as unknown as [Array<{ v: string }>];
  dbSystem = /mariadb/i.test(rows[0]!.v) ? 'mariadb' : 'mysql';
});

let handle: { disable(): void } | undefined;
afterEach(() => {
  handle?.disable();
  handle = undefined;
  exporter.reset();
});

async function instrument(options: Record<string, unknown> = {}) {
  const h = instrumentLocks({ tracerProvider: provider, knex: db.knex, ...options });
  handle = h;
  await h.ready;
  await flush();
  exporter.reset(); // the detection query's own knex span
  return h;
}

/** Runs `fn` under a span of the test's own, as a request handler would. */
function inRequest<T>(fn: () => Promise<T>): Promise<{ value: T; request: Span }> {
  return tracer.startActiveSpan('request', async (request) => {
    try {
      return { value: await fn(), request };
    } finally {
      request.end();
    }
  });
}

/** The SDK exports an ended span asynchronously: wait for the spans ended so far. */
const flush = (): Promise<void> => provider.forceFlush();
const spans = (): ReadableSpan[] => exporter.getFinishedSpans();
const named = (name: string): ReadableSpan[] => spans().filter((s) => s.name === name);
const one = (name: string): ReadableSpan => {
  const found = named(name);
  expect(found, name).toHaveLength(1);
  return found[0]!;
};
/** An HrTime ([seconds, nanoseconds]) as one number to compare: arrays compared with >= compare as strings. */
const nanos = ([seconds, ns]: ReadableSpan['endTime']): bigint => BigInt(seconds) * 1_000_000_000n + BigInt(ns);
const parentOf = (s: ReadableSpan): string | undefined => s.parentSpanContext?.spanId;
const lockSpans = (): ReadableSpan[] => spans().filter((s) => s.instrumentationScope.name === 'mysql-rwlock');
/** The spans knex's instrumentation made for statements on the test table. */
const accountQueries = (): ReadableSpan[] =>
  spans().filter((s) => s.instrumentationScope.name.includes('knex') && /account/.test(s.name));

describe('mysql-rwlock/otel', () => {
  it('withWriteLock: acquire, hold, fence spans with semantic attributes; the knex query span is a child of the hold', async () => {
    await instrument();
    const locks = createLockManager({ knex: db.knex, owner: 'otel-test' });
    const { value: grantId, request } = await inRequest(() =>
      locks.withWriteLock('otel:account:1', async (trx, grant) => {
        await trx('account').where({ id: 1 }).decrement('balance', 1);
        return grant.id;
      }),
    );
    await flush();
    const acquire = one(SPANS.acquire);
    const hold = one(SPANS.hold);
    const fence = one(SPANS.fence);
    const [query] = accountQueries();
    expect(query, 'the knex instrumentation made a span for the UPDATE').toBeDefined();

    const requestId = request.spanContext().spanId;
    expect(parentOf(acquire)).toBe(requestId);
    expect(parentOf(hold)).toBe(requestId);
    expect(parentOf(fence)).toBe(hold.spanContext().spanId);
    expect(parentOf(query!)).toBe(hold.spanContext().spanId);
    expect(nanos(hold.startTime) >= nanos(acquire.startTime)).toBe(true);

    const server = {
      'db.system.name': dbSystem,
      'db.namespace': db.name,
      'server.address': expect.any(String),
      'server.port': expect.any(Number),
    };
    expect(acquire.attributes).toEqual({
      ...server,
      'rwlock.mode': 'write',
      'rwlock.wait_limit_ms': 30_000,
      'rwlock.owner': 'otel-test',
      'rwlock.outcome': 'granted',
      'rwlock.grant.id': grantId,
    });
    expect(hold.attributes).toEqual({
      ...server,
      'rwlock.mode': 'write',
      'rwlock.grant.id': grantId,
      'rwlock.released_by': 'commit',
    });
    expect(fence.attributes).toMatchObject({ ...server, 'rwlock.grant.id': grantId, 'rwlock.outcome': 'released' });
    for (const s of lockSpans()) {
      expect(s.status.code, s.name).toBe(SpanStatusCode.UNSET);
      expect(s.attributes, s.name).not.toHaveProperty('rwlock.resource.id');
    }
    // The hold lasts until the commit: it ends after the fence. Judged by the order the spans ended in
    // (the exporter's), not their end times: the SDK anchors each span's clock to Date.now() at its
    // start, so two spans' times can differ by up to a millisecond, and the fence and the COMMIT are
    // one call, which ends microseconds before the hold.
    const ended = spans();
    expect(ended.indexOf(hold)).toBeGreaterThan(ended.indexOf(fence));
  });

  it('the resource id is recorded only when asked for', async () => {
    await instrument({ recordResourceIds: true });
    const locks = createLockManager({ knex: db.knex });
    await locks.withReadLock('otel:catalog', async () => undefined);
    await flush();
    expect(one(SPANS.acquire).attributes['rwlock.resource.id']).toBe('otel:catalog');
    expect(one(SPANS.hold).attributes['rwlock.resource.id']).toBe('otel:catalog');
    expect(one(SPANS.hold).attributes['rwlock.mode']).toBe('read');
  });

  it('a timeout is an ERROR acquire span with the exception; a busy try is not an error', async () => {
    await instrument({ dbSystem: 'mysql' });
    const locks = createLockManager({ knex: db.knex });
    const grant = await locks.tryAcquireWrite('otel:busy');
    expect(await locks.tryAcquireRead('otel:busy')).toBeNull();
    await expect(locks.acquireWrite('otel:busy', { waitMs: 30 })).rejects.toBeInstanceOf(LockTimeoutError);
    await grant!.release();
    await flush();
    const [granted, busy, timedOut] = named(SPANS.acquire);
    expect(granted!.attributes['rwlock.outcome']).toBe('granted');
    expect(busy!.attributes['rwlock.outcome']).toBe('busy');
    expect(busy!.status.code).toBe(SpanStatusCode.UNSET);
    expect(timedOut!.attributes).toMatchObject({
      'rwlock.outcome': 'timeout',
      'error.type': 'LockTimeoutError',
      'rwlock.wait_limit_ms': 30,
      // As configured, whatever the server is.
      'db.system.name': 'mysql',
    });
    expect(timedOut!.status.code).toBe(SpanStatusCode.ERROR);
    expect(timedOut!.events).toEqual([
      expect.objectContaining({
        name: 'exception',
        attributes: expect.objectContaining({ 'exception.message': expect.stringContaining('within 30 ms') }),
      }),
    ]);
    // The acquired grant's hold ended at its release, by the holder.
    const hold = one(SPANS.hold);
    expect(hold.attributes).toMatchObject({ 'rwlock.grant.id': grant!.id, 'rwlock.released_by': 'holder' });
    expect(hold.status.code).toBe(SpanStatusCode.UNSET);
    expect(one(SPANS.release).attributes).toMatchObject({ 'rwlock.released_by': 'holder', 'rwlock.released': true });
  });

  it('a fence refused after an operator release: fence and hold spans are ERROR with LockLostError', async () => {
    await instrument();
    const locks = createLockManager({ knex: db.knex });
    const work = locks.withWriteLock('otel:lost', async (trx, grant) => {
      await trx('account').where({ id: 1 }).increment('balance', 1);
      expect(await locks.forceRelease(grant.id)).toBe(true);
    });
    await expect(work).rejects.toBeInstanceOf(LockLostError);
    await flush();
    const fence = one(SPANS.fence);
    const hold = one(SPANS.hold);
    expect(fence.status.code).toBe(SpanStatusCode.ERROR);
    expect(fence.attributes).toMatchObject({ 'rwlock.outcome': 'lost', 'error.type': 'LockLostError' });
    expect(hold.status.code).toBe(SpanStatusCode.ERROR);
    expect(hold.attributes['error.type']).toBe('LockLostError');
    expect(hold.events.map((e) => e.name)).toEqual(['exception']);
    // The operator's release, made inside the callback, is a child of the hold too.
    const release = one(SPANS.release);
    expect(release.attributes).toMatchObject({ 'rwlock.released_by': 'operator', 'rwlock.released': true });
    expect(parentOf(release)).toBe(hold.spanContext().spanId);
  });

  it('a business error: the hold is ERROR, released by the holder, and the release span is its child', async () => {
    await instrument();
    const locks = createLockManager({ knex: db.knex });
    const boom = new Error('insufficient funds');
    await expect(locks.withWriteLock('otel:rollback', () => Promise.reject(boom))).rejects.toBe(boom);
    await flush();
    const hold = one(SPANS.hold);
    expect(hold.status).toEqual({ code: SpanStatusCode.ERROR, message: 'insufficient funds' });
    expect(hold.attributes).toMatchObject({ 'rwlock.released_by': 'holder', 'error.type': 'Error' });
    expect(parentOf(one(SPANS.release))).toBe(hold.spanContext().spanId);
    expect(named(SPANS.fence)).toEqual([]);
  });

  it('reap: a span with its counts; the reaped holder learns it, and its hold ends as lost to the reaper', async () => {
    await instrument();
    const locks = createLockManager({ knex: db.knex });
    const grant = await locks.tryAcquireRead('otel:reap');
    await backdate(db.knex, grant!.id, 3_600_000);
    await reapStaleGrants(db.knex, { staleAfterMs: 60_000, batchSize: 7 });
    await flush();
    expect(one(SPANS.reap).attributes).toMatchObject({
      'rwlock.reap.stale_after_ms': 60_000,
      'rwlock.reap.batch_size': 7,
      'rwlock.reap.reaped': 1,
      'rwlock.reap.failed': 0,
    });
    expect(named(SPANS.hold)).toEqual([]); // still open: this process has not learnt it yet
    expect(await grant!.release()).toBe(false);
    await flush();
    const hold = one(SPANS.hold);
    expect(hold.attributes).toMatchObject({ 'rwlock.released_by': 'reaper', 'error.type': 'LockLostError' });
    expect(hold.status.code).toBe(SpanStatusCode.ERROR);
    expect(hold.events.map((e) => e.name)).toEqual(['exception']);
  });

  it('withWriteGrant: the hold span ends as commit after a fence, as holder after a fence rolled back', async () => {
    await instrument();
    const locks = createLockManager({ knex: db.knex });
    await locks.withWriteGrant('otel:grant', (grant) =>
      db.knex.transaction(async (trx) => {
        await trx('account').where({ id: 1 }).increment('balance', 1);
        await grant.fence(fromKnex(trx));
      }),
    );
    await flush();
    expect(one(SPANS.hold).attributes).toMatchObject({ 'rwlock.released_by': 'commit' });
    expect(one(SPANS.hold).status.code).toBe(SpanStatusCode.UNSET);
    exporter.reset();
    const undone = new Error('roll back after the fence');
    await locks.withWriteGrant('otel:grant', (grant) =>
      db.knex
        .transaction(async (trx) => {
          await grant.fence(fromKnex(trx));
          throw undone;
        })
        .catch((e: unknown) => expect(e).toBe(undone)),
    );
    await flush();
    expect(one(SPANS.hold).attributes).toMatchObject({ 'rwlock.released_by': 'holder' });
  });

  it('disable(): no more lock spans, and the knex query span inside the callback has no lock parent (negative control)', async () => {
    const h = await instrument();
    h.disable();
    h.disable(); // idempotent
    const locks = createLockManager({ knex: db.knex });
    const { request } = await inRequest(() =>
      locks.withWriteLock('otel:account:1', (trx) => trx('account').where({ id: 1 }).increment('balance', 1)),
    );
    await flush();
    expect(lockSpans()).toEqual([]);
    const [query] = accountQueries();
    expect(query, 'knex is still instrumented').toBeDefined();
    expect(parentOf(query!)).toBe(request.spanContext().spanId);
  });

  it('a fence of your own ends the hold at the fence; the tracer comes from the global provider when none is given', async () => {
    trace.setGlobalTracerProvider(provider);
    try {
      handle = instrumentLocks({ dbSystem: 'mariadb' });
      const locks = createLockManager({ knex: db.knex });
      const grant = (await locks.acquireWrite('otel:manual'))!;
      await db.knex.transaction(async (trx) => {
        await trx('account').where({ id: 1 }).increment('balance', 1);
        await grant.fence(async (sql, params) => {
          const [result] = (await trx.raw(sql, params)) as unknown as [{ affectedRows: number }];
          return result.affectedRows;
        });
      });
      grant.committed();
      await flush();
      const hold = one(SPANS.hold);
      expect(hold.attributes).toMatchObject({ 'rwlock.released_by': 'fence', 'db.system.name': 'mariadb' });
      expect(hold.status.code).toBe(SpanStatusCode.UNSET);
      expect(one(SPANS.fence).attributes['rwlock.outcome']).toBe('released');
    } finally {
      trace.disable();
    }
  });

  it("with no knex option: the spans name the manager's server; a group's work runs in its first grant's hold", async () => {
    const h = instrumentLocks({ tracerProvider: provider });
    handle = h;
    const locks = createLockManager({ knex: db.knex });
    const { request } = await inRequest(() =>
      locks.withLocks({ write: ['otel:group:a', 'otel:group:b'] }, async (trx, grants) => {
        await trx('account').where({ id: 1 }).increment('balance', 1);
        return grants;
      }),
    );
    await h.ready;
    await flush();
    const [holdA, holdB] = named(SPANS.hold);
    // As withWriteLock's: the fence is in the commit, which ends each hold.
    expect(holdA!.attributes).toMatchObject({ 'rwlock.released_by': 'commit' });
    expect(holdB!.attributes).toMatchObject({ 'rwlock.released_by': 'commit' });
    expect(parentOf(accountQueries()[0]!)).toBe(holdA!.spanContext().spanId);
    expect(named(SPANS.fence).map(parentOf)).toEqual([holdA!.spanContext().spanId, holdA!.spanContext().spanId]);
    expect(parentOf(holdA!)).toBe(request.spanContext().spanId);
    for (const span of lockSpans())
      expect(span.attributes, span.name).toMatchObject({ 'db.system.name': dbSystem, 'db.namespace': db.name });
  });

  it("inHoldWrappers with grants taken apart: the work runs in the first grant's hold", async () => {
    const h = instrumentLocks({ tracerProvider: provider });
    handle = h;
    const locks = createLockManager({ knex: db.knex });
    const [a, b] = [(await locks.acquireWrite('otel:apart:a'))!, (await locks.acquireWrite('otel:apart:b'))!];
    await inHoldWrappers([a, b], async () => {
      await db.knex('account').where({ id: 1 }).increment('balance', 1);
      await db.knex.transaction(async (trx) => {
        await a.fence(fromKnex(trx));
        await b.fence(fromKnex(trx));
      });
    });
    await flush();
    const [holdA, holdB] = named(SPANS.hold);
    expect(holdA!.attributes).toMatchObject({ 'rwlock.grant.id': a.id, 'rwlock.released_by': 'commit' });
    expect(holdB!.attributes).toMatchObject({ 'rwlock.grant.id': b.id, 'rwlock.released_by': 'commit' });
    expect(parentOf(accountQueries()[0]!)).toBe(holdA!.spanContext().spanId);
  });

  for (const group of [false, true])
    it(`a ${group ? 'two-resource section' : 'section'}'s work runs in its hold scope: a query is the hold's child, the hold ends at its commit`, async () => {
      const h = instrumentLocks({ tracerProvider: provider, knex: db.knex });
      handle = h;
      await h.ready;
      const locks = createLockManager({ knex: db.knex });
      const work = async (trx: Knex.Transaction): Promise<void> => {
        await trx('account').where({ id: 1 }).increment('balance', 1);
        await flush();
        expect(named(SPANS.hold), 'the hold outlasts the work: the commit is still to come').toEqual([]);
      };
      const { request } = await inRequest(() =>
        group
          ? locks.withLocks({ write: ['otel:section:a'], read: ['otel:section:b'] }, work, { section: true })
          : locks.withWriteLock('otel:section', work, { section: true }),
      );
      await flush();
      const holds = named(SPANS.hold);
      expect(holds).toHaveLength(group ? 2 : 1);
      const hold = holds[0]!;
      expect(parentOf(accountQueries()[0]!)).toBe(hold.spanContext().spanId);
      expect(parentOf(hold)).toBe(request.spanContext().spanId);
      for (const s of holds) {
        expect(s.attributes).toMatchObject({ 'rwlock.released_by': 'fence', 'db.namespace': db.name });
        expect(s.status.code).toBe(SpanStatusCode.UNSET);
      }
      expect(named(SPANS.fence).map((s) => s.attributes['rwlock.outcome'])).toEqual(
        group ? ['released', 'released'] : ['released'],
      );
    });

  it('refuses bad options with InvalidOptionsError', () => {
    expect(() => instrumentLocks(null as never)).toThrow(InvalidOptionsError);
    expect(() => instrumentLocks({ tracerprovider: provider } as never)).toThrow(InvalidOptionsError);
    expect(() => instrumentLocks({ tracerProvider: {} as never })).toThrow(InvalidOptionsError);
    expect(() => instrumentLocks({ dbSystem: 'postgresql' as never })).toThrow(InvalidOptionsError);
    expect(() => instrumentLocks({ recordResourceIds: 'yes' as never })).toThrow(InvalidOptionsError);
    expect(() => instrumentLocks({ knex: {} as never })).toThrow(InvalidOptionsError);
    expect(() => instrumentLocks({ meterProvider: {} as never })).toThrow(InvalidOptionsError);
  });
});

/** A reader the test pulls from: what a Prometheus exporter of the SDK does at each scrape. */
class PullReader extends MetricReader {
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

describe('leadership', () => {
  it('a span per term from its election to its end, and a gauge of campaigns by name and state', async () => {
    const reader = new PullReader();
    const meterProvider = new MeterProvider({ readers: [reader] });
    await instrument({ meterProvider });
    const NAME = 'otel-leader';
    /** The gauge's points for NAME, state → value, as the SDK collects them. */
    const gauge = async (): Promise<Record<string, number>> => {
      const { resourceMetrics } = await reader.collect();
      const points = resourceMetrics.scopeMetrics
        .flatMap((m) => m.metrics)
        .filter((m): m is GaugeMetricData => m.descriptor.name === 'rwlock.campaigns')
        .flatMap((m) => m.dataPoints)
        .filter((p) => p.attributes['rwlock.leader.name'] === NAME);
      return Object.fromEntries(points.map((p) => [String(p.attributes['rwlock.leader.state']), p.value]));
    };
    const [a, b, op] = ['otel@a', 'otel@b', 'otel@ops'].map((owner) => createLockManager({ knex: db.knex, owner }));
    const aTerms: Array<{ id: number }> = [];
    const bTerms: Array<{ id: number }> = [];
    const ca = await a!.campaign(NAME, (t) => void aTerms.push(t), { leaseMs: 30_000 });
    const cb = await b!.campaign(NAME, (t) => void bTerms.push(t), { leaseMs: 30_000, renewEveryMs: 200 });
    await expect.poll(() => aTerms.length).toBe(1);
    expect(await gauge()).toEqual({ leading: 1, campaigning: 1 });
    await ca.close(); // B leads at once
    await expect.poll(() => bTerms.length).toBe(1);
    expect(await gauge()).toEqual({ leading: 1, campaigning: 0 });
    // An operator releases B's term: B finds it lost at its next renewal and leads again.
    expect(await op!.forceRelease(bTerms[0]!.id, { reason: 'test' })).toBe(true);
    await expect.poll(() => bTerms.length).toBe(2);
    await cb.close();
    expect(await gauge()).toEqual({ leading: 0, campaigning: 0 });
    await flush();
    const terms = named(SPANS.term);
    expect(
      terms.map((t) => [
        t.attributes['rwlock.term.id'],
        t.attributes['rwlock.owner'],
        t.attributes['rwlock.term.ended'],
        t.status.code,
      ]),
    ).toEqual([
      [aTerms[0]!.id, 'otel@a', 'closed', SpanStatusCode.UNSET],
      [bTerms[0]!.id, 'otel@b', 'lost', SpanStatusCode.ERROR],
      [bTerms[1]!.id, 'otel@b', 'closed', SpanStatusCode.UNSET],
    ]);
    for (const t of terms) {
      expect(t.attributes['rwlock.leader.name']).toBe(NAME);
      // A root span: a term outlives whatever request started its campaign.
      expect(parentOf(t)).toBeUndefined();
      expect(nanos(t.endTime)).toBeGreaterThan(nanos(t.startTime));
    }

    // Negative control: after disable(), a term makes no span and the gauge no longer moves (the
    // SDK keeps its last values: a campaign leads, and it still says 0).
    handle!.disable();
    exporter.reset();
    const cTerms: Array<{ id: number }> = [];
    const cc = await a!.campaign(NAME, (t) => void cTerms.push(t), { leaseMs: 30_000 });
    await expect.poll(() => cTerms.length).toBe(1);
    expect(await gauge()).toEqual({ leading: 0, campaigning: 0 });
    await cc.close();
    await flush();
    expect(named(SPANS.term)).toEqual([]);
    await meterProvider.shutdown();
    for (const m of [a, b, op]) await m!.close();
  });
});

describe('two managers on two servers in one process', () => {
  let other: FoundServer | undefined;
  let otherKnex: Knex | undefined;
  let otherSystem: string;
  const otherDb = `rwl_otel_other_${process.pid}`;

  beforeAll(async () => {
    // The other kind of server than the file's: MySQL 9.7 beside MariaDB, MariaDB beside MySQL.
    otherSystem = dbSystem === 'mariadb' ? 'mysql' : 'mariadb';
    other = await startFlavour(otherSystem === 'mysql' ? 'mysql-9.7' : 'mariadb-10.11');
    await createDatabase(other.url, otherDb);
    otherKnex = connectKnex(other.url, otherDb);
    await migrate(otherKnex, { procedures: TEST_PROCEDURES });
    await otherKnex.raw('CREATE TABLE account (id INT PRIMARY KEY, balance INT NOT NULL)');
    await otherKnex.raw('INSERT INTO account VALUES (1, 100)');
  }, 600_000);
  afterAll(async () => {
    await otherKnex?.destroy();
    if (other) await dropDatabase(other.url, otherDb).finally(() => other!.stop());
  }, 120_000);

  it("every span names its own manager's server, with no knex given to instrumentLocks", async () => {
    const h = instrumentLocks({ tracerProvider: provider });
    handle = h;
    const tenants = [
      { knex: db.knex, url: db.url, database: db.name, system: dbSystem },
      { knex: otherKnex!, url: other!.url, database: otherDb, system: otherSystem },
    ].map((t) => ({
      ...t,
      locks: createLockManager({ knex: t.knex }),
      expected: {
        'db.system.name': t.system,
        'server.address': parseMysqlUrl(t.url).host,
        'server.port': parseMysqlUrl(t.url).port,
        'db.namespace': t.database,
      },
    }));
    // The two label sets differ in every way the check could miss (negative control of the check).
    const [first, second] = tenants.map((t) => t.expected);
    for (const key of ['db.system.name', 'server.port', 'db.namespace'] as const)
      expect(first![key], key).not.toEqual(second![key]);

    // Both at once, as two tenants' requests in one process; each in a trace of its own.
    const traces = await Promise.all(
      tenants.map(async ({ locks, knex }) => {
        const { request } = await inRequest(async () => {
          await locks.withWriteLock('otel:two', (trx) => trx('account').where({ id: 1 }).increment('balance', 1));
          await (await locks.tryAcquireRead('otel:two'))!.release();
          const held = (await locks.tryAcquireWrite('otel:two:held'))!;
          await locks.forceRelease(held.id, { reason: 'otel test' });
          expect(await held.release()).toBe(false); // the holder learns it: its hold ends
          await reapStaleGrants(knex, { staleAfterMs: 60_000 });
        });
        return request.spanContext().traceId;
      }),
    );
    await h.ready;
    await flush();
    for (const [i, tenant] of tenants.entries()) {
      const mine = lockSpans().filter((s) => s.spanContext().traceId === traces[i]);
      expect(mine.map((s) => s.name).sort()).toEqual(
        [
          SPANS.acquire,
          SPANS.acquire,
          SPANS.acquire,
          SPANS.hold,
          SPANS.hold,
          SPANS.hold,
          SPANS.fence,
          SPANS.release,
          SPANS.release,
          SPANS.release,
          SPANS.reap,
        ].sort(),
      );
      for (const span of mine) expect(span.attributes, `${span.name} of server ${i}`).toMatchObject(tenant.expected);
    }
  });
});
