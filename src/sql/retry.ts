import type { Knex } from 'knex';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  isConflict,
  isConnectionLost,
  isLockWaitTimeout,
  withConnection,
  withLockWaitTimeout,
  type RawConnection,
} from './connection.js';
import {
  ConnectionLostError,
  DatabaseUnreachableError,
  NodeNotReadyError,
  RwLockError,
  ServerReadOnlyError,
  TransactionConflictError,
} from '../errors.js';

export interface RetryPolicy {
  /** Runs after the first of a transaction that a conflict rolled back, or whose connection died before it could commit. */
  retries: number;
  /** How long to keep asking the database for the outcome of a commit whose reply was lost. */
  resolveTimeoutMs: number;
}

/** What the database says about an attempt whose connection died with the outcome open. */
export type Settled<T> = { value: T } | 'retry';

/** The pause before the first rerun after a conflict may last up to this; it doubles per conflict, up to CONFLICT_BACKOFF_CAP_MS. */
export const CONFLICT_BACKOFF_BASE_MS = 10;
export const CONFLICT_BACKOFF_CAP_MS = 160;

/**
 * The pause before rerunning a transaction after its `attempts`-th conflict: full jitter, a random
 * delay in [0, min(cap, base * 2^(attempts - 1))]. The transactions that conflicted were running
 * at the same moment; rerun at once, they meet again (on a multi-primary cluster the rival is
 * still being certified on the other members). Random spreads them apart, growing gives a busy
 * row more room. Bounded: with the default 5 retries, at most 10 + 20 + 40 + 80 + 160 = 310 ms in all.
 */
export function conflictBackoffMs(attempts: number): number {
  return Math.random() * Math.min(CONFLICT_BACKOFF_CAP_MS, CONFLICT_BACKOFF_BASE_MS * 2 ** Math.min(attempts - 1, 20));
}

/** The first pause after a connection that could not be had; it doubles per failure, up to UNREACHABLE_PAUSE_MAX_MS. */
export const UNREACHABLE_PAUSE_MIN_MS = 50;
export const UNREACHABLE_PAUSE_MAX_MS = 1_000;

/**
 * After a pause for an unreachable server, the least of the wait that must be left to try again. A
 * timer can end up to a millisecond before the time it was set for, as performance.now() reads it:
 * an attempt begun in that last millisecond could not have its connection, but the pool would go on
 * making it after the wait had ended.
 */
export const UNREACHABLE_LAST_ATTEMPT_MS = 2;

/**
 * After a pause for an unreachable server: true when less than `UNREACHABLE_LAST_ATTEMPT_MS` of the
 * wait is left, once the rest of it has passed, so the wait still ends only after its deadline, as
 * every wait does; false when there is time for another attempt.
 */
export async function waitedOut(deadline: number): Promise<boolean> {
  const left = deadline - performance.now();
  if (left >= UNREACHABLE_LAST_ATTEMPT_MS) return false;
  if (left >= 0) await sleep(left + 1);
  return true;
}

/**
 * The pause after the `failures`-th connection in a row (from 0) that could not be had: random in
 * [d/2, d] for d = min(max, min * 2^failures). A server that is down or refusing connections is
 * asked at most about once a second once it has been down for a few seconds, however many calls
 * wait on it, and never more often than every 25 ms.
 */
export function unreachablePauseMs(failures: number): number {
  const d = Math.min(UNREACHABLE_PAUSE_MAX_MS, UNREACHABLE_PAUSE_MIN_MS * 2 ** Math.min(failures, 20));
  return d / 2 + Math.random() * (d / 2);
}

/**
 * The one retry policy of the library, for its own transactions and for business transactions:
 * - a conflict (deadlock or a cluster's certification failure) rolled the attempt back whole: run
 *   it again after a short random pause (`conflictBackoffMs`), at most `retries` more times, then
 *   TransactionConflictError;
 * - the connection died with the attempt in flight: `settle` learns from the database whether it
 *   committed and answers its value, or 'retry' when it certainly did not and a new attempt is
 *   safe (it throws when neither holds). Without `settle`, ConnectionLostError;
 * - anything else is thrown as it is (schema and invariant errors typed).
 * `beforeRerun` runs before a conflict's rerun, with the conflict and the attempts so far, and may
 * end the loop by throwing.
 */
