import { RwLockError } from './error-base.js';

export { RwLockError };
export * from './errors-setup.js';

/** The resource id is not a non-empty, well-formed string of at most 255 UTF-8 bytes. */
export class InvalidResourceIdError extends RwLockError {
  constructor(message: string) {
    super('ERR_RWLOCK_INVALID_RESOURCE_ID', message);
  }
}

/** An option is unknown, of the wrong type or out of range. The message starts with the option's name. */
export class InvalidOptionsError extends RwLockError {
  constructor(message: string) {
    super('ERR_RWLOCK_INVALID_OPTIONS', message);
  }
}

/** A waiting acquire did not get the lock within `waitMs`. */
export class LockTimeoutError extends RwLockError {
  readonly resourceId: string;
  readonly waitMs: number;
  /**
   * What the wait was on when `waitMs` ran out: `'lock'` (the resource was held), `'pool'` (no pool
   * connection came free: a busy pool, the server reachable) or `'server'` (no connection could be
   * had: the last DatabaseUnreachableError is the `cause`).
   */
  readonly waitedFor: WaitedFor;
  constructor(resourceId: string, mode: string, waitMs: number, waitedFor: WaitedFor = 'lock', cause?: unknown) {
    super(
      'ERR_RWLOCK_TIMEOUT',
      `${mode} lock on ${JSON.stringify(resourceId)} not granted within ${waitMs} ms${WAITED_FOR[waitedFor]}`,
      cause === undefined ? undefined : { cause },
    );
    this.resourceId = resourceId;
    this.waitMs = waitMs;
    this.waitedFor = waitedFor;
  }
}

/** What a wait that ran out was on (LockTimeoutError's `waitedFor`). */
export type WaitedFor = 'lock' | 'pool' | 'server';
const WAITED_FOR: Readonly<Record<WaitedFor, string>> = {
  lock: '',
  pool: ' (waiting for a pool connection: the pool is busy)',
  server: ' (no connection to the database could be had; see cause)',
};

/**
 * A waiting acquire was cancelled through its AbortSignal (the signal's reason is the `cause`).
 * `name` is 'AbortError', as for fetch(), so code that checks `err.name === 'AbortError'` treats it
 * alike; `code` follows the library's scheme.
 */
export class LockAbortedError extends RwLockError {
  constructor(reason?: unknown) {
    super('ERR_RWLOCK_ABORTED', 'lock acquisition aborted', { cause: reason });
    this.name = 'AbortError';
  }
}

/**
 * The grant was released by someone else (the reaper or an operator) before the business
 * transaction could commit. The business transaction was rolled back.
 */
export class LockLostError extends RwLockError {
  readonly grantId: number;
  constructor(grantId: number, detail = 'it was released by the reaper or an operator') {
    super(
      'ERR_RWLOCK_LOST',
      `grant ${grantId} is no longer live (${detail}); the business transaction was rolled back`,
    );
    this.grantId = grantId;
  }
}

/**
 * The connection was lost while a commit was in flight, or the commit replied an error, and the
 * database did not say in time whether it committed (or, for a section run without history, had
 * no row to say it by). The grant token lets an operator look the row up; a grant left behind is
 * released by the reaper.
 */
export class LockOutcomeUnknownError extends RwLockError {
  readonly token: string;
  readonly grantId: number | null;
  constructor(
    what: string,
    token: string,
    grantId: number | null,
    cause: unknown,
    why = 'the database did not answer in time',
  ) {
    super(
      'ERR_RWLOCK_OUTCOME_UNKNOWN',
      `connection lost or commit failed during ${what}, and ${why}: whether it committed is unknown (grant token ${token})`,
      { cause },
    );
    this.token = token;
    this.grantId = grantId;
  }
}

/**
 * The database handed out a grant id past `Number.MAX_SAFE_INTEGER` (2^53 − 1), which a `Grant.id`
 * (a number) cannot hold exactly: every later statement would name another grant or none. The
 * acquire does not hand it out: it releases that grant by its token first (`released`; when the
 * database did not answer, the reaper releases it). Told apart by `code`; see docs/errors.md.
 */
