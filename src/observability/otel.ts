// `mysql-rwlock/otel`: OpenTelemetry spans for the lock, built on the diagnostics channels. A subpath
// of its own so that only those who import it need @opentelemetry/api (an optional peer dependency).
import diagnostics from 'node:diagnostics_channel';
import {
  context as otelContext,
  metrics,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type MeterProvider,
  type Span,
  type Tracer,
  type TracerProvider,
} from '@opentelemetry/api';
import type { Knex } from 'knex';
import { InvalidOptionsError, LockLostError, LockTimeoutError } from '../errors.js';
import type { Grant } from '../contract/api.js';
import { booleanOption, knexOption, optionsObject, keysOf } from '../options.js';
import { addHoldWrapper } from '../contract/hold-wrappers.js';
import { endWithServer, serverAttributesOf, SpanServers, type SpanServer } from './otel-servers.js';
import { acquireOutcome } from './outcome.js';
import { instrumentLeadership, TERM_SPAN } from './otel-leader.js';
import {
  CHANNELS,
  type AcquireContext,
  type FenceContext,
  type LostContext,
  type ReapContext,
  type ReleaseContext,
} from '../contract/channels.js';

export interface LockInstrumentationOptions {
  /** The provider to take the tracer from. @defaultValue the global provider (`trace.getTracerProvider()`) */
  tracerProvider?: TracerProvider;
  /**
   * Labels the spans of a call that names no knex of its own (a one-commit section's, for now), and
   * has its server's kind asked at once. Not needed otherwise: every span takes `server.address`,
   * `server.port`, `db.namespace` and `db.system.name` from the knex of the manager (or the
   * `reapStaleGrants` call) that made it.
   */
  knex?: Knex;
  /**
   * `db.system.name` of every span, instead of asking each server once (`SELECT VERSION()`): only
   * when every manager's server is of that kind.
   */
  dbSystem?: 'mysql' | 'mariadb';
  /**
   * Records the resource id as `rwlock.resource.id` on acquire and hold spans. Off by default: a
   * resource id may name a customer or an account, and it makes the attribute's cardinality unbounded.
   * @defaultValue false
   */
  recordResourceIds?: boolean;
  /**
   * Where the meter of the campaigns gauge (`rwlock.campaigns`) comes from.
   * @defaultValue the global provider (`metrics.getMeterProvider()`)
   */
  meterProvider?: MeterProvider;
}

/** What {@link instrumentLocks} returns. */
export interface LockInstrumentation {
  /**
   * Resolves once `db.system.name` is known for every server met so far (asked once per knex, at
   * its first span; never rejects: a failed lookup leaves the attribute out). A span that ends
   * before its server's answer is ended when the answer comes, with the time it ended at.
   */
  readonly ready: Promise<void>;
  /** Stops making spans: unsubscribes from the channels. Spans still open are left unended. Idempotent. */
  disable(): void;
}

/** The span names. */
export const SPANS = Object.freeze({
  acquire: 'rwlock.acquire',
  hold: 'rwlock.hold',
  fence: 'rwlock.fence',
  release: 'rwlock.release',
  reap: 'rwlock.reap',
  /** A term of leadership, from its election to its end (a root span). */
  term: TERM_SPAN,
} as const);

/** The instrumentation scope name spans are recorded under. */
export const TRACER_NAME = 'mysql-rwlock';

/** A grant's hold span, and how it ended when the scoped call around it has not returned yet. */
interface Hold {
  span: Span;
  server: SpanServer | undefined;
  /** A one-commit section's: its commit (a fence event) ends it, also inside the hold scope. */
  section: boolean;
  scoped: boolean;
  releasedBy?: string;
  lost?: boolean;
  /** A scoped call's work fenced the grant: the call's success means the fence committed. */
  fenced?: boolean;
}

