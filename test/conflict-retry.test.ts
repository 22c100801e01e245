// Conflicts (deadlocks, a cluster's certification failures) on the lock's own transactions: reruns
// are spread by a bounded, growing, random pause, and an acquire that may wait treats an attempt
// whose every try conflicted like a refusal: it waits and tries again until its deadline, instead
// of failing the caller's operation with ERR_RWLOCK_CONFLICT, and a try answers null. (bench/gr-conflicts.ts measures it
// on a Group Replication multi-primary cluster.)
// covers: src/sql/retry.ts, src/lock/durable/durable-acquire.ts
import { describe, expect, it } from 'vitest';
import { createLockManager, DEFAULTS } from '../src/index.js';
import { CONFLICT_BACKOFF_BASE_MS, CONFLICT_BACKOFF_CAP_MS, conflictBackoffMs } from '../src/sql/retry.js';
import { TEST_PROCEDURES, useTestDatabase } from './support/db.js';
import { useProxiedKnex } from './support/proxy.js';
import { invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);
const via = useProxiedKnex(db);

const DEADLOCK = {
  errno: 1213,
  sqlState: '40001',
  message: 'Deadlock found when trying to get lock; try restarting transaction',
};
/** The acquire's deciding write: the procedure's CALL, or the plain statements' guarded UPDATE. */
const ACQUIRE = TEST_PROCEDURES ? /CALL rwlock_acquire/ : /^UPDATE t_read_write_lock SET w_count = 1/;

/** The next `n` acquire writes are not run (DO 0 instead) and answered with a deadlock. */
function conflicts(n: number): Promise<string[]> {
  return Promise.all(Array.from({ length: n }, () => via.proxy.armErrorReply(ACQUIRE, DEADLOCK, 'DO 0')));
}

describe('the pause before a rerun after a conflict', () => {
  it('is random in [0, min(cap, base * 2^(n-1))]: growing, bounded, spread', () => {
    for (let n = 1; n <= 12; n++) {
      const bound = Math.min(CONFLICT_BACKOFF_CAP_MS, CONFLICT_BACKOFF_BASE_MS * 2 ** (n - 1));
      const samples = Array.from({ length: 5_000 }, () => conflictBackoffMs(n));
      expect(Math.min(...samples)).toBeGreaterThanOrEqual(0);
      expect(Math.max(...samples)).toBeLessThanOrEqual(bound);
      // Spread over the whole range (each bound below fails with probability 0.9^5000 or less).
      expect(Math.max(...samples)).toBeGreaterThan(0.9 * bound);
      expect(Math.min(...samples)).toBeLessThan(0.1 * bound);
    }
    const worst = Array.from({ length: DEFAULTS.deadlockRetries }, (_, i) =>
      Math.min(CONFLICT_BACKOFF_CAP_MS, CONFLICT_BACKOFF_BASE_MS * 2 ** i),
    );
    expect(worst.reduce((a, b) => a + b, 0)).toBe(310);
  });
});

describe('an acquire whose attempt conflicted on every try', () => {
  it('without waiting (tryAcquire): null after deadlockRetries + 1 tries (contention, not an error), nothing granted', async () => {
    const fired = conflicts(DEFAULTS.deadlockRetries + 1);
    expect(await createLockManager({ knex: via.knex }).tryAcquireWrite('conflicted-try')).toBeNull();
    expect(await fired).toHaveLength(DEFAULTS.deadlockRetries + 1);
    expect((await createLockManager({ knex: db.knex }).inspect('conflicted-try')).holders).toEqual([]);
  });

  it('waiting (acquireWrite, withWriteLock): tries again within waitMs and is granted', async () => {
    const locks = createLockManager({ knex: via.knex });
    // More conflicts than one attempt's tries: the first attempt fails whole, the second is granted.
    let fired = conflicts(DEFAULTS.deadlockRetries + 3);
    const g = await locks.acquireWrite('conflicted-wait', { waitMs: 60_000 });
    expect(await fired).toHaveLength(DEFAULTS.deadlockRetries + 3);
    expect(await g.release()).toBe(true);
    fired = conflicts(DEFAULTS.deadlockRetries + 3);
    expect(await locks.withWriteLock('conflicted-wait', async () => 'ran', { waitMs: 60_000 })).toBe('ran');
    await fired;
    expect(await invariantViolations(db.knex)).toEqual([]);
  });
});