export class GrantIdRangeError extends RwLockError {
  /** The grant's exact id, as decimal digits (or the rounded one when it could not be read). */
  readonly grantId: string;
  /** True when this acquire released it; false when it was no longer live, or the database did not answer (then the reaper releases it). */
  readonly released: boolean;
  constructor(grantId: string, outcome: 'released' | 'not live' | 'unknown') {
    super(
      'ERR_RWLOCK_GRANT_ID_RANGE',
      `the database gave grant id ${grantId}, past 2^53 - 1, which a JavaScript number cannot hold exactly; ` +
        {
          released: 'the grant was released and not handed out. ',
          'not live': 'the grant is no longer live and was not handed out. ',
          unknown: 'the database did not answer its release: the reaper releases it. ',
        }[outcome] +
        't_lock_log ids reached it through an explicit id inserted by hand or a large auto_increment_increment: ' +
        'delete the log rows with id > 9007199254740991 (none is live) and run ALTER TABLE t_lock_log AUTO_INCREMENT = 1 ' +
        '(the server moves it just past the largest id left); see docs/data-model.md',
    );
    this.grantId = grantId;
    this.released = outcome === 'released';
  }
}

/** The lock tables disagree with the grant log; the transaction was rolled back. Should never happen. */
export class LockInvariantError extends RwLockError {
  constructor(message: string, cause?: unknown) {
    super('ERR_RWLOCK_INVARIANT', message, { cause });
  }
}

/**
 * The connection of a lock or business transaction died before its commit was sent, so the
 * transaction was rolled back. For a business transaction the grant is still held by this process
 * and is released by the library (or, if the database cannot be reached, by the reaper).
 */
export class ConnectionLostError extends RwLockError {
  constructor(what: string, cause: unknown) {
    super('ERR_RWLOCK_CONNECTION_LOST', `connection lost during ${what} before it could commit; it was rolled back`, {
      cause,
    });
  }
}

/**
 * No connection to the database could be had, so no statement of the call was sent: nothing listens
 * on the server's port, the connect was refused or timed out, the server is at `max_connections`,
 * no pool connection came free in time, or a connection factory failed (e.g. while a failover has
 * no primary). It is not a lost reply: nothing changed, so there is nothing to settle. A call that
 * waits tries again, with pauses that grow to a second, until its `waitMs` or `signal` ends it; a
 * try and `release()` report it at once. The driver's or the pool's error is the `cause`.
 */
export class DatabaseUnreachableError extends RwLockError {
  /** A grant left live because its release could not be sent (the reaper takes it once stale); null when none. */
  readonly grantId: number | null;
  constructor(
    what: string,
    cause: unknown,
    consequence = 'no statement was sent, so nothing changed',
    grantId: number | null = null,
  ) {
    super(
      'ERR_RWLOCK_UNREACHABLE',
      `${what}: no connection to the database could be had (${describe(cause)}); ${consequence}`,
      { cause },
    );
    this.grantId = grantId;
  }
}

/** A cause's message for another error's, never throwing (a cause can be anything a factory rejects with). */
function describe(cause: unknown): string {
  try {
    const e = cause as { code?: unknown; message?: unknown } | null;
    const code = typeof e?.code === 'string' ? `${e.code}: ` : '';
    const message = typeof e?.message === 'string' ? e.message : String(cause);
    return `${code}${message}`.slice(0, 300) || 'no detail';
  } catch {
    return 'no detail';
  }
}

/**
 * A transaction was rolled back by a deadlock, MariaDB's snapshot-isolation check (1020) or a
 * cluster's certification conflict (Galera 1213, Group Replication 3101 or 1180) on every one of
 * its attempts. Nothing was committed.
 */
export class TransactionConflictError extends RwLockError {
  readonly attempts: number;
  constructor(what: string, attempts: number, cause: unknown) {
    super(
      'ERR_RWLOCK_CONFLICT',
      `${what} was rolled back by a deadlock or certification conflict ${attempts} times; nothing was committed`,
      { cause },
    );
    this.attempts = attempts;
  }
}

/**
 * A write lock was asked for inside a read lock on the same resource in the same async context:
 * waiting could deadlock (two readers each waiting for the other to leave), so it is refused at
 * once. Take the write lock outside, or use `grant.tryUpgrade()`.
 */
export class LockUpgradeError extends RwLockError {
  readonly resourceId: string;
  constructor(resourceId: string) {
    super(
      'ERR_RWLOCK_UPGRADE',
      `write lock on ${JSON.stringify(resourceId)} requested inside a read lock on it: refused, as waiting could deadlock; take the write lock outside, or use grant.tryUpgrade()`,
    );
    this.resourceId = resourceId;
  }
}

/**
 * Something a one-commit section (`{ section: true }`) cannot do, refused at once with nothing
 * changed: a grant method with no meaning inside a section (its commit is the release, so there is
 * no `fence`, `release`, `extend`, `downgrade` or `tryUpgrade`), or a durable acquire of a resource
 * the enclosing section holds (it would wait on the section's own row lock until `waitMs`).
 * Not exported from the main entry (which keeps to its name budget): tell it by its `code`,
 * `ERR_RWLOCK_SECTION`, on an `RwLockError`.
 */