// Longer than 80 lines on purpose: the channel handlers, the hold scope and disable() share this
// instrumentation's open spans and holds in one closure, so that disable() undoes exactly what it set up.
/**
 * Turns on OpenTelemetry spans for every lock manager and reaper call in this process:
 * `rwlock.acquire` (its duration is the wait; `rwlock.outcome` granted, busy, timeout, aborted or
 * error), `rwlock.hold` (from the grant to its release, fenced commit, or loss), `rwlock.fence`,
 * `rwlock.release`, `rwlock.reap`, and `rwlock.term` (a term of leadership, with a gauge of this
 * process's campaigns, `rwlock.campaigns`, on `meterProvider`). Inside `withWriteLock` and `withReadLock` the hold span is the
 * active context, so spans the callback's queries make (knex's or mysql2's instrumentation) are its
 * children. Failures set status ERROR, `error.type` and an exception event. Each span names the
 * server and database of the manager (or `reapStaleGrants` call) that made it: `db.system.name`,
 * `server.address`, `server.port`, `db.namespace`, so managers on several servers are told apart.
 *
 * @example
 * ```ts
 * import { instrumentLocks } from 'mysql-rwlock/otel';
 *
 * const tracing = instrumentLocks(); // the global tracer provider; every lock manager in the process
 * // ... later
 * tracing.disable();
 * ```
 */
