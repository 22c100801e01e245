// `mysql-rwlock/otel`: OpenTelemetry spans for the lock, built on the diagnostics channels. A subpath
// of its own so that only those who import it need @opentelemetry/api (an optional peer dependency).
import diagnostics from 'node:diagnostics_channel';
import {
  context as otelContext,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
  type Tracer,
  type TracerProvider,
} from '@opentelemetry/api';
import type { Knex } from 'knex';
import { InvalidOptionsError, LockLostError } from '../errors.js';
import type { Grant } from '../lock/api.js';
import { booleanOption, knexOption, optionsObject } from '../options.js';
import { parseConnectionUrl } from '../sql/connection-url.js';
import { addHoldScope } from './hold-scope.js';
import { acquireOutcome } from './outcome.js';
import {
  CHANNELS,
  type AcquireContext,
  type FenceContext,
  type LostContext,
  type ReapContext,
  type ReleaseContext,
} from './tracing.js';

export interface LockInstrumentationOptions {
  /** The provider to take the tracer from. @defaultValue the global provider (`trace.getTracerProvider()`) */
  tracerProvider?: TracerProvider;
  /**
   * The knex instance the lock managers use: its connection settings give `server.address`,
   * `server.port` and `db.namespace`, and one `SELECT VERSION()` tells `db.system.name` (unless
   * `dbSystem` says it). Without it, spans carry only what `dbSystem` says.
   */
  knex?: Knex;
  /** `db.system.name` of every span, instead of asking the server. */
  dbSystem?: 'mysql' | 'mariadb';
  /**
   * Records the resource id as `rwlock.resource.id` on acquire and hold spans. Off by default: a
   * resource id may name a customer or an account, and it makes the attribute's cardinality unbounded.
   * @defaultValue false
   */
  recordResourceIds?: boolean;
}

