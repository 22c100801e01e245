// `mysql-rwlock/prometheus`: Prometheus metrics for the lock, on a prom-client registry. A subpath of
// its own so that only those who import it need prom-client (an optional peer dependency).
import diagnostics from 'node:diagnostics_channel';
import type { Knex } from 'knex';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { withConnection } from '../sql/connection.js';
import { InvalidOptionsError, LockLostError } from '../errors.js';
import { acquireOutcome } from './outcome.js';
import type { Grant } from '../contract/api.js';
import { knexOption, optionsObject, staleAfterOption, keysOf } from '../options.js';
import { lockStats, type LockStats } from '../sql/operate.js';
import { LOST_BY } from '../types.js';
import { trackCampaigns } from './campaign-states.js';
import {
  CHANNELS,
  type AcquireContext,
  type FenceContext,
  type LostContext,
  type ReapContext,
  type ReleaseContext,
} from '../contract/channels.js';

export interface LockMetricsOptions {
  /** The prom-client registry to register on (`new Registry()`, or prom-client's `register`). */
  registry: Registry;
  /** Reads the gauges of live and stale grants and waiting writers from this database at scrape time; without it there are no gauges. */
  knex?: Knex;
  /** Age from which a live grant counts as stale in `mysql_rwlock_stale_grants`. @defaultValue `DEFAULTS.staleAfterMs`, the lock's default */
  staleAfterMs?: number;
}

export type { AcquireOutcome } from './outcome.js';

/** The metric names, for dashboards and alerts. */
export const METRICS = Object.freeze({
  acquireWait: 'mysql_rwlock_acquire_wait_seconds',
  hold: 'mysql_rwlock_hold_seconds',
  lost: 'mysql_rwlock_lost_grants_total',
  fenceRefusals: 'mysql_rwlock_fence_refusals_total',
  reaped: 'mysql_rwlock_reaped_grants_total',
  reapRuns: 'mysql_rwlock_reap_runs_total',
  liveGrants: 'mysql_rwlock_live_grants',
  staleGrants: 'mysql_rwlock_stale_grants',
  waitingWriters: 'mysql_rwlock_waiting_writers',
  oldestGrantAge: 'mysql_rwlock_oldest_grant_age_seconds',
  databaseUp: 'mysql_rwlock_gauges_up',
  campaigns: 'mysql_rwlock_campaigns',
} as const);

const WAIT_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const HOLD_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 600];

/**
 * Registers the lock's metrics on `registry` and subscribes to the tracing channels: everything
 * this process's lock managers and reaper calls do is counted from then on. No label carries a
 * resource id (unbounded cardinality), but for the campaigns gauge's `name`: the names an
 * application campaigns for are its own few. `unregister()` removes the metrics and the subscriptions.
 */
export function registerLockMetrics(options: LockMetricsOptions): { unregister(): void } {
  const o = optionsObject(
    'registerLockMetrics',
    options,
    keysOf<LockMetricsOptions>()(['registry', 'knex', 'staleAfterMs']),
  );
  const registry = o.registry as Registry | undefined;
  if (typeof registry?.registerMetric !== 'function' || typeof registry.getSingleMetric !== 'function') {
    throw new InvalidOptionsError('registry must be a prom-client Registry');
  }
  if (registry.getSingleMetric(METRICS.acquireWait))
    throw new InvalidOptionsError('registry: the mysql-rwlock metrics are already registered on it');
  const knex = o.knex === undefined ? undefined : knexOption('knex', o.knex);
  const staleAfterMs = staleAfterOption(o.staleAfterMs);
  const registers = [registry];
  const metrics = eventMetrics(registers);
  const names: string[] = [
    METRICS.acquireWait,
    METRICS.hold,
    METRICS.lost,
    METRICS.fenceRefusals,
    METRICS.reaped,
    METRICS.reapRuns,
    METRICS.campaigns,
  ];
  if (knex) names.push(...registerGauges(knex, staleAfterMs, registers));
  const unsubscribe = subscribeMetrics(metrics);
  const campaigns = trackCampaigns();
  new Gauge({
    name: METRICS.campaigns,
    help: "This process's campaigns for leadership (locks.campaign), by name and state (leading, campaigning): who campaigns is recorded in no database, so the fleet's count is the sum over its processes",
    labelNames: ['name', 'state'],
    registers,
    collect() {
      this.reset();
      for (const c of campaigns.counts()) this.set({ name: c.name, state: c.state }, c.count);
    },
  });
  return {
    unregister() {
      unsubscribe();
      campaigns.stop();
      for (const name of names) registry.removeSingleMetric(name);
    },
  };
}