export function instrumentLocks(options?: LockInstrumentationOptions): LockInstrumentation {
  const o = optionsObject(
    'instrumentLocks',
    options,
    keysOf<LockInstrumentationOptions>()(['tracerProvider', 'knex', 'dbSystem', 'recordResourceIds', 'meterProvider']),
  );
  const provider = o.tracerProvider as TracerProvider | undefined;
  if (provider !== undefined && typeof provider.getTracer !== 'function')
    throw new InvalidOptionsError('tracerProvider must be an OpenTelemetry TracerProvider');
  const meterProvider = o.meterProvider as MeterProvider | undefined;
  if (meterProvider !== undefined && typeof meterProvider.getMeter !== 'function')
    throw new InvalidOptionsError('meterProvider must be an OpenTelemetry MeterProvider');
  if (o.dbSystem !== undefined && o.dbSystem !== 'mysql' && o.dbSystem !== 'mariadb')
    throw new InvalidOptionsError(`dbSystem must be 'mysql' or 'mariadb', got ${JSON.stringify(o.dbSystem)}`);
  const fallbackKnex = o.knex === undefined ? undefined : knexOption('knex', o.knex);
  const withResourceIds = booleanOption('recordResourceIds', o.recordResourceIds, false);
  const tracer: Tracer = (provider ?? trace.getTracerProvider()).getTracer(TRACER_NAME);

  const servers = new SpanServers(o.dbSystem as string | undefined, fallbackKnex);
  const resource = (id: unknown): Attributes =>
    withResourceIds && typeof id === 'string' ? { 'rwlock.resource.id': id } : {};
  const start = (
    name: string,
    server: SpanServer | undefined,
    attributes: Attributes,
    parent: Context = otelContext.active(),
  ): Span =>
    tracer.startSpan(
      name,
      { kind: SpanKind.INTERNAL, attributes: { ...serverAttributesOf(server), ...attributes } },
      parent,
    );

  const holds = new WeakMap<Grant, Hold>();
  const finishHold = (hold: Hold, grant: Grant): void => {
    if (hold.releasedBy !== undefined) hold.span.setAttribute('rwlock.released_by', hold.releasedBy);
    if (hold.lost) hold.span.setStatus({ code: SpanStatusCode.ERROR, message: `grant ${grant.id} was lost` });
    endWithServer(hold.span, hold.server);
    holds.delete(grant);
  };
  /** The grant's hold ended: now, or when the scoped call around it returns. */
  const holdEnded = (grant: Grant | undefined, releasedBy: string, lost = false): void => {
    const hold = grant && holds.get(grant);
    if (!hold) return;
    hold.lost ||= lost;
    // A section's commit is its fence: the end of its hold, inside the hold scope or not.
    if (!hold.scoped || (hold.section && releasedBy === 'fence')) {
      hold.releasedBy = releasedBy;
      // The LockLostError the grant's signal aborted with, as the holder's next call would throw it.
      if (lost) recordError(hold.span, grant.signal.reason);
      finishHold(hold, grant);
    } else if (releasedBy === 'fence') {
      // In a scoped call the fence is not the end: its commit is, or a release after it failed.
      hold.fenced = true;
    } else {
      hold.releasedBy = releasedBy;
    }
  };

  const open = new WeakMap<object, { span: Span; server: SpanServer | undefined; parent: Context }>();
  const subscriptions: Array<{ channel: string; handlers: object }> = [];
  const subscribe = <C extends object>(
    channel: string,
    serverOfContext: (c: C) => SpanServer | undefined,
    startSpan: (c: C, server: SpanServer | undefined) => Span,
    ended: (c: C, span: Span, parent: Context, server: SpanServer | undefined) => void,
  ) => {
    const none = (): void => undefined;
    // All five events named, as the Prometheus collector does: the TracingChannel type asks for each.
    const handlers = {
      end: none,
      asyncStart: none,
      error: none,
      start: (c: C) => {
        const parent = otelContext.active();
        const server = serverOfContext(c);
        open.set(c, { span: startSpan(c, server), server, parent });
      },
      asyncEnd: (c: C) => {
        const entry = open.get(c);
        if (!entry) return;
        open.delete(c);
        const error = (c as { error?: unknown }).error;
        if (error !== undefined) recordError(entry.span, error);
        ended(c, entry.span, entry.parent, entry.server);
        endWithServer(entry.span, entry.server);
      },
    };
    diagnostics.tracingChannel(channel).subscribe(handlers as unknown as diagnostics.TracingChannelSubscribers<object>);
    subscriptions.push({ channel, handlers });
  };

  subscribe<AcquireContext>(
    CHANNELS.acquire,
    (c) => servers.ofCall(c.knex),
    (c, server) =>
      start(SPANS.acquire, server, {
        'rwlock.mode': c.mode,
        'rwlock.wait_limit_ms': c.waitMs,
        'rwlock.owner': c.owner,
        ...resource(c.resourceId),
      }),
    (c, span, parent, server) => {
      span.setAttribute('rwlock.outcome', acquireOutcome(c));
      // A busy pool told apart from a held lock and from a server down: one is not an outage.
      if (c.error instanceof LockTimeoutError) span.setAttribute('rwlock.waited_for', c.error.waitedFor);
      const grant = c.result;
      if (!grant) return;
      span.setAttribute('rwlock.grant.id', grant.id);
      servers.granted(grant, server);
      // The hold's parent is what was active when the acquire was called: the caller's span.
      holds.set(grant, {
        span: start(
          SPANS.hold,
          server,
          { 'rwlock.mode': grant.mode, 'rwlock.grant.id': grant.id, ...resource(grant.resourceId) },
          parent,
        ),
        server,
        section: c.section === true,
        scoped: false,
      });
    },
  );
  subscribe<FenceContext>(
    CHANNELS.fence,
    (c) => servers.ofCall(c.knex, c.grant),
    (c, server) => start(SPANS.fence, server, { 'rwlock.mode': c.mode, 'rwlock.grant.id': c.grantId }),
    (c, span) => {
      const refused = c.error instanceof LockLostError;
      span.setAttribute('rwlock.outcome', c.error === undefined ? 'released' : refused ? 'lost' : 'error');
      // A fence releases the grant in the caller's transaction; the caller commits next.
      if (c.error === undefined) holdEnded(c.grant, 'fence');
      // A section's commit failed: nothing was committed under its grant, whatever its work did.
      else if (c.section) {
        const hold = holds.get(c.grant);
        if (hold === undefined) return;
        recordError(hold.span, c.error);
        hold.lost ||= refused;
        finishHold(hold, c.grant);
      }
    },
  );
  subscribe<ReleaseContext>(
    CHANNELS.release,
    (c) => servers.ofCall(c.knex, c.grant),
    (c, server) => start(SPANS.release, server, { 'rwlock.grant.id': c.grantId, 'rwlock.released_by': c.by }),
    (c, span) => {
      if (c.result !== undefined) span.setAttribute('rwlock.released', c.result);
      if (c.by === 'holder' && c.result === true) holdEnded(c.grant, 'holder');
    },
  );
  subscribe<ReapContext>(
    CHANNELS.reap,
    (c) => servers.ofCall(c.knex),
    (c, server) =>
      start(SPANS.reap, server, {
        'rwlock.reap.stale_after_ms': c.staleAfterMs,
        'rwlock.reap.batch_size': c.batchSize,
      }),
    (c, span) => {
      if (!c.result) return;
      span.setAttributes({
        'rwlock.reap.reaped': c.result.reaped,
        'rwlock.reap.skipped': c.result.skipped,
        'rwlock.reap.failed': c.result.failed,
      });
    },
  );
  const onLost = (message: unknown): void => {
    const m = message as LostContext;
    holdEnded(m.grant, m.releasedBy, true);
  };
  diagnostics.subscribe(CHANNELS.lost, onLost);

  // The scoped call's work runs with the hold span active (a group's: its first grant's, the one a
  // group's errors name); each hold ends when the call returns, a section's at its commit.
  const removeScope = addHoldWrapper(<T>(grants: readonly Grant[], run: () => Promise<T>): Promise<T> => {
    const held = grants.flatMap((grant) => {
      const hold = holds.get(grant);
      return hold ? [{ grant, hold }] : [];
    });
    if (held.length === 0) return run();
    for (const { hold } of held) hold.scoped = true;
    return otelContext.with(trace.setSpan(otelContext.active(), held[0]!.hold.span), run).then(
      (value) => {
        for (const { grant, hold } of held) {
          if (hold.section) continue;
          // Resolved after a fence: the business transaction, fence included, committed, unless the
          // holder released the grant after it (withWriteGrant: that transaction rolled back). Without
          // a fence (a scoped form whose work need not fence), the grant was released.
          hold.releasedBy ??= 'commit';
          finishHold(hold, grant);
        }
        return value;
      },
      (error: unknown) => {
        for (const { grant, hold } of held) {
          if (!holds.has(grant)) continue; // a section's commit failed: its fence event ended it
          recordError(hold.span, error);
          if (error instanceof LockLostError && (held.length === 1 || error.grantId === grant.id)) hold.lost = true;
          finishHold(hold, grant);
        }
        throw error;
      },
    );
  });

  // Terms and campaigns: the term spans and the gauge `rwlock.campaigns`, from the leader channel.
  const leadership = instrumentLeadership(tracer, (meterProvider ?? metrics.getMeterProvider()).getMeter(TRACER_NAME));

  let enabled = true;
  return {
    get ready() {
      return servers.ready();
    },
    disable() {
      if (!enabled) return;
      enabled = false;
      removeScope();
      leadership.disable();
      for (const s of subscriptions.splice(0))
        diagnostics.tracingChannel(s.channel).unsubscribe(s.handlers as diagnostics.TracingChannelSubscribers<object>);
      diagnostics.unsubscribe(CHANNELS.lost, onLost);
    },
  };
}

/** Status ERROR, `error.type`, and an exception event. */
function recordError(span: Span, error: unknown): void {
  const type = error instanceof Error ? error.name : typeof error;
  const message = error instanceof Error ? error.message : safeString(error);
  span.setAttribute('error.type', type);
  span.recordException(error instanceof Error ? error : { name: type, message });
  span.setStatus({ code: SpanStatusCode.ERROR, message });
}

function safeString(value: unknown): string {
  try {
    return String(value);
  } catch {
    return 'a value that cannot be shown';
  }
}
