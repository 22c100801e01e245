// `mysql-rwlock/cron`: node-cron's run coordinator on the lock, so that a task scheduled with
// `distributed: true` runs each fire on one instance. node-cron is imported for its types only.
import { createHash } from 'node:crypto';
import type { RunCoordinator } from 'node-cron';
import type { Grant } from '../contract/api.js';
import type { LockManager } from '../lock/manager/manager.js';
import { InvalidOptionsError } from '../errors.js';
import { DEFAULTS, integerOption, LIMITS, optionsObject, textOption, keysOf } from '../options.js';
import { releaseAfterAtLeast } from '../lock/scheduled/lock-at-least.js';

export type { ExclusiveOptions } from '../options.js';
export type { ExclusiveResult } from '../lock/scheduled/exclusive.js';

/** The options of {@link createRunCoordinator}. */
export interface RunCoordinatorOptions {
  /**
   * Put before node-cron's key (the task's name, `:` and the fire time in ISO 8601) to make the
   * resource id, so that fire keys are told apart from other locks (`list({ resourcePrefix })`).
   * @defaultValue `DEFAULTS.createRunCoordinator.prefix`
   */
  prefix?: string;
  /**
   * After a faster run, the fire's grant is kept until this long after it was granted, on the
   * database clock, instead of being released in `onComplete`. A fire's key is claimed once
   * whatever it is set to (see {@link createRunCoordinator}). @defaultValue `DEFAULTS.createRunCoordinator.lockAtLeastFor`
   */
  lockAtLeastFor?: number;
}

/**
 * node-cron's `RunCoordinator` over a lock manager: pass it as `runCoordinator` of a task scheduled
 * with `distributed: true` (and a `name`), or to `cron.setRunCoordinator`.
 *
 * `shouldRun(key, ttlMs)` answers at once, never waiting: one attempt at the write grant of the
 * fire's key, whose lease is then set to `ttlMs` (node-cron's `distributedLease`). A fire's key is
 * claimed once: an instance whose timer fires late, after the first run released the key, finds the
 * earlier grant in the key's history and does not run it again. `onComplete(key)` releases the
 * grant, or keeps it until `lockAtLeastFor` has passed. A crashed instance's grant goes to the
 * reaper, as any grant does. Each fire writes a row in `t_lock_log`, purged with the other released
 * grants after the retention period, and one in `t_read_write_lock` (see docs/jobs.md).
 *
 * @example
 * ```ts
 * import cron from 'node-cron';
 * import type { LockManager } from 'mysql-rwlock';
 * import { createRunCoordinator } from 'mysql-rwlock/cron';
 * declare const locks: LockManager;
 *
 * cron.schedule('0 * * * *', () => console.log('hourly, on one instance'), {
 *   name: 'hourly-report',
 *   distributed: true,
 *   runCoordinator: createRunCoordinator(locks),
 * });
 * ```
 */
export function createRunCoordinator(locks: LockManager, options?: RunCoordinatorOptions): RunCoordinator {
  if (typeof locks !== 'object' || locks === null || typeof locks.tryAcquireWrite !== 'function')
    throw new InvalidOptionsError('locks: createRunCoordinator needs a LockManager (from createLockManager)');
  const o = optionsObject(
    'createRunCoordinator',
    options,
    keysOf<RunCoordinatorOptions>()(['prefix', 'lockAtLeastFor']),
  );
  const prefix =
    o.prefix === undefined ? DEFAULTS.createRunCoordinator.prefix : textOption('prefix', o.prefix, 64).toString('utf8');
  const lockAtLeastFor = integerOption(
    'lockAtLeastFor',
    o.lockAtLeastFor ?? DEFAULTS.createRunCoordinator.lockAtLeastFor,
    0,
    LIMITS.maxTimerMs,
  );
  const held = new Map<string, Grant>();

  return {
    async shouldRun(key: string, ttlMs: number): Promise<boolean> {
      integerOption('ttlMs', ttlMs, 1, LIMITS.maxTimerMs);
      const resourceId = fireResourceId(prefix, key);
      const grant = await locks.tryAcquireWrite(resourceId);
      if (grant === null) return false;
      try {
        // Any earlier grant of this key (not a withdrawn acquire, which never held it) ran this fire.
        const { grants } = await locks.history(resourceId, { before: grant.id, limit: 10 });
        if (grants.some((g) => g.releasedBy !== 'withdrawn') || !(await grant.extend(ttlMs))) {
          await grant.release();
          return false;
        }
      } catch (err) {
        await grant.release().catch(() => undefined);
        throw err;
      }
      held.set(key, grant);
      return true;
    },

    async onComplete(key: string): Promise<void> {
      const grant = held.get(key);
      held.delete(key);
      if (grant === undefined) return;
      if (lockAtLeastFor === 0) {
        await grant.release();
        return;
      }
      // Not awaited: node-cron waits for onComplete before it settles the run.
      const ageMs = async (): Promise<number | null> =>
        (await locks.inspect(grant.resourceId)).holders.find((h) => h.id === grant.id)?.ageMs ?? null;
      void releaseAfterAtLeast(grant, lockAtLeastFor, ageMs).catch(() => undefined);
    },
  };
}

/** What marks a fire's id as `prefix`, this, and the SHA-256 of node-cron's key (see fireResourceId). */
export const HASHED_KEY_MARK = 'sha256:';

/**
 * The resource id of a fire: `prefix` and node-cron's key (the task's name, `:`, the fire time) as
 * they are when that fits a resource id (`LIMITS.maxResourceIdBytes`), else `prefix`,
 * HASHED_KEY_MARK and the SHA-256 of the key's UTF-16 code units in hex: a fixed length, a
 * distinct id for each key (its code units, so even a lone surrogate tells keys apart; the key
 * holds the fire time, so each fire has its own), never one a key that fits could make (that
 * ends with the fire time, which is not 64 hex digits). Mapped rather than refused:
 * node-cron hands the coordinator a task's name only inside the key of its first fire, so no
 * refusal could come before a fire, and a refusal at a fire is only logged by node-cron, the job
 * never running. Ids that fit stay as they were, so a rolling upgrade claims each fire once.
 */
export function fireResourceId(prefix: string, key: string): string {
  const plain = prefix + key;
  if (plain.isWellFormed() && Buffer.byteLength(plain, 'utf8') <= LIMITS.maxResourceIdBytes) return plain;
  return prefix + HASHED_KEY_MARK + createHash('sha256').update(Buffer.from(key, 'utf16le')).digest('hex');
}