/** The metrics counted from the channels' events, each known series exported at 0. */
function eventMetrics(registers: Registry[]) {
  const acquireWait = new Histogram({
    name: METRICS.acquireWait,
    help: 'Time from an acquire call to its grant or failure, by mode, outcome (granted, busy: one attempt found it held, timeout, aborted, error) and section (true: the take of a one-commit section)',
    labelNames: ['mode', 'outcome', 'section'],
    buckets: WAIT_BUCKETS,
    registers,
  });
  const hold = new Histogram({
    name: METRICS.hold,
    help: "Time from grant to the holder's release or fenced commit, by mode and section (true: a one-commit section, from its take to its commit)",
    labelNames: ['mode', 'section'],
    buckets: HOLD_BUCKETS,
    registers,
  });
  const lost = new Counter({
    name: METRICS.lost,
    help: `Grants this process learned it lost, by who released them (${LOST_BY.join(', ')})`,
    labelNames: ['released_by'],
    registers,
  });
  const fenceRefusals = new Counter({
    name: METRICS.fenceRefusals,
    help: 'Fenced commits refused because the grant was no longer live',
    labelNames: ['mode'],
    registers,
  });
  const reaped = new Counter({
    name: METRICS.reaped,
    help: 'Stale grants released by reapStaleGrants in this process',
    labelNames: ['mode'],
    registers,
  });
  const reapRuns = new Counter({
    name: METRICS.reapRuns,
    help: 'reapStaleGrants calls in this process, by outcome (ok: every stale grant reaped or skipped as busy; failed)',
    labelNames: ['outcome'],
    registers,
  });
  // Every known series exported from the start at 0, so a rate() or an alert sees the first event.
  for (const by of LOST_BY) lost.inc({ released_by: by }, 0);
  for (const mode of ['write', 'read', 'permit']) {
    fenceRefusals.inc({ mode }, 0);
    reaped.inc({ mode }, 0);
  }
  for (const outcome of ['ok', 'failed']) reapRuns.inc({ outcome }, 0);
  return { acquireWait, hold, lost, fenceRefusals, reaped, reapRuns };
}

/** The gauges read from the database at scrape time; their names. */
function registerGauges(knex: Knex, staleAfterMs: number, registers: Registry[]): string[] {
  const names: string[] = [];
  // All gauges of one scrape share one read: prom-client collects them concurrently.
  let inflight: Promise<LockStats | null> | null = null;
  const read = (): Promise<LockStats | null> =>
    (inflight ??= withConnection(knex, (conn) => lockStats(conn, staleAfterMs))
      .then(
        (g) => g,
        () => null,
      )
      .finally(() => {
        inflight = null;
      }));
  const gauge = (
    name: string,
    help: string,
    set: (g: Gauge, value: LockStats) => void,
    labelNames: string[] = [],
  ): void => {
    new Gauge({
      name,
      help,
      labelNames,
      registers,
      async collect() {
        const value = await read();
        this.reset();
        if (value) set(this, value);
      },
    });
    names.push(name);
  };
  gauge(
    METRICS.liveGrants,
    'Live grants in the database, by mode',
    (g, v) => {
      g.set({ mode: 'write' }, v.live.write);
      g.set({ mode: 'read' }, v.live.read);
      g.set({ mode: 'permit' }, v.live.permit);
    },
    ['mode'],
  );
  gauge(
    METRICS.staleGrants,
    `Live grants older than ${staleAfterMs} ms and not under an extended lease: the reaper's next work`,
    (g, v) => g.set(v.stale),
  );
  gauge(METRICS.waitingWriters, 'Held resources a writer is waiting for', (g, v) => g.set(v.waitingWriters));
  gauge(METRICS.oldestGrantAge, 'Age of the oldest live grant, database clock', (g, v) =>
    g.set((v.oldestAgeMs ?? 0) / 1000),
  );
  new Gauge({
    name: METRICS.databaseUp,
    help: '1 when the gauges above could be read from the database at this scrape, else 0 (and they are absent)',
    registers,
    async collect() {
      this.set((await read()) ? 1 : 0);
    },
  });
  names.push(METRICS.databaseUp);
  return names;
}