/** What {@link instrumentLocks} returns. */
export interface LockInstrumentation {
  /**
   * Resolves once `db.system.name` is known (at once when `dbSystem` is given or there is no
   * `knex`; never rejects: a failed lookup leaves the attribute out). Spans that end earlier lack it.
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
} as const);

/** The instrumentation scope name spans are recorded under. */
export const TRACER_NAME = 'mysql-rwlock';

/** A grant's hold span, and how it ended when the scoped call around it has not returned yet. */
interface Hold {
  span: Span;
  scoped: boolean;
  releasedBy?: string;
  lost?: boolean;
  /** A scoped call's work fenced the grant: the call's success means the fence committed. */
  fenced?: boolean;
}

/**
 * Turns on OpenTelemetry spans for every lock manager and reaper call in this process:
 * `rwlock.acquire` (its duration is the wait; `rwlock.outcome` granted, busy, timeout, aborted or
 * error), `rwlock.hold` (from the grant to its release, fenced commit, or loss), `rwlock.fence`,
 * `rwlock.release` and `rwlock.reap`. Inside `withWriteLock` and `withReadLock` the hold span is the
 * active context, so spans the callback's queries make (knex's or mysql2's instrumentation) are its
 * children. Failures set status ERROR, `error.type` and an exception event.
 *
 * @example
 * ```ts
 * import { instrumentLocks } from 'mysql-rwlock/otel';
 * import type { Knex } from 'knex';
 * declare const db: Knex;
 *
 * const tracing = instrumentLocks({ knex: db }); // the global tracer provider
 * // ... later
 * tracing.disable();
 * ```
 */
export function instrumentLocks(options?: LockInstrumentationOptions): LockInstrumentation {
  const o = optionsObject('instrumentLocks', options, ['tracerProvider', 'knex', 'dbSystem', 'recordResourceIds']);
  const provider = o.tracerProvider as TracerProvider | undefined;
  if (provider !== undefined && typeof provider.getTracer !== 'function')
    throw new InvalidOptionsError('tracerProvider must be an OpenTelemetry TracerProvider');
  if (o.dbSystem !== undefined && o.dbSystem !== 'mysql' && o.dbSystem !== 'mariadb')
    throw new InvalidOptionsError(`dbSystem must be 'mysql' or 'mariadb', got ${JSON.stringify(o.dbSystem)}`);
  const knex = o.knex === undefined ? undefined : knexOption('knex', o.knex);
  const withResourceIds = booleanOption('recordResourceIds', o.recordResourceIds, false);
  const tracer: Tracer = (provider ?? trace.getTracerProvider()).getTracer(TRACER_NAME);

  const server: Attributes = knex ? serverAttributes(knex) : {};
  let dbSystem = o.dbSystem as string | undefined;
  const ready =
    dbSystem !== undefined || knex === undefined
      ? Promise.resolve()
      : detectSystem(knex).then(
          (system) => void (dbSystem = system),
          () => undefined,
        );
  const base = (): Attributes => (dbSystem === undefined ? server : { 'db.system.name': dbSystem, ...server });
  const resource = (id: unknown): Attributes =>
    withResourceIds && typeof id === 'string' ? { 'rwlock.resource.id': id } : {};

  const start = (name: string, attributes: Attributes, parent: Context = otelContext.active()): Span =>
    tracer.startSpan(name, { kind: SpanKind.INTERNAL, attributes: { ...base(), ...attributes } }, parent);
  /** Ends a span, adding `db.system.name` if it was learnt after the span started. */
  const end = (span: Span): void => {
    if (dbSystem !== undefined) span.setAttribute('db.system.name', dbSystem);
    span.end();
  };

  const holds = new WeakMap<Grant, Hold>();
  const finishHold = (hold: Hold, grant: Grant): void => {
    if (hold.releasedBy !== undefined) hold.span.setAttribute('rwlock.released_by', hold.releasedBy);
    if (hold.lost) hold.span.setStatus({ code: SpanStatusCode.ERROR, message: `grant ${grant.id} was lost` });
    end(hold.span);
    holds.delete(grant);
  };
  /** The grant's hold ended: now, or when the scoped call around it returns. */
  const holdEnded = (grant: Grant | undefined, releasedBy: string, lost = false): void => {
    const hold = grant && holds.get(grant);
    if (!hold) return;
    hold.lost ||= lost;
    if (!hold.scoped) {
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

  const open = new WeakMap<object, { span: Span; parent: Context; startedAt: number }>();
  const subscriptions: Array<{ channel: string; handlers: object }> = [];
  const subscribe = <C extends object>(
    channel: string,
    startSpan: (c: C) => Span,
    ended: (c: C, span: Span, parent: Context) => void,
  ) => {
    const none = (): void => undefined;
    // All five events named, as the Prometheus collector does: the TracingChannel type asks for each.
    const handlers = {
      end: none,
      asyncStart: none,
      error: none,
      start: (c: C) => {
        const parent = otelContext.active();
        open.set(c, { span: startSpan(c), parent, startedAt: performance.now() });
      },
      asyncEnd: (c: C) => {
        const entry = open.get(c);
        if (!entry) return;
        open.delete(c);
        const error = (c as { error?: unknown }).error;
        if (error !== undefined) recordError(entry.span, error);
        ended(c, entry.span, entry.parent);
        end(entry.span);
      },
    };
    diagnostics.tracingChannel(channel).subscribe(handlers as unknown as diagnostics.TracingChannelSubscribers<object>);
    subscriptions.push({ channel, handlers });
  };

  subscribe<AcquireContext>(
    CHANNELS.acquire,
    (c) =>
      start(SPANS.acquire, {
        'rwlock.mode': c.mode,
        'rwlock.wait_limit_ms': c.waitMs,
        'rwlock.owner': c.owner,
        ...resource(c.resourceId),
      }),
    (c, span, parent) => {
      span.setAttribute('rwlock.outcome', acquireOutcome(c));
      const grant = c.result;
      if (!grant) return;
      span.setAttribute('rwlock.grant.id', grant.id);
      // The hold's parent is what was active when the acquire was called: the caller's span.
      holds.set(grant, {
        span: start(
          SPANS.hold,
          { 'rwlock.mode': grant.mode, 'rwlock.grant.id': grant.id, ...resource(grant.resourceId) },
          parent,
        ),
        scoped: false,
      });
    },
  );
  subscribe<FenceContext>(
    CHANNELS.fence,
    (c) => start(SPANS.fence, { 'rwlock.mode': c.mode, 'rwlock.grant.id': c.grantId }),
    (c, span) => {
      const refused = c.error instanceof LockLostError;
      span.setAttribute('rwlock.outcome', c.error === undefined ? 'released' : refused ? 'lost' : 'error');
      // A fence releases the grant in the caller's transaction; the caller commits next.
      if (c.error === undefined) holdEnded(c.grant, 'fence');
    },
  );
  subscribe<ReleaseContext>(
    CHANNELS.release,
    (c) => start(SPANS.release, { 'rwlock.grant.id': c.grantId, 'rwlock.released_by': c.by }),
    (c, span) => {
      if (c.result !== undefined) span.setAttribute('rwlock.released', c.result);
      if (c.by === 'holder' && c.result === true) holdEnded(c.grant, 'holder');
    },
  );
  subscribe<ReapContext>(
    CHANNELS.reap,
    (c) => start(SPANS.reap, { 'rwlock.reap.stale_after_ms': c.staleAfterMs, 'rwlock.reap.batch_size': c.batchSize }),
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

  // The scoped call's work runs with the hold span active; the hold ends when the call returns.
  const removeScope = addHoldScope(<T>(grant: Grant, run: () => Promise<T>): Promise<T> => {
    const hold = holds.get(grant);
    if (!hold) return run();
    hold.scoped = true;
    return otelContext.with(trace.setSpan(otelContext.active(), hold.span), run).then(
      (value) => {
        // Resolved after a fence: the business transaction, fence included, committed, unless the
        // holder released the grant after it (withWriteGrant: that transaction rolled back). Without
        // a fence (a scoped form whose work need not fence), the grant was released.
        hold.releasedBy ??= 'commit';
        finishHold(hold, grant);
        return value;
      },
      (error: unknown) => {
        recordError(hold.span, error);
        if (error instanceof LockLostError) hold.lost = true;
        finishHold(hold, grant);
        throw error;
      },
    );
  });

  let enabled = true;
  return {
    ready,
    disable() {
      if (!enabled) return;
      enabled = false;
      removeScope();
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

/** `server.address`, `server.port` and `db.namespace` from knex's connection settings, when they are plain. */
function serverAttributes(knex: Knex): Attributes {
  let connection = (knex.client as { config?: { connection?: unknown } }).config?.connection;
  if (typeof connection === 'string') {
    try {
      connection = parseConnectionUrl(connection).connection;
    } catch {
      return {};
    }
  }
  if (typeof connection !== 'object' || connection === null) return {};
  const c = connection as { host?: unknown; port?: unknown; database?: unknown; socketPath?: unknown };
  const out: Attributes = {};
  if (typeof c.socketPath === 'string') out['server.address'] = c.socketPath;
  else {
    out['server.address'] = typeof c.host === 'string' ? c.host : 'localhost';
    out['server.port'] = typeof c.port === 'number' ? c.port : Number(c.port ?? 3306);
  }
  if (typeof c.database === 'string') out['db.namespace'] = c.database;
  return out;
}

async function detectSystem(knex: Knex): Promise<'mysql' | 'mariadb'> {
  const [rows] = (await knex.raw('SELECT VERSION() AS v')) as unknown as [Array<{ v: string }>];
  return /mariadb/i.test(rows[0]?.v ?? '') ? 'mariadb' : 'mysql';
}
