// A database that cannot be reached (rule 4 of the contract in docs/api.md): a statement that was
// never sent is not a lost reply. A try rejects at once with DatabaseUnreachableError; a waiting
// call tries again with growing pauses and ends by its waitMs (LockTimeoutError, waitedFor 'server',
// the DatabaseUnreachableError its cause), or at once on its signal; every other call but release()
// rejects at once with DatabaseUnreachableError; the server
// is not hammered (connection attempts are counted on a local listener, and a caller that retries
// without pausing, the negative control, makes many more in the same time); `release()` with no
// connection to be had sends it again for resolveTimeoutMs, then reports it and leaves the grant as it is.
// covers: src/sql/unreachable.ts, src/sql/retry.ts, src/sql/connection.ts
import { createServer, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import type { Knex } from 'knex';
import { connectKnex } from '../harness/database.js';
import { freePort } from '../harness/server.js';
import {
  createLockManager,
  DatabaseUnreachableError,
  LockAbortedError,
  LockOutcomeUnknownError,
  LockTimeoutError,
  type LockManager,
} from '../src/index.js';
import { withConnection } from '../src/sql/connection.js';
import {
  checkLockCounts,
  migrate,
  purgeReleasedGrants,
  reapStaleGrants,
  repairLockCounts,
} from '../src/admin/index.js';
import { UNREACHABLE_PAUSE_MAX_MS, UNREACHABLE_PAUSE_MIN_MS } from '../src/sql/retry.js';
import { useTestDatabase } from './support/db.js';
import { proxyFor } from './support/proxy.js';
import { grantRow } from './support/state.js';

const db = useTestDatabase(import.meta.filename);

/** Far above anything below: the old behaviour settled a never-sent acquire for this long. */
const RESOLVE_TIMEOUT_MS = 10_000;

/** A port where something accepts TCP connections and closes each at once, counting them. */
async function closingListener(): Promise<{ port: number; attempts: () => number; close: () => Promise<void> }> {
  let attempts = 0;
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    attempts++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : 0,
    attempts: () => attempts,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * The most connection attempts a call waiting `waitMs` may make: one, then one after each pause,
 * and each pause lasts at least half its nominal value (UNREACHABLE_PAUSE_MIN_MS doubling, up to
 * UNREACHABLE_PAUSE_MAX_MS), the last one cut short by the deadline.
 */
function attemptBound(waitMs: number): number {
  let pauses = 0;
  for (let waited = 0; waited < waitMs; pauses++)
    waited += Math.min(UNREACHABLE_PAUSE_MAX_MS, UNREACHABLE_PAUSE_MIN_MS * 2 ** pauses) / 2;
  return 1 + pauses;
}

/**
 * What `call` settled with, and how long after it was called. The clock starts before the call: a
 * call takes its deadline in its synchronous part, which can last milliseconds (the first one
 * creates a pool connection synchronously), so a clock started on the promise it returned would
 * undercount the wait by that much.
 */
async function timed(call: () => Promise<unknown>): Promise<{ value: unknown; ms: number }> {
  const started = performance.now();
  const value = await call().then(
    (v) => v,
    (e: unknown) => (e instanceof Error ? e : new Error(String(e))),
  );
  return { value, ms: performance.now() - started };
}

function knexAt(port: number): Knex {
  return connectKnex(`mysql://root@127.0.0.1:${port}/`, 'nowhere', { poolMax: 4 });
}

describe('nothing answers on the server port', () => {
  it('a try rejects at once with DatabaseUnreachableError, not after resolveTimeoutMs with LockOutcomeUnknownError', async () => {
    const listener = await closingListener();
    const refused = knexAt(await freePort()); // nothing listens there: ECONNREFUSED
    const closing = knexAt(listener.port);
    try {
      for (const k of [refused, closing]) {
        const locks = createLockManager({ knex: k, resolveTimeoutMs: RESOLVE_TIMEOUT_MS });
        for (const attempt of [() => locks.tryAcquireWrite('x'), () => locks.tryAcquireRead('x')]) {
          const { value, ms } = await timed(attempt);
          expect(value).toBeInstanceOf(DatabaseUnreachableError);
          expect(value).not.toBeInstanceOf(LockOutcomeUnknownError);
          expect((value as DatabaseUnreachableError).code).toBe('ERR_RWLOCK_UNREACHABLE');
          expect(ms).toBeLessThan(RESOLVE_TIMEOUT_MS / 5);
        }
      }
      // One connection attempt per try: no settling of a reply that never was.
      expect(listener.attempts()).toBeLessThanOrEqual(2);
    } finally {
      await refused.destroy();
      await closing.destroy();
      await listener.close();
    }
  });

  it('a wait ends by its waitMs, a signal at once, a section too; the attempts stay within the pauses', async () => {
    const waitMs = 2_000;
    // Each call on a listener, knex and manager of its own, its attempts counted once its knex is
    // destroyed: whatever it left running in the background is counted as its own.
    const alone = async (
      run: (locks: LockManager) => Promise<unknown>,
    ): Promise<{ value: unknown; ms: number; attempts: number }> => {
      const listener = await closingListener();
      const k = knexAt(listener.port);
      const locks = createLockManager({ knex: k, resolveTimeoutMs: RESOLVE_TIMEOUT_MS });
      try {
        const { value, ms } = await timed(() => run(locks));
        await locks.close();
        await k.destroy();
        return { value, ms, attempts: listener.attempts() };
      } finally {
        await k.destroy();
        await listener.close();
      }
    };
    for (const run of [
      (locks: LockManager) => locks.acquireWrite('x', { waitMs }),
      (locks: LockManager) => locks.withReadLock('x', async () => 'ran', { waitMs }),
      (locks: LockManager) => locks.withWriteLock('x', async () => 'ran', { waitMs, section: true }),
      (locks: LockManager) => locks.withLocks({ write: ['x', 'y'] }, async () => 'ran', { waitMs }),
    ]) {
      const { value, ms, attempts } = await alone(run);
      // The wait ran out: a timeout, whatever it waited for; that it was the server is in waitedFor and cause.
      expect(value).toBeInstanceOf(LockTimeoutError);
      expect((value as LockTimeoutError).waitedFor).toBe('server');
      expect((value as LockTimeoutError).cause).toBeInstanceOf(DatabaseUnreachableError);
      // Tried again until the wait was used up, not given up at the first refusal: every wait ends
      // only once performance.now() has passed the deadline it took when called.
      expect(ms).toBeGreaterThanOrEqual(waitMs);
      expect(ms).toBeLessThan(waitMs + UNREACHABLE_PAUSE_MAX_MS);
      expect(attempts).toBeLessThanOrEqual(attemptBound(waitMs));
    }
    for (const run of [
      (locks: LockManager, signal: AbortSignal) => locks.acquireRead('x', { waitMs: 30_000, signal }),
      (locks: LockManager, signal: AbortSignal) =>
        locks.withReadLock('x', async () => 'ran', { waitMs: 30_000, signal, section: true }),
    ]) {
      const { value, ms } = await alone((locks) => run(locks, AbortSignal.timeout(500)));
      expect(value).toBeInstanceOf(LockAbortedError);
      expect(ms).toBeLessThan(500 + UNREACHABLE_PAUSE_MAX_MS);
    }
  });

  it('negative control: a caller that retries without pausing makes far more attempts in the same time', async () => {
    const listener = await closingListener();
    const k = knexAt(listener.port);
    const waitMs = 2_000;
    try {
      const until = performance.now() + waitMs;
      while (performance.now() < until) await withConnection(k, async () => undefined).catch(() => undefined);
      expect(listener.attempts()).toBeGreaterThan(attemptBound(waitMs));
    } finally {
      await k.destroy();
      await listener.close();
    }
  });
});

describe('release() with no connection to be had', () => {
  it('rejects with DatabaseUnreachableError that says the grant is as it was; the grant stays live and held', async () => {
    const { proxy, url } = await proxyFor(db.url);
    const k = connectKnex(url.toString(), db.name, { poolMax: 2 });
    try {
      const locks = createLockManager({ knex: k, resolveTimeoutMs: RESOLVE_TIMEOUT_MS });
      const grant = await locks.acquireWrite('release-unreachable');
      await proxy.close(); // open connections cut, new ones refused
      // Once the pool has found its connection dead (a statement in flight when it died would be a
      // lost reply, settled as such), no connection can be had.
      await expect
        .poll(() => withConnection(k, async () => 'connected').catch((e: unknown) => (e as Error).constructor.name))
        .toBe('DatabaseUnreachableError');
      // Every other call on the grant rejects at once: nothing was sent, and no outcome is unknown.
      for (const [name, call] of [
        ['isLive', () => grant.isLive()],
        ['extend', () => grant.extend(1_000)],
      ] as const) {
        const other = await timed(call);
        expect(other.value, name).toBeInstanceOf(DatabaseUnreachableError);
        expect(other.value, name).not.toBeInstanceOf(LockOutcomeUnknownError);
        expect(other.ms, name).toBeLessThan(RESOLVE_TIMEOUT_MS / 5);
      }
      const { value, ms } = await timed(() => grant.release());
      expect(value).toBeInstanceOf(DatabaseUnreachableError);
      expect((value as Error).message).toMatch(/release of grant \d+: no connection.*the grant is as it was/);
      // Sent again after growing pauses for resolveTimeoutMs (a release dropped at the first refusal
      // would leave the grant live until the reaper), then given up with the typed error.
      expect(ms).toBeGreaterThanOrEqual(RESOLVE_TIMEOUT_MS);
      expect((value as DatabaseUnreachableError).grantId).toBe(grant.id);
      expect(grant.settled).toBe(false);
      expect(await grantRow(db.knex, grant.id)).toMatchObject({ status: 0 });
      expect(await createLockManager({ knex: db.knex }).forceRelease(grant.id)).toBe(true);
    } finally {
      await k.destroy();
      await proxy.close();
    }
  });
});

describe('every other call with no connection to be had rejects at once with DatabaseUnreachableError', () => {
  it('operator calls and admin functions: at once, never LockOutcomeUnknownError', async () => {
    const refused = knexAt(await freePort()); // nothing listens there: ECONNREFUSED
    try {
      const locks = createLockManager({ knex: refused, resolveTimeoutMs: RESOLVE_TIMEOUT_MS });
      for (const [name, call] of [
        ['inspect', () => locks.inspect('x')],
        ['list', () => locks.list()],
        ['history', () => locks.history('x')],
        ['stats', () => locks.stats()],
        ['forceRelease', () => locks.forceRelease(1)],
        ['reapStaleGrants', () => reapStaleGrants(refused, { staleAfterMs: 60_000 })],
        ['purgeReleasedGrants', () => purgeReleasedGrants(refused, { retentionMs: 86_400_000 })],
        ['checkLockCounts', () => checkLockCounts(refused)],
        ['repairLockCounts', () => repairLockCounts(refused)],
        ['migrate', () => migrate(refused)],
      ] as const) {
        const { value, ms } = await timed(call);
        expect(value, name).toBeInstanceOf(DatabaseUnreachableError);
        expect(value, name).not.toBeInstanceOf(LockOutcomeUnknownError);
        expect(ms, name).toBeLessThan(RESOLVE_TIMEOUT_MS / 5);
      }
    } finally {
      await refused.destroy();
    }
  });
});
