import type { LockContext } from './context.js';
import { ConnectionLostError, LockOutcomeUnknownError, SchemaMissingError } from '../errors.js';
import {
  errnoOf,
  ER_DUP_ENTRY,
  ER_SP_DOES_NOT_EXIST,
  type DriverError,
  type RawConnection,
  type SqlValue,
} from '../sql/connection.js';
import { askDatabase } from '../sql/retry.js';
import { withdrawAcquire } from '../sql/withdraw.js';
import type { SectionTarget } from './section-types.js';

/**
 * knex ends a transaction with `COMMIT;` on the connection it was given. Armed, this sends another
 * statement in its place, in the same round trip: a section's `rwlock_section_commit`, which also
 * records the release time and restores the idle bound. Installed on the section's own connection
 * only, for the section's transaction only; every other statement passes through unchanged.
 */
export class CommitCall {
  #armed: { sql: string; values: SqlValue[] } | undefined;
  #used = false;
  /** Once installed: the connection's own query() before, or null when it had none (the prototype's). */
  #previous: { query: unknown } | null | undefined;
  readonly #conn: RawConnection & { query: RawConnection['query'] };

  constructor(conn: RawConnection) {
    this.#conn = conn;
  }

  /** True once the armed statement was sent in place of a COMMIT. */
  get used(): boolean {
    return this.#used;
  }

  arm(sql: string, values: SqlValue[]): void {
    if (this.#previous === undefined) this.#install();
    this.#armed = { sql, values };
  }

  #install(): void {
    const conn = this.#conn as unknown as { query: (...args: unknown[]) => unknown };
    const original = conn.query;
    // An instrumentation may have set the connection's own query(): put it back, not the prototype's.
    this.#previous = Object.prototype.hasOwnProperty.call(conn, 'query') ? { query: original } : null;
    conn.query = (opts: unknown, ...rest: unknown[]): unknown => {
      const armed = this.#armed;
      const callback = rest[rest.length - 1];
      if (
        armed === undefined ||
        typeof opts !== 'object' ||
        opts === null ||
        (opts as { sql?: unknown }).sql !== 'COMMIT;' ||
        typeof callback !== 'function'
      )
        return original.call(conn, opts, ...rest);
      this.#armed = undefined;
      this.#used = true;
      return original.call(
        conn,
        { ...opts, sql: armed.sql },
        armed.values,
        (err: DriverError | null, ...out: unknown[]) => {
          // knex takes 1305 (no such procedure) at a COMMIT for a commit done implicitly by DDL, and
          // would resolve the transaction: here nothing was committed, so it is an error like any other.
          if (err !== null && err.errno === ER_SP_DOES_NOT_EXIST) {
            (callback as (e: unknown) => void)(new SchemaMissingError(err));
            return;
          }
          (callback as (e: unknown, ...o: unknown[]) => void)(err, ...out);
        },
      );
    };
  }

  remove(): void {
    this.#armed = undefined;
    if (this.#previous === undefined) return;
    if (this.#previous === null) delete (this.#conn as { query?: unknown }).query;
    else (this.#conn as { query: unknown }).query = this.#previous.query;
    this.#previous = undefined;
  }
}

/**
 * A COMMIT whose reply was lost: a released row written under the section's token in its place
 * either fails on the duplicate (the section's row is there: it committed) or succeeds (it never
 * will: the section's insert of that token would fail).
 */
export async function settleSectionCommit<T>(
  ctx: LockContext,
  t: SectionTarget,
  token: Buffer,
  err: unknown,
  value: T,
): Promise<T> {
  const reply = await askDatabase(ctx.knex, ctx.policy.resolveTimeoutMs, async (conn) => {
    try {
      await withdrawAcquire(conn, t.resource, t.mode, token);
      return false;
    } catch (e) {
      if (errnoOf(e) === ER_DUP_ENTRY) return true;
      throw e;
    }
  });
  if (reply === undefined) throw new LockOutcomeUnknownError('section commit', token.toString('hex'), null, err);
  if (reply.answer) return value;
  throw new ConnectionLostError('the section', err);
}