export class SectionError extends RwLockError {
  constructor(message: string) {
    super('ERR_RWLOCK_SECTION', message);
  }
}

/**
 * The knex pool is too small for what was asked: a fenced operation holds a connection for its
 * transaction, a nested one on another resource needs another, and a lease keep-alive one more.
 * Waiting would only end in knex's acquireConnectionTimeout.
 */
export class PoolTooSmallError extends RwLockError {
  readonly needed: number;
  readonly poolMax: number;
  constructor(needed: number, poolMax: number, why: string) {
    super(
      'ERR_RWLOCK_POOL_TOO_SMALL',
      `${why} needs ${needed} connections at once, but the knex pool allows ${poolMax}: raise pool.max`,
    );
    this.needed = needed;
    this.poolMax = poolMax;
  }
}

/**
 * The lock manager was closed (`close()` or `await using`): it refuses new calls, with nothing
 * written. Grants it gave out stay valid until released.
 */
export class ManagerClosedError extends RwLockError {
  constructor(what: string) {
    super('ERR_RWLOCK_CLOSED', `${what}: the lock manager is closed`);
  }
}

/**
 * A resource is held in another kind than the call asks for: a read or write lock asked where a
 * semaphore's permits hold it, or permits asked where readers or a writer hold it. Refused at once
 * (nothing written, no wait): the same id serves one kind at a time, and code that mixes them is
 * wrong whichever kind is granted first. An idle resource has no kind: its next holder gives it one.
 */
export class ResourceKindError extends RwLockError {
  readonly resourceId: string;
  /** What the call asked for. */
  readonly asked: 'read-write' | 'permit';
  constructor(resourceId: string, asked: 'read-write' | 'permit') {
    super(
      'ERR_RWLOCK_RESOURCE_KIND',
      asked === 'permit'
        ? `permits on ${JSON.stringify(resourceId)} refused: readers or a writer hold it (one id is a read-write lock or a semaphore, not both)`
        : `lock on ${JSON.stringify(resourceId)} refused: a semaphore's permits hold it (one id is a read-write lock or a semaphore, not both)`,
    );
    this.resourceId = resourceId;
    this.asked = asked;
  }
}

/**
 * Permits asked of a semaphore whose holders hold it under another limit (`permits`). Refused at
 * once, nothing written: one semaphore has one limit while it has holders, and a caller that
 * counted on its own would be wrong about how many run beside it. The limit is stored with the
 * semaphore's row; an idle semaphore takes the limit of its next holder.
 */
export class PermitLimitError extends RwLockError {
  readonly resourceId: string;
  readonly asked: number;
  /** The limit the current holders hold it under. */
  readonly heldLimit: number;
  constructor(resourceId: string, asked: number, heldLimit: number) {
    super(
      'ERR_RWLOCK_PERMIT_LIMIT',
      `permits on ${JSON.stringify(resourceId)} refused: asked with permits ${asked}, held under permits ${heldLimit}`,
    );
    this.resourceId = resourceId;
    this.asked = asked;
    this.heldLimit = heldLimit;
  }
}

/**
 * A campaign for leadership (`locks.campaign`) could not go on as asked, told apart by `reason`:
 * - `'name-in-use'`: readers hold the name (a leader's name is held only by its terms' write
 *   grants); refused with nothing held, as a semaphore's name is with ResourceKindError;
 * - `'work-failed'`: the leader callback rejected or threw; its term ended and its grant was
 *   released (`cause` is what it threw), and the campaign goes on;
 * - `'work-stuck'`: `close()` waited `stopTimeoutMs` for a leader callback whose term had ended
 *   and it had not settled; the grant was released all the same, so nothing is held, and the
 *   callback's fenced commits are refused.
 */
export class LeadershipError extends RwLockError {
  /** The name campaigned for. */
  readonly leaderName: string;
  readonly reason: 'name-in-use' | 'work-failed' | 'work-stuck';
  /** The term the error concerns, if any. */
  readonly term: number | null;
  constructor(
    name: string,
    reason: 'name-in-use' | 'work-failed' | 'work-stuck',
    term: number | null,
    options?: { cause?: unknown },
  ) {
    const what = {
      'name-in-use': `campaign for ${JSON.stringify(name)} refused: readers hold the name (a leader's name is held only by its terms' write grants)`,
      'work-failed': `the leader callback of ${JSON.stringify(name)} failed in term ${String(term)}: the term ended and its grant was released`,
      'work-stuck': `the leader callback of ${JSON.stringify(name)} had not returned when the campaign closed (term ${String(term)} ended and its grant was released)`,
    }[reason];
    super('ERR_RWLOCK_LEADERSHIP', what, options);
    this.leaderName = name;
    this.reason = reason;
    this.term = term;
  }
}
