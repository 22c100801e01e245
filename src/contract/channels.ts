// The diagnostics channels the library publishes on and the context object of each. They live in
// the lock client because their publishers do (src/lock/, and src/admin/'s reap beside it) and every
// context names a Grant (api.ts): src/observability/, a layer above, only subscribes.
// `mysql-rwlock/tracing` (src/observability/tracing-entry.ts) exports the names and the types.
import diagnostics from 'node:diagnostics_channel';
import type { Knex } from 'knex';
import type { Grant } from './api.js';
import type { LockLostInfo, LockMode, ReapResult, ReleasedBy } from '../types.js';

/**
 * The library's `node:diagnostics_channel` names. acquire, fence, release and reap are
 * TracingChannels (`tracing:<name>:start`, `:end`, `:asyncStart`, `:asyncEnd`, `:error`); lost is a
 * plain channel. Subscribe with `diagnostics_channel.tracingChannel(name).subscribe({...})` or
 * `diagnostics_channel.subscribe(name, ...)`. The context objects are the types below.
 */
export const CHANNELS = Object.freeze({
  acquire: 'mysql-rwlock:acquire',
  fence: 'mysql-rwlock:fence',
  release: 'mysql-rwlock:release',
  reap: 'mysql-rwlock:reap',
  lost: 'mysql-rwlock:lost',
} as const);

/** One acquire call (`tryAcquire*`, `acquire*`, or the acquire of `with*Lock`). */
export interface AcquireContext {
  resourceId: string;
  mode: LockMode;
  /** 0 for one attempt (`tryAcquire*`). */
  waitMs: number;
  owner: string;
  /**
   * The knex instance the call ran on: its manager's, or the one passed to \`reapStaleGrants\`. What
   * an instrumentation labels the call's server and database with (\`mysql-rwlock/otel\` does).
   * Absent only where the publisher does not know it (a one-commit section's contexts, for now).
   */
  knex?: Knex;
  /**
   * True for the take of a one-commit section (`{ section: true }`): the context ends when the
   * section's transaction has taken the row, and its `result` is the section's grant. Absent for
   * a durable acquire.
   */
  section?: true;
  /** Set by diagnostics_channel on success: the Grant, or null when one attempt found the lock held. */
  result?: Grant | null;
  /** Set on failure: LockTimeoutError, LockAbortedError, or what the database threw. */
  error?: unknown;
}

/**
 * One `grant.fence()`: the last statement of a fenced business transaction; or, with
 * `section: true`, the commit of a one-commit section (which is its release).
 */
export interface FenceContext {
  grant: Grant;
  grantId: number;
  resourceId: string;
  mode: LockMode;
  /**
   * The knex instance the call ran on: its manager's, or the one passed to \`reapStaleGrants\`. What
   * an instrumentation labels the call's server and database with (\`mysql-rwlock/otel\` does).
   * Absent only where the publisher does not know it (a one-commit section's contexts, for now).
   */
  knex?: Knex;
  /** True for a section's commit; absent for a durable grant's fence. */
  section?: true;
  /** LockLostError when the fence refused: the grant had been released by someone else. */
  error?: unknown;
}

/** One `grant.release()` (by: holder) or `locks.forceRelease(id)` (by: operator). */
export interface ReleaseContext {
  /** The holder's Grant; absent for an operator release, which knows only the id. */
  grant?: Grant;
  grantId: number;
  by: Extract<ReleasedBy, 'holder' | 'operator'>;
  /**
   * The knex instance the call ran on: its manager's, or the one passed to \`reapStaleGrants\`. What
   * an instrumentation labels the call's server and database with (\`mysql-rwlock/otel\` does).
   */
  knex?: Knex;
  /** True when this call released a live grant. */
  result?: boolean;
  error?: unknown;
}

/** One `reapStaleGrants()` call. */
export interface ReapContext {
  staleAfterMs: number;
  batchSize: number;
  /** The knex instance passed to `reapStaleGrants`: the database reaped. */
  knex?: Knex;
  result?: ReapResult;
  error?: unknown;
}

