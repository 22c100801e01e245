import diagnostics from 'node:diagnostics_channel';
import type { Grant } from '../lock/api.js';
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
  /** Set by diagnostics_channel on success: the Grant, or null when one attempt found the lock held. */
  result?: Grant | null;
  /** Set on failure: LockTimeoutError, LockAbortedError, or what the database threw. */
  error?: unknown;
}

/** One `grant.fence()`: the last statement of a fenced business transaction. */
export interface FenceContext {
  grant: Grant;
  grantId: number;
  resourceId: string;
  mode: LockMode;
  /** LockLostError when the fence refused: the grant had been released by someone else. */
  error?: unknown;
}

/** One `grant.release()` (by: holder) or `locks.forceRelease(id)` (by: operator). */
export interface ReleaseContext {
  /** The holder's Grant; absent for an operator release, which knows only the id. */
  grant?: Grant;
  grantId: number;
  by: Extract<ReleasedBy, 'holder' | 'operator'>;
  /** True when this call released a live grant. */
  result?: boolean;
  error?: unknown;
}

/** One `reapStaleGrants()` call. */
export interface ReapContext {
  staleAfterMs: number;
  batchSize: number;
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

type Tracing<C extends object> = diagnostics.TracingChannel<unknown, C>;

export const acquireChannel: Tracing<AcquireContext> = diagnostics.tracingChannel(CHANNELS.acquire);
export const fenceChannel: Tracing<FenceContext> = diagnostics.tracingChannel(CHANNELS.fence);
export const releaseChannel: Tracing<ReleaseContext> = diagnostics.tracingChannel(CHANNELS.release);
export const reapChannel: Tracing<ReapContext> = diagnostics.tracingChannel(CHANNELS.reap);
export const lostChannel: diagnostics.Channel<unknown, LostContext> = diagnostics.channel(CHANNELS.lost) as diagnostics.Channel<unknown, LostContext>;

/**
 * Whether anyone listens. TracingChannel#hasSubscribers exists only from Node 20.13, so the five
 * event channels are asked directly.
 */
export function isTraced(t: Tracing<object>): boolean {
  return t.start.hasSubscribers || t.end.hasSubscribers || t.asyncStart.hasSubscribers || t.asyncEnd.hasSubscribers || t.error.hasSubscribers;
}

/**
 * Runs `fn` traced on `t`. With no subscriber it is `fn()` itself: the context object is not even
 * built, so tracing costs nothing until someone listens.
 */
export function traced<T, C extends object>(t: Tracing<C>, context: () => C, fn: () => Promise<T>): Promise<T> {
  if (!isTraced(t)) return fn();
  return t.tracePromise(fn, context());
}
