/** Base class of every error this library throws on purpose. `code` is stable across releases. */
export class RwLockError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

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
  constructor(resourceId: string, mode: string, waitMs: number) {
    super('ERR_RWLOCK_TIMEOUT', `${mode} lock on ${JSON.stringify(resourceId)} not granted within ${waitMs} ms`);
    this.resourceId = resourceId;
    this.waitMs = waitMs;
  }
}

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
 * database did not say in time whether it committed.
 * The grant token lets an operator look the row up; a grant left behind is released by the reaper.
 */
export class LockOutcomeUnknownError extends RwLockError {
  readonly token: string;
  readonly grantId: number | null;
  constructor(what: string, token: string, grantId: number | null, cause: unknown) {
    super(
      'ERR_RWLOCK_OUTCOME_UNKNOWN',
      `connection lost or commit failed during ${what}, and the database did not answer in time: whether it committed is unknown (grant token ${token})`,
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
        '(the server moves it just past the largest id left); see docs/operating.md',
    );
    this.grantId = grantId;
    this.released = outcome === 'released';
  }
}

/** The lock tables or procedures are missing: run `migrate(db)` (or apply sql/schema.sql) first. */
export class SchemaMissingError extends RwLockError {
  constructor(cause: unknown) {
    super(
      'ERR_RWLOCK_SCHEMA_MISSING',
      'mysql-rwlock tables or procedures not found: run migrate(db) or apply sql/schema.sql',
      { cause },
    );
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
 * The server refused one of the lock's writes because it is read-only: `read_only` or
 * `super_read_only` (1290: a replica, or a primary that stepped down in a failover), or a read-only
 * session or transaction (1792). Nothing was changed. Connect to the writable primary (a pool may
 * still hold connections to a node that stopped being it).
 */
export class ServerReadOnlyError extends RwLockError {
  constructor(cause: unknown) {
    super(
      'ERR_RWLOCK_READ_ONLY',
      "the server refused the lock's write: it is read-only (a replica, a primary that stepped down, or a read-only session); nothing was changed: connect to the writable primary",
      { cause },
    );
  }
}

/**
 * A Galera node refused the lock's statement because it is not ready for clients (1047, "WSREP has
 * not yet prepared node for application use"): it is outside the cluster's primary component (cut
 * off from the majority) or still joining. Nothing was changed. Connect to a node of the primary
 * component, or try again once this one has rejoined.
 */
export class NodeNotReadyError extends RwLockError {
  constructor(cause: unknown) {
    super(
      'ERR_RWLOCK_NODE_NOT_READY',
      "the Galera node refused the lock's statement: it is not ready for clients (outside the primary component, or still joining); nothing was changed: connect to a node of the primary component",
      { cause },
    );
  }
}

/** Another migrate() held the migration lock for longer than `waitMs`, or a crashed one left it taken. */
export class MigrationLockedError extends RwLockError {
  constructor(message: string, cause?: unknown) {
    super('ERR_RWLOCK_MIGRATION_LOCKED', message, { cause });
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
 * The schema is not the one this version needs: its migrations stop short of what the lock's
 * statements depend on (an app upgraded without migrating, a database restored from before a
 * migration), or an object was changed by hand (a narrowed column, a procedure with another
 * signature). Nothing was changed. A SchemaMissingError, with its code and its fix: run migrate(db).
 */
export class SchemaOutdatedError extends SchemaMissingError {
  constructor(detail: string, cause?: unknown) {
    super(cause);
    this.message = `mysql-rwlock schema is not the one this version needs (${detail}): run migrate(db) or apply sql/schema.sql`;
  }
}

/**
 * The server refused one of the lock's statements, or the login, for lack of a privilege (on a
 * table, column, routine or the database, or a global one), or refused the account itself (a wrong
 * user, host or password, a locked account). The message starts with the server's, `denied`, which
 * names what was refused; `mysql-rwlock grants --role ROLE` prints the GRANT statements each role
 * needs. The refused statement changed nothing.
 */
export class PrivilegeError extends RwLockError {
  readonly denied: string;
  /** The role whose grants the refused operation needs, when the library knows it. */
  readonly role: string | undefined;
  constructor(denied: string, cause: unknown, role?: string) {
    const roleFlag = role ?? 'ROLE';
    super(
      'ERR_RWLOCK_PRIVILEGE',
      `${denied}; a privilege the lock needs is missing, or the login was refused: \`mysql-rwlock grants --role ${roleFlag} --user "'name'@'host'" --database DB\` ` +
        `prints the grants ${role === undefined ? 'a role needs (`mysql-rwlock grants --help` lists the roles)' : `the ${role} role needs`}`,
      { cause },
    );
    this.denied = denied;
    this.role = role;
  }
}

/**
 * A server or session setting under which the lock cannot keep its contract, refused on the
 * library's first use of a connection that has it, before anything is written; `setting` names it
 * (e.g. `sql_mode=ORACLE`). The tolerated and refused settings: docs/operating.md.
 */
export class UnsupportedSettingError extends RwLockError {
  readonly setting: string;
  constructor(setting: string, why: string) {
    super('ERR_RWLOCK_UNSUPPORTED_SETTING', `the session runs with ${setting}, which mysql-rwlock refuses: ${why}`);
    this.setting = setting;
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