/** Counts the events of every lock manager and reaper call of this process; returns the unsubscribe. */
function subscribeMetrics(metrics: ReturnType<typeof eventMetrics>): () => void {
  const { acquireWait, hold, lost, fenceRefusals, reaped, reapRuns } = metrics;
  const startedAt = new WeakMap<object, number>();
  const grantedAt = new WeakMap<Grant, number>();
  const seconds = (from: number | undefined): number | undefined =>
    from === undefined ? undefined : (performance.now() - from) / 1000;
  const stamp = (c: object): void => void startedAt.set(c, performance.now());
  const none = (): void => undefined;

  const subscriptions: Array<{ channel: string; handlers: diagnostics.TracingChannelSubscribers<object> }> = [];
  const subscribe = <C extends object>(
    channel: string,
    handlers: Partial<diagnostics.TracingChannelSubscribers<C>>,
  ): void => {
    const full = {
      start: none,
      end: none,
      asyncStart: none,
      asyncEnd: none,
      error: none,
      ...handlers,
    } as diagnostics.TracingChannelSubscribers<object>;
    diagnostics.tracingChannel(channel).subscribe(full);
    subscriptions.push({ channel, handlers: full });
  };
  const holdEnded = (grant: Grant | undefined, section = false): void => {
    const held = grant && seconds(grantedAt.get(grant));
    if (grant && held !== undefined) {
      hold.observe({ mode: grant.mode, section: String(section) }, held);
      grantedAt.delete(grant);
    }
  };

  subscribe<AcquireContext>(CHANNELS.acquire, {
    start: stamp,
    asyncEnd: (c) => {
      const waited = seconds(startedAt.get(c));
      if (waited !== undefined)
        acquireWait.observe({ mode: c.mode, outcome: acquireOutcome(c), section: String(c.section === true) }, waited);
      if (c.result) grantedAt.set(c.result, performance.now());
    },
  });
  subscribe<FenceContext>(CHANNELS.fence, {
    asyncEnd: (c) => {
      if (c.error === undefined) holdEnded(c.grant, c.section === true);
      else if (c.error instanceof LockLostError) fenceRefusals.inc({ mode: c.mode });
    },
  });
  subscribe<ReleaseContext>(CHANNELS.release, {
    asyncEnd: (c) => {
      if (c.by === 'holder' && c.result === true) holdEnded(c.grant);
    },
  });
  subscribe<ReapContext>(CHANNELS.reap, {
    asyncEnd: (c) => {
      reapRuns.inc({ outcome: c.error === undefined && c.result?.failed === 0 ? 'ok' : 'failed' });
      for (const g of c.result?.grants ?? []) reaped.inc({ mode: g.mode });
    },
  });
  const onLost = (message: unknown): void => {
    const m = message as LostContext;
    lost.inc({ released_by: m.releasedBy });
    grantedAt.delete(m.grant);
  };
  diagnostics.subscribe(CHANNELS.lost, onLost);

  return () => {
    for (const s of subscriptions.splice(0)) diagnostics.tracingChannel(s.channel).unsubscribe(s.handlers);
    diagnostics.unsubscribe(CHANNELS.lost, onLost);
  };
}
