import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { InvalidOptionsError } from './errors.js';

/** Defaults of every option; documented on the option types below. */
export const DEFAULTS = Object.freeze({
  staleAfterMs: 600_000,
  waitMs: 30_000,
  backoffMinMs: 2,
  backoffMaxMs: 100,
  writerIntentMs: 1_000,
  deadlockRetries: 5,
  resolveTimeoutMs: 30_000,
});

export interface LockManagerOptions {
  /** A knex instance using the `mysql2` client, on a database where `migrate()` has run. */
  knex: Knex;
  /** Recorded in `t_lock_log.owner` for every grant. @defaultValue `host/pid/random` */
  owner?: string;
  /** Age after which the reaper releases a grant; used here by `inspect()` to flag stale holders. @defaultValue 600000 */
  staleAfterMs?: number;
  /** First retry delay of a waiting acquire (full jitter, doubling). @defaultValue 2 */
  backoffMinMs?: number;
  /** Longest retry delay of a waiting acquire. @defaultValue 100 */
  backoffMaxMs?: number;
  /**
   * How long a waiting writer keeps new readers out after its last attempt, so a stream of readers
   * cannot starve it. 0 turns writer preference off. @defaultValue 1000
   */
  writerIntentMs?: number;
  /** Retries of a lock transaction, or of a business transaction, that failed with a deadlock (1213). @defaultValue 5 */
  deadlockRetries?: number;
  /** How long to keep trying to learn the outcome of a commit whose connection was lost. @defaultValue 30000 */
  resolveTimeoutMs?: number;
}

export interface ResolvedManagerOptions {
  knex: Knex;
  owner: string;
  staleAfterMs: number;
  backoffMinMs: number;
  backoffMaxMs: number;
  writerIntentMs: number;
  deadlockRetries: number;
  resolveTimeoutMs: number;
}

export interface AcquireOptions {
  /** How long to keep trying before LockTimeoutError. 0 means one attempt. @defaultValue 30000 */
  waitMs?: number;
  /** Cancels the wait with an AbortError (LockAbortedError). */
  signal?: AbortSignal;
}

export type IsolationLevel = 'read uncommitted' | 'read committed' | 'repeatable read' | 'serializable';

export interface WithLockOptions extends AcquireOptions {
  /** Isolation level of the business transaction. @defaultValue the connection's default */
  isolationLevel?: IsolationLevel;
  /**
   * Keeps the grant's lease this far ahead while `work` runs (extended every third of it), so a
   * long but live holder is not reaped; a holder that stops running (paused, partitioned) stops
   * extending and is reaped as usual. `grant.signal` aborts if an extension finds the grant lost.
   * @defaultValue off: the grant is reaped `staleAfterMs` after it was granted
   */
  leaseMs?: number;
}

const ISOLATION_LEVELS: readonly string[] = ['read uncommitted', 'read committed', 'repeatable read', 'serializable'];

export function checkKnownKeys(what: string, value: object, known: readonly string[]): void {
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) {
      throw new InvalidOptionsError(`${key}: unknown option of ${what} (known: ${known.join(', ')})`);
    }
  }
}

export function integerOption(name: string, value: unknown, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidOptionsError(`${name} must be an integer from ${min} to ${max}, got ${describe(value)}`);
  }
  return value;
}

function describe(value: unknown): string {
  if (typeof value === 'number') return String(value);
  if (typeof value === 'string') return JSON.stringify(value);
  return value === null ? 'null' : typeof value;
}

function isKnex(value: unknown): value is Knex {
  return typeof value === 'function' && typeof (value as Partial<Knex>).client === 'object' && (value as Partial<Knex>).client !== null;
}

export function resolveManagerOptions(input: unknown): ResolvedManagerOptions {
  if (typeof input !== 'object' || input === null) throw new InvalidOptionsError('options must be an object with a knex instance');
  const o = input as Record<string, unknown>;
  checkKnownKeys('createLockManager', o, [
    'knex', 'owner', 'staleAfterMs', 'backoffMinMs', 'backoffMaxMs', 'writerIntentMs', 'deadlockRetries', 'resolveTimeoutMs',
  ]);
  if (!isKnex(o.knex)) throw new InvalidOptionsError('knex must be a knex instance');
  const driver = (o.knex.client as { config?: { client?: unknown } }).config?.client;
  if (driver !== 'mysql2') throw new InvalidOptionsError(`knex must use the 'mysql2' client, got ${describe(driver)}`);
  const owner = o.owner ?? `${hostname()}/${process.pid}/${randomBytes(3).toString('hex')}`;
  if (typeof owner !== 'string' || owner.length === 0 || owner.length > 255) {
    throw new InvalidOptionsError(`owner must be a string of 1 to 255 characters, got ${describe(owner)}`);
  }
  const resolved: ResolvedManagerOptions = {
    knex: o.knex,
    owner,
    staleAfterMs: integerOption('staleAfterMs', o.staleAfterMs ?? DEFAULTS.staleAfterMs, 1),
    backoffMinMs: integerOption('backoffMinMs', o.backoffMinMs ?? DEFAULTS.backoffMinMs, 1, 60_000),
    backoffMaxMs: integerOption('backoffMaxMs', o.backoffMaxMs ?? DEFAULTS.backoffMaxMs, 1, 60_000),
    writerIntentMs: integerOption('writerIntentMs', o.writerIntentMs ?? DEFAULTS.writerIntentMs, 0, 3_600_000),
    deadlockRetries: integerOption('deadlockRetries', o.deadlockRetries ?? DEFAULTS.deadlockRetries, 0, 1_000),
    resolveTimeoutMs: integerOption('resolveTimeoutMs', o.resolveTimeoutMs ?? DEFAULTS.resolveTimeoutMs, 0),
  };
  if (resolved.backoffMinMs > resolved.backoffMaxMs) {
    throw new InvalidOptionsError(`backoffMinMs (${resolved.backoffMinMs}) must not exceed backoffMaxMs (${resolved.backoffMaxMs})`);
  }
  return resolved;
}

export interface ResolvedAcquireOptions {
  waitMs: number;
  signal: AbortSignal | undefined;
  isolationLevel: IsolationLevel | undefined;
  leaseMs: number | undefined;
}

export function resolveCallOptions(what: string, input: unknown, allowIsolation: boolean): ResolvedAcquireOptions {
  if (input === undefined) return { waitMs: DEFAULTS.waitMs, signal: undefined, isolationLevel: undefined, leaseMs: undefined };
  if (typeof input !== 'object' || input === null) throw new InvalidOptionsError(`options of ${what} must be an object`);
  const o = input as Record<string, unknown>;
  checkKnownKeys(what, o, allowIsolation ? ['waitMs', 'signal', 'isolationLevel', 'leaseMs'] : ['waitMs', 'signal']);
  const waitMs = integerOption('waitMs', o.waitMs ?? DEFAULTS.waitMs, 0, 2_147_483_647);
  const signal = o.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new InvalidOptionsError('signal must be an AbortSignal');
  const isolationLevel = o.isolationLevel;
  if (isolationLevel !== undefined && (typeof isolationLevel !== 'string' || !ISOLATION_LEVELS.includes(isolationLevel))) {
    throw new InvalidOptionsError(`isolationLevel must be one of ${ISOLATION_LEVELS.join(', ')}, got ${describe(isolationLevel)}`);
  }
  const leaseMs = o.leaseMs === undefined ? undefined : integerOption('leaseMs', o.leaseMs, 30, 2_147_483_647);
  return { waitMs, signal, isolationLevel: isolationLevel as IsolationLevel | undefined, leaseMs };
}