/**
 * Published on `mysql-rwlock:lost` once per grant this process learns it lost: what `onLockLost`
 * is told (`releasedBy`, `detectedBy`), with the grant.
 */
export interface LostContext extends LockLostInfo {
  grant: Grant;
  grantId: number;
  resourceId: string;
  mode: LockMode;
}

/**
 * A `node:diagnostics_channel` Channel carrying messages of type `M`: the members the library uses.
 * The library declares its own channel types rather than naming @types/node's, whose type parameters
 * changed order (`TracingChannel<StoreType, ContextType>` up to @types/node 25,
 * `TracingChannel<ContextType, StoreType>` from 26): a declaration naming them compiles against some
 * @types/node versions only. To listen on the plain `lost` channel, whose listeners @types/node types
 * as taking `unknown`: `diagnostics.subscribe(CHANNELS.lost, (m) => { const lost = m as LostContext; })`.
 */
export interface LockChannel<M> {
  readonly hasSubscribers: boolean;
  publish(message: M): void;
}

/** Handlers for the five events of a {@link LockTracingChannel}; any may be left out. */
export interface LockTracingHandlers<C extends object> {
  start?(context: C): void;
  end?(context: C): void;
  asyncStart?(context: C): void;
  asyncEnd?(context: C): void;
  error?(context: C): void;
}

/**
 * A `node:diagnostics_channel` TracingChannel whose events carry context objects of type `C`
 * ({@link AcquireContext}, {@link FenceContext}, {@link ReleaseContext}, {@link ReapContext}).
 * Node's TracingChannel objects are assignable to it under @types/node 20, 22 and 26
 * (`.ci/consumer-matrix.sh` checks each), so an app needs no cast:
 * `const acquire: LockTracingChannel<AcquireContext> = diagnostics.tracingChannel(CHANNELS.acquire)`.
 * It has no `hasSubscribers` of its own: Node has it only from 20.13; ask the five event channels.
 */
export interface LockTracingChannel<C extends object> {
  readonly start: LockChannel<C>;
  readonly end: LockChannel<C>;
  readonly asyncStart: LockChannel<C>;
  readonly asyncEnd: LockChannel<C>;
  readonly error: LockChannel<C>;
  subscribe(handlers: LockTracingHandlers<C>): void;
  unsubscribe(handlers: LockTracingHandlers<C>): void;
  tracePromise<T>(fn: () => Promise<T>, context: C): Promise<T>;
}

// Node's channel objects become the library's types here and in lostChannel below, nowhere else.
function tracingChannel<C extends object>(name: string): LockTracingChannel<C> {
  return diagnostics.tracingChannel(name) as unknown as LockTracingChannel<C>;
}

export const acquireChannel = tracingChannel<AcquireContext>(CHANNELS.acquire);
export const fenceChannel = tracingChannel<FenceContext>(CHANNELS.fence);
export const releaseChannel = tracingChannel<ReleaseContext>(CHANNELS.release);
export const reapChannel = tracingChannel<ReapContext>(CHANNELS.reap);
export const lostChannel = diagnostics.channel(CHANNELS.lost) as unknown as LockChannel<LostContext>;

/**
 * Whether anyone listens. TracingChannel#hasSubscribers exists only from Node 20.13, so the five
 * event channels are asked directly.
 */
export function isTraced(t: LockTracingChannel<object>): boolean {
  return (
    t.start.hasSubscribers ||
    t.end.hasSubscribers ||
    t.asyncStart.hasSubscribers ||
    t.asyncEnd.hasSubscribers ||
    t.error.hasSubscribers
  );
}

/**
 * Runs `fn` traced on `t`. With no subscriber it is `fn()` itself: the context object is not even
 * built, so tracing costs nothing until someone listens.
 */
export function traced<T, C extends object>(
  t: LockTracingChannel<C>,
  context: () => C,
  fn: () => Promise<T>,
): Promise<T> {
  if (!isTraced(t)) return fn();
  return t.tracePromise(fn, context());
}
