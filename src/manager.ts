import type { Knex } from 'knex';
import { isConnectionLost, isDeadlock, query, withConnection } from './connection.js';
import { InvalidOptionsError, LockAbortedError, LockLostError, LockOutcomeUnknownError, LockTimeoutError } from './errors.js';
import { Grant } from './grant.js';
import { resolveCallOptions, resolveManagerOptions, integerOption, type AcquireOptions, type LockManagerOptions, type ResolvedManagerOptions, type WithLockOptions } from './options.js';
import { resolveLost } from './resolve.js';
import { resourceKey } from './resource-id.js';
import { callAcquire } from './sql/acquire.js';
import { inspectResource, type LockState } from './sql/inspect.js';
import { findGrantById, findGrantByToken } from './sql/lookup.js';
import { callRelease } from './sql/release.js';
import { newToken } from './token.js';
import { RELEASED_BY, STATUS, modeOf, type LockMode } from './types.js';
import { backoffDelay, joinQueue } from './wait.js';

/** Business work run under a lock, inside the transaction the lock commits with. */
export type LockedWork<T> = (trx: Knex.Transaction, grant: Grant) => Promise<T>;

export class LockManager {
  readonly #o: ResolvedManagerOptions;

  constructor(options: LockManagerOptions) {
    this.#o = resolveManagerOptions(options);
  }

  /** The owner string recorded with this manager's grants. */
  get owner(): string {
    return this.#o.owner;
  }

  /** One attempt at a write lock: the Grant, or null when the resource is held. Takes no options. */
  tryAcquireWrite(resourceId: string, ...noOptions: never[]): Promise<Grant | null> {
    return this.#tryOnce('write', resourceId, noOptions, 'tryAcquireWrite');
  }

  /** One attempt at a read lock: the Grant, or null when a writer holds or waits. Takes no options. */
  tryAcquireRead(resourceId: string, ...noOptions: never[]): Promise<Grant | null> {
    return this.#tryOnce('read', resourceId, noOptions, 'tryAcquireRead');
  }

  /** Waits for a write lock: the Grant, or LockTimeoutError after `waitMs`, or AbortError. */
  acquireWrite(resourceId: string, options?: AcquireOptions): Promise<Grant> {
    return this.#acquire('write', resourceId, options, 'acquireWrite');
  }

  /** Waits for a read lock: the Grant, or LockTimeoutError after `waitMs`, or AbortError. */
  acquireRead(resourceId: string, options?: AcquireOptions): Promise<Grant> {
    return this.#acquire('read', resourceId, options, 'acquireRead');
  }

  /**
   * Runs `work` in a transaction under a write lock. The transaction commits only if the grant is
   * still live at commit time, and the release rides inside that commit; otherwise it rolls back
   * and LockLostError is thrown. The grant is released in every outcome. `work` may run again if
   * the transaction dies in a deadlock (1213), so keep side effects outside the database out of it.
   */
  withWriteLock<T>(resourceId: string, work: LockedWork<T>, options?: WithLockOptions): Promise<T> {
    return this.#withLock('write', resourceId, work, options, 'withWriteLock');
  }

  /** As withWriteLock, under a read lock. */
  withReadLock<T>(resourceId: string, work: LockedWork<T>, options?: WithLockOptions): Promise<T> {
    return this.#withLock('read', resourceId, work, options, 'withReadLock');
  }

  /** Lock counts and live grants of a resource, on the database clock. */
  async inspect(resourceId: string): Promise<LockState> {
    const resource = resourceKey(resourceId);
    return withConnection(this.#o.knex, (conn) => inspectResource(conn, resourceId, resource, this.#o.staleAfterMs));
  }

  /** Releases any live grant by id as an operator. True when it was live and is now released. */
  async forceRelease(grantId: number): Promise<boolean> {
    integerOption('grantId', grantId, 1);
    return withConnection(this.#o.knex, async (conn) => {
      const rows = await query<Array<{ resource_id: Buffer; lock_type: number }>>(
        conn, 'SELECT resource_id, lock_type FROM t_lock_log WHERE id = ?', [grantId],
      );
      const row = rows[0];
      if (!row) return false;
      const { released } = await callRelease(conn, { id: grantId, resource: row.resource_id, mode: modeOf(row.lock_type) }, 'operator', false);
      return released;
    });
  }