export async function withRetries<T>(
  policy: RetryPolicy,
  what: string,
  attempt: () => Promise<T>,
  settle: ((err: unknown) => Promise<Settled<T>>) | null,
  beforeRerun?: (conflict: unknown, attempts: number) => Promise<void>,
): Promise<T> {
  for (let n = 1; ; n++) {
    try {
      return await attempt();
    } catch (err) {
      if (isConflict(err)) {
        if (n > policy.retries) throw new TransactionConflictError(what, n, err);
        await sleep(conflictBackoffMs(n));
        await beforeRerun?.(err, n);
        continue;
      }
      if (!isConnectionLost(err)) throw err;
      if (settle === null) throw new ConnectionLostError(what, err);
      const outcome = await settle(err);
      if (outcome !== 'retry') return outcome.value;
      if (n > policy.retries) throw new ConnectionLostError(what, err);
    }
  }
}

const PROBE_LOCK_WAIT_SEC = 1;
const PROBE_PAUSE_MS = 50;

/**
 * Asks the database, on a fresh connection, until it answers or `timeoutMs` passes (then
 * undefined). A probe may wait on a row that the lost transaction still holds while its server
 * thread finishes, so it runs with a short lock wait timeout and is repeated. Any other failure to
 * get an answer (a server restarting or failing over refuses, times out, or has no free
 * connection) is retried the same way: until the deadline, not knowing is the only honest answer.
 * Only the library's own typed errors (a missing schema, counts changed by hand) end it at once;
 * a read-only server or a Galera node that is not ready is asked again, as a failover or a rejoin
 * may be about to make it writable.
 */
export async function askDatabase<T>(
  db: Knex,
  timeoutMs: number,
  probe: (conn: RawConnection) => Promise<T>,
): Promise<{ answer: T } | undefined> {
  const deadline = performance.now() + timeoutMs;
  for (let unreachable = 0; ;) {
    let pause = PROBE_PAUSE_MS;
    try {
      return {
        answer: await withConnection(db, (conn) => withLockWaitTimeout(conn, PROBE_LOCK_WAIT_SEC, () => probe(conn))),
      };
    } catch (err) {
      // No connection: a server restarting or failing over. Asked again after pauses that grow, not
      // hammered while it is down.
      if (err instanceof DatabaseUnreachableError) pause = unreachablePauseMs(unreachable++);
      // A read-only server, or a node not ready, is one a failover or rejoin has not finished with: ask again.
      else if (
        err instanceof RwLockError &&
        !(err instanceof ServerReadOnlyError) &&
        !(err instanceof NodeNotReadyError)
      )
        throw err;
    }
    const left = deadline - performance.now();
    if (left <= 0) return undefined;
    await sleep(Math.min(pause, left));
  }
}

/**
 * Sends a one-statement write of the library's (a release) again while it fails on a row lock it
 * could not have within the server's lock wait timeout (1205: the row of a fence in flight, whose
 * business transaction has yet to commit, or of a heal, reap or repair): the statement was rolled
 * back, nothing changed, so sending it again is safe. For up to the policy's `resolveTimeoutMs`,
 * then TransactionConflictError with the last 1205 as its cause: never the server's raw error.
 */
export async function whileRowBusy<T>(policy: RetryPolicy, what: string, send: () => Promise<T>): Promise<T> {
  const deadline = performance.now() + policy.resolveTimeoutMs;
  for (let n = 1; ; n++) {
    try {
      return await send();
    } catch (err) {
      if (!isLockWaitTimeout(err)) throw err;
      if (performance.now() >= deadline) throw new TransactionConflictError(what, n, err);
    }
  }
}
