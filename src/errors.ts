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

/** A waiting acquire was cancelled through its AbortSignal. `name` is 'AbortError' as for fetch(). */
export class LockAbortedError extends RwLockError {
  constructor(reason?: unknown) {
    super('ABORT_ERR', 'lock acquisition aborted', { cause: reason });
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
    super('ERR_RWLOCK_LOST', `grant ${grantId} is no longer live (${detail}); the business transaction was rolled back`);
    this.grantId = grantId;
  }
}

/**
 * The connection was lost while a commit was in flight and the outcome could not be determined.
 * The grant token lets an operator look the row up; a grant left behind is released by the reaper.
 */
export class LockOutcomeUnknownError extends RwLockError {
  readonly token: string;
  readonly grantId: number | null;
  constructor(what: string, token: string, grantId: number | null, cause: unknown) {
    super(
      'ERR_RWLOCK_OUTCOME_UNKNOWN',
      `connection lost during ${what}; whether it committed is unknown (grant token ${token})`,
      { cause },
    );
    this.token = token;
    this.grantId = grantId;
  }
}

/** The lock tables or procedures are missing: run `migrate(db)` (or apply sql/schema.sql) first. */
export class SchemaMissingError extends RwLockError {
  constructor(cause: unknown) {
    super('ERR_RWLOCK_SCHEMA_MISSING', 'mysql-rwlock tables or procedures not found: run migrate(db) or apply sql/schema.sql', { cause });
  }
}

/** The lock tables disagree with the grant log; the transaction was rolled back. Should never happen. */
export class LockInvariantError extends RwLockError {
  constructor(message: string, cause?: unknown) {
    super('ERR_RWLOCK_INVARIANT', message, { cause });
  }
}