  async #tryOnce(mode: LockMode, resourceId: string, extra: unknown[], what: string): Promise<Grant | null> {
    const resource = resourceKey(resourceId);
    // An options object here would otherwise be ignored silently, e.g. a waitMs the caller relies on.
    if (extra.length > 0) throw new InvalidOptionsError(`${what} takes no options (one attempt); use ${what.replace('try', '').replace(/^A/, 'a')}(id, { waitMs }) to wait`);
    return this.#attempt(mode, resourceId, resource, 0);
  }

  async #acquire(mode: LockMode, resourceId: string, options: AcquireOptions | undefined, what: string): Promise<Grant> {
    const resource = resourceKey(resourceId);
    const { waitMs, signal } = resolveCallOptions(what, options, false);
    const hex = resource.toString('hex');
    const startedAt = Date.now();
    const deadline = startedAt + waitMs;
    const intentMs = mode === 'write' && waitMs > 0 ? this.#o.writerIntentMs : 0;
    if (signal?.aborted) throw new LockAbortedError(signal.reason);
    if (waitMs === 0) {
      const grant = await this.#attempt(mode, resourceId, resource, intentMs);
      if (grant) return this.#unlessAborted(grant, signal);
      throw new LockTimeoutError(resourceId, mode, waitMs);
    }
    // Queue behind this process's earlier waiters of the resource (FIFO): only the head polls, and
    // a holder that releases and re-acquires in a loop cannot barge past them.
    const ticket = joinQueue(hex, mode);
    let granted: LockMode | null = null;
    try {
      if (!ticket.isHead) {
        if (!(await ticket.untilHead(deadline, signal))) throw new LockTimeoutError(resourceId, mode, waitMs);
        const behind = ticket.takeBehindWriter();
        if (behind !== null) {
          // The previous head was just granted a conflicting lock: wait for its release (a local
          // release wakes us at once), polling in case it is released elsewhere.
          await ticket.pause(Math.min(Math.max(0, deadline - Date.now()), this.#o.backoffMaxMs), signal, behind);
        }
      }
      for (let attempt = 0; ; attempt++) {
        if (signal?.aborted) throw new LockAbortedError(signal.reason);
        const seen = ticket.epoch;
        const grant = await this.#attempt(mode, resourceId, resource, intentMs);
        if (grant) {
          granted = signal?.aborted ? null : mode;
          return await this.#unlessAborted(grant, signal);
        }
        const remaining = deadline - Date.now();
        if (remaining <= 0) throw new LockTimeoutError(resourceId, mode, waitMs);
        // A release in this process during the failed attempt: try again at once, backoff restarted.
        if (ticket.epoch !== seen) {
          attempt = -1;
          continue;
        }
        await ticket.pause(Math.min(remaining, backoffDelay(attempt, this.#o.backoffMinMs, this.#o.backoffMaxMs, Date.now() - startedAt)), signal, seen);
      }
    } finally {
      ticket.leave(granted);
    }
  }

  async #unlessAborted(grant: Grant, signal: AbortSignal | undefined): Promise<Grant> {
    if (signal?.aborted) {
      await grant.release();
      throw new LockAbortedError(signal.reason);
    }
    return grant;
  }

  /** One acquire round trip, retried on deadlock; a lost reply is settled by looking the token up. */
  async #attempt(mode: LockMode, resourceId: string, resource: Buffer, intentMs: number): Promise<Grant | null> {
    const token = newToken();
    const { knex, owner } = this.#o;
    for (let attempt = 0; ; attempt++) {
      let threadId: number | null = null;
      try {
        const id = await withConnection(knex, (conn) => {
          threadId = conn.threadId;
          return callAcquire(conn, resource, mode, owner, token, intentMs);
        });
        return id === null ? null : new Grant(this.#o, id, resourceId, resource, mode, owner, token);
      } catch (err) {
        if (isDeadlock(err) && attempt < this.#o.deadlockRetries) continue;
        if (!isConnectionLost(err)) throw err;
        const answer = await resolveLost(knex, threadId, this.#o.resolveTimeoutMs, (c) => findGrantByToken(c, token));
        if (answer === undefined) throw new LockOutcomeUnknownError('acquire', token.toString('hex'), null, err);
        const row = answer.grant;
        if (row === null) {
          if (attempt < this.#o.deadlockRetries) continue; // definitely not granted: a new attempt is safe
          throw err;
        }
        const grant = new Grant(this.#o, row.id, resourceId, resource, mode, owner, token);
        if (row.status === STATUS.released) {
          grant.settle();
          return null;
        }
        return grant;
      }
    }
  }

  async #withLock<T>(mode: LockMode, resourceId: string, work: LockedWork<T>, options: WithLockOptions | undefined, what: string): Promise<T> {
    resourceKey(resourceId); // validate before anything else
    const { isolationLevel, leaseMs } = resolveCallOptions(what, options, true);
    if (typeof work !== 'function') throw new InvalidOptionsError(`work: ${what} needs a function (trx, grant) => Promise`);
    const acquireOptions: AcquireOptions = {};
    if (options?.waitMs !== undefined) acquireOptions.waitMs = options.waitMs;
    if (options?.signal !== undefined) acquireOptions.signal = options.signal;
    const grant = await this.#acquire(mode, resourceId, acquireOptions, what);
    const keepAlive = leaseMs === undefined ? undefined : keepLeaseAhead(grant, leaseMs);
    try {
      await keepAlive?.first;
      return await this.#runFenced(grant, work, isolationLevel);
    } finally {
      keepAlive?.stop();
      if (!grant.settled) await grant.release().catch(() => undefined); // the reaper cleans up if this fails too
    }
  }

  async #runFenced<T>(grant: Grant, work: LockedWork<T>, isolationLevel: WithLockOptions['isolationLevel']): Promise<T> {
    const { knex } = this.#o;
    const ref = grant.ref;
    for (let attempt = 0; ; attempt++) {
      let commitSent = false;
      let threadId: number | null = null;
      let value: T | undefined;
      let inner: unknown;
      try {
        await knex.transaction(async (trx) => {
          try {
            value = await work(trx, grant);
          } catch (e) {
            inner = e;
            throw e;
          }
          // The fence: the last statement moves the grant row out of status 0/1 and gives the
          // count back. If the reaper got there first it changes nothing and we roll back.
          const raw = await trx.raw('CALL rwlock_release(?, ?, ?, ?, 1)', [ref.id, ref.resource, ref.mode === 'write' ? 0 : 1, RELEASED_BY.holder]);
          const row = (raw as unknown as [[[{ released: number | string; connection_id: number | string }]]])[0][0][0];
          if (Number(row.released) !== 1) throw new LockLostError(grant.id);
          threadId = Number(row.connection_id);
          commitSent = true;
        }, isolationLevel ? { isolationLevel } : undefined);
        grant.settle();
        return value as T;
      } catch (caught) {
        // When the connection died inside the transaction, knex's ROLLBACK fails too and replaces
        // the error the work threw; the work's own error says what happened.
        const err = inner ?? caught;
        if (err instanceof LockLostError) {
          grant.markLost();
          throw err;
        }
        if (isDeadlock(err) && attempt < this.#o.deadlockRetries) continue; // rolled back whole; the grant is still ours
        if (!commitSent || !isConnectionLost(err)) throw err;
        const answer = await resolveLost(knex, threadId, this.#o.resolveTimeoutMs, (c) => findGrantById(c, grant.id));
        if (answer === undefined) throw new LockOutcomeUnknownError('business commit', grant.token, grant.id, err);
        const row = answer.grant;
        if (row?.status === STATUS.released) {
          grant.settle();
          if (row.releasedBy === RELEASED_BY.holder) return value as T; // the commit went through
          grant.markLost();
          throw new LockLostError(grant.id);
        }
        throw err; // definitely rolled back; the grant is released by the caller
      }
    }
  }
}

/**
 * Extends the grant's lease to `leaseMs` ahead now and every third of it until stopped. A failed
 * extension (database unreachable) is retried on the next tick; one that finds the grant gone
 * aborts `grant.signal` and stops.
 */
function keepLeaseAhead(grant: Grant, leaseMs: number): { first: Promise<unknown>; stop(): void } {
  const tick = (): Promise<unknown> => grant.extend(leaseMs).then((live) => live || stop(), () => undefined);
  const timer = setInterval(() => void tick(), Math.max(10, Math.floor(leaseMs / 3)));
  timer.unref();
  const stop = (): void => clearInterval(timer);
  return { first: tick(), stop };
}

/** Creates a lock manager over a knex (mysql2) instance. Options are validated here, once. */
export function createLockManager(options: LockManagerOptions): LockManager {
  return new LockManager(options);
}
