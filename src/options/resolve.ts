// Each call's options argument resolved: unknown names refused, every value checked, defaults
// filled in, the options that depend on each other checked together. What `createLockManager`, the
// acquire and scoped calls, the permit calls and `runExclusive` run first, before anything is written.
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { InvalidOptionsError } from '../errors.js';
import type { LockLostHandler } from '../contract/api.js';
import { DEFAULTS, LIMITS } from './defaults.js';
import { OPTION_KEYS } from './keys.js';
import type {
  IsolationLevel,
  ResolvedAcquireOptions,
  ResolvedExclusiveOptions,
  ResolvedManagerOptions,
} from './option-types.js';
import {
  booleanOption,
  describe,
  integerOption,
  knexOption,
  optionsObject,
  proceduresOption,
  staleAfterOption,
} from './validators.js';

const ISOLATION_LEVELS: readonly string[] = ['read uncommitted', 'read committed', 'repeatable read', 'serializable'];

function ownerOption(value: unknown): string {
  const owner = value ?? `${hostname()}/${process.pid}/${randomBytes(3).toString('hex')}`;
  const chars = typeof owner === 'string' ? [...owner].length : 0;
  if (typeof owner !== 'string' || chars === 0 || chars > LIMITS.maxOwnerChars || !owner.isWellFormed()) {
    throw new InvalidOptionsError(
      `owner must be well-formed text of 1 to ${LIMITS.maxOwnerChars} characters, got ${describe(owner)}`,
    );
  }
  return owner;
}

export function resolveManagerOptions(input: unknown): ResolvedManagerOptions {
  if (typeof input !== 'object' || input === null)
    throw new InvalidOptionsError('options must be an object with a knex instance');
  const o = optionsObject('createLockManager', input, OPTION_KEYS.manager);
  if (o.onLockLost !== undefined && typeof o.onLockLost !== 'function') {
    throw new InvalidOptionsError(
      `onLockLost must be a function (grant, { releasedBy, detectedBy }) => void, got ${describe(o.onLockLost)}`,
    );
  }
  const resolved: ResolvedManagerOptions = {
    knex: knexOption('knex', o.knex),
    owner: ownerOption(o.owner),
    staleAfterMs: staleAfterOption(o.staleAfterMs),
    backoffMinMs: integerOption('backoffMinMs', o.backoffMinMs ?? DEFAULTS.backoffMinMs, 1, LIMITS.maxBackoffMs),
    backoffMaxMs: integerOption('backoffMaxMs', o.backoffMaxMs ?? DEFAULTS.backoffMaxMs, 1, LIMITS.maxBackoffMs),
    writerIntentMs: integerOption(
      'writerIntentMs',
      o.writerIntentMs ?? DEFAULTS.writerIntentMs,
      0,
      LIMITS.maxWriterIntentMs,
    ),
    deadlockRetries: integerOption(
      'deadlockRetries',
      o.deadlockRetries ?? DEFAULTS.deadlockRetries,
      0,
      LIMITS.maxRetries,
    ),
    resolveTimeoutMs: integerOption(
      'resolveTimeoutMs',
      o.resolveTimeoutMs ?? DEFAULTS.resolveTimeoutMs,
      0,
      LIMITS.maxResolveTimeoutMs,
    ),
    procedures: proceduresOption(o.procedures),
    onLockLost: o.onLockLost as LockLostHandler | undefined,
    sectionIdleTimeoutMs: integerOption(
      'sectionIdleTimeoutMs',
      o.sectionIdleTimeoutMs ?? DEFAULTS.sectionIdleTimeoutMs,
      1,
      LIMITS.maxSectionIdleTimeoutMs,
    ),
    sectionHistory: booleanOption('sectionHistory', o.sectionHistory, DEFAULTS.sectionHistory),
    selfHeal: booleanOption('selfHeal', o.selfHeal, DEFAULTS.selfHeal),
    maintenance: maintenanceOption(o.maintenance),
  };
  if (resolved.backoffMinMs > resolved.backoffMaxMs) {
    throw new InvalidOptionsError(
      `backoffMinMs (${resolved.backoffMinMs}) must not exceed backoffMaxMs (${resolved.backoffMaxMs})`,
    );
  }
  return resolved;
}

function maintenanceOption(value: unknown): ResolvedManagerOptions['maintenance'] {
  if (value === undefined || value === false) return null;
  const o = value === true ? {} : optionsObject('maintenance', value, ['intervalMs', 'retentionMs']);
  return {
    intervalMs: integerOption(
      'maintenance.intervalMs',
      o.intervalMs ?? DEFAULTS.maintenance.intervalMs,
      LIMITS.minMaintenanceIntervalMs,
      LIMITS.maxTimerMs,
    ),
    retentionMs: integerOption(
      'maintenance.retentionMs',
      o.retentionMs ?? DEFAULTS.purge.retentionMs,
      0,
      LIMITS.maxRetentionMs,
    ),
  };
}

