// Each call's option names as one run-time list, held to its type when compiled.
import type {
  AcquireOptions,
  ExclusiveOptions,
  LockManagerOptions,
  PermitOptions,
  WithGrantOptions,
  WithLockOptions,
} from './option-types.js';

/**
 * `keys`, checked when compiled to be exactly the keys of `T`: a list that leaves one out, or names
 * one `T` lacks, does not compile. So an options type and the run-time list of names its validator
 * accepts cannot part. Used as `keysOf<AcquireOptions>()(['waitMs', ...])`.
 */
export function keysOf<T>() {
  return <const K extends readonly (keyof T & string)[]>(
    keys: K & ([Exclude<keyof T, K[number]>] extends [never] ? unknown : { missing: Exclude<keyof T, K[number]> }),
  ): K => keys;
}

/**
 * The names of each call's options: the one list its validator accepts (an unknown name is refused),
 * and the list the decorators build theirs from. Each is checked against its type by `keysOf`.
 */
export const OPTION_KEYS = Object.freeze({
  /** `acquireWrite`, `acquireRead`, `acquireMany` */
  acquire: keysOf<AcquireOptions>()(['waitMs', 'signal', 'leaseMs', 'maxHoldMs']),
  /** `withWriteLock`, `withReadLock`, `withLocks` */
  scoped: keysOf<WithLockOptions>()([
    'waitMs',
    'signal',
    'isolationLevel',
    'leaseMs',
    'maxHoldMs',
    'section',
    'history',
  ]),
  /** `withWriteGrant`, `withReadGrant` */
  granted: keysOf<WithGrantOptions>()(['waitMs', 'signal', 'leaseMs', 'maxHoldMs']),
  /**
   * `tryAcquirePermit`; and `acquirePermit`, `withPermit` beside the `acquire` and `scoped` names
   * (their own names taken apart first, see `sharedOptions`)
   */
  permit: keysOf<PermitOptions>()(['permits', 'count']),
  /** `runExclusive` */
  exclusive: keysOf<ExclusiveOptions>()(['lockAtMostFor', 'lockAtLeastFor', 'leaseMs', 'grant']),
  /** `createLockManager` */
  manager: keysOf<LockManagerOptions>()([
    'knex',
    'owner',
    'staleAfterMs',
    'backoffMinMs',
    'backoffMaxMs',
    'writerIntentMs',
    'deadlockRetries',
    'resolveTimeoutMs',
    'procedures',
    'onLockLost',
    'sectionIdleTimeoutMs',
    'sectionHistory',
    'selfHeal',
    'maintenance',
  ]),
});