export function resolveCallOptions(
  what: string,
  input: unknown,
  form: 'acquire' | 'scoped' | 'granted',
): ResolvedAcquireOptions {
  const o = optionsObject(what, input, OPTION_KEYS[form]);
  const waitMs = integerOption('waitMs', o.waitMs ?? DEFAULTS.waitMs, 0, LIMITS.maxTimerMs);
  const signal = o.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal))
    throw new InvalidOptionsError('signal must be an AbortSignal');
  const isolationLevel = o.isolationLevel;
  if (
    isolationLevel !== undefined &&
    (typeof isolationLevel !== 'string' || !ISOLATION_LEVELS.includes(isolationLevel))
  ) {
    throw new InvalidOptionsError(
      `isolationLevel must be one of ${ISOLATION_LEVELS.join(', ')}, got ${describe(isolationLevel)}`,
    );
  }
  const leaseMs = leaseOption(o.leaseMs);
  const maxHoldMs = maxHoldOption(o.maxHoldMs, leaseMs);
  const section = booleanOption('section', o.section, false);
  if (section && leaseMs !== undefined)
    throw new InvalidOptionsError('leaseMs cannot be used with section: a section holds no durable grant to extend');
  const history = o.history === undefined ? undefined : booleanOption('history', o.history, true);
  if (history === false && !section)
    throw new InvalidOptionsError('history: false needs section: true (a durable grant is its history row)');
  return {
    waitMs,
    signal,
    isolationLevel: isolationLevel as IsolationLevel | undefined,
    leaseMs,
    maxHoldMs,
    section,
    history,
  };
}

function leaseOption(value: unknown): number | undefined {
  return value === undefined ? undefined : integerOption('leaseMs', value, LIMITS.minLeaseMs, LIMITS.maxTimerMs);
}

/** A cap on a kept-ahead lease, meaningless without one. */
function maxHoldOption(value: unknown, leaseMs: number | undefined): number | undefined {
  if (value === undefined) return undefined;
  const maxHoldMs = integerOption('maxHoldMs', value, 1, LIMITS.maxTimerMs);
  if (leaseMs === undefined)
    throw new InvalidOptionsError('maxHoldMs needs leaseMs: it caps a lease that is kept ahead, and none is');
  return maxHoldMs;
}

export function resolveExclusiveOptions(what: string, input: unknown): ResolvedExclusiveOptions {
  if (input === undefined) throw new InvalidOptionsError(`lockAtMostFor: ${what} needs { lockAtMostFor }`);
  const o = optionsObject(what, input, OPTION_KEYS.exclusive);
  if (o.lockAtMostFor === undefined) throw new InvalidOptionsError(`lockAtMostFor: ${what} needs it`);
  const lockAtMostFor = integerOption('lockAtMostFor', o.lockAtMostFor, LIMITS.minLeaseMs, LIMITS.maxTimerMs);
  const lockAtLeastFor = integerOption(
    'lockAtLeastFor',
    o.lockAtLeastFor ?? DEFAULTS.runExclusive.lockAtLeastFor,
    0,
    lockAtMostFor,
  );
  const leaseMs = leaseOption(o.leaseMs) ?? lockAtMostFor;
  return { lockAtMostFor, lockAtLeastFor, leaseMs, grant: booleanOption('grant', o.grant, false) };
}

/**
 * A permit call's options without its own (`OPTION_KEYS.permit`): the options it shares with its
 * read-write call, which that call's validator checks.
 */
export function sharedOptions(input: unknown): Record<string, unknown> {
  if (typeof input !== 'object' || input === null) return {};
  const own: readonly string[] = OPTION_KEYS.permit;
  return Object.fromEntries(Object.entries(input).filter(([key]) => !own.includes(key)));
}

/**
 * A permit call's own options (`OPTION_KEYS.permit`), the semaphore's limit and the call's count,
 * validated: typed errors before anything is written. `alone`: they are all the call takes
 * (`tryAcquirePermit`), so any other name is refused; else the others are the read-write call's
 * (`sharedOptions`), which its validator checks.
 */
export function permitOptions(what: string, input: unknown, alone = false): { limit: number; count: number } {
  if (alone) optionsObject(what, input ?? null, OPTION_KEYS.permit);
  if (typeof input !== 'object' || input === null || Array.isArray(input))
    throw new InvalidOptionsError(`${what} needs options with permits (the semaphore's limit), e.g. { permits: 5 }`);
  const o = input as Record<string, unknown>;
  if (o.permits === undefined) throw new InvalidOptionsError(`permits: ${what} needs the semaphore's limit`);
  const limit = integerOption('permits', o.permits, 1, LIMITS.maxPermits);
  const count = integerOption('count', o.count ?? DEFAULTS.permit.count, 1, limit);
  return { limit, count };
}
