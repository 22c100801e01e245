import { SchemaMissingError } from '../../errors.js';
import {
  ER_SP_DOES_NOT_EXIST,
  translate,
  type DriverError,
  type RawConnection,
  type SqlValue,
} from '../../sql/connection.js';

/** A statement to send in knex's place, and where its reply goes. */
interface Armed {
  sql: string;
  values: SqlValue[];
}

interface ArmedBegin extends Armed {
  /** Sent instead when knex's BEGIN never came (see `SectionCalls.beginNow`). */
  otherwise: string;
  /** Why the call must not be sent after all (its wait was interrupted before it went), if so. */
  refusal(): unknown;
  resolve(reply: unknown): void;
  reject(err: unknown): void;
  onSend(): void;
}

/** What a section sends a statement with: on the connection now, or in the place of knex's BEGIN. */
export type Send = (sql: string, values: SqlValue[]) => Promise<unknown>;

/**
 * knex begins a transaction with `BEGIN;` and ends it with `COMMIT;`, each a statement of its own on
 * the connection it was given. Armed, this sends another statement in the place of each, in the
 * same round trip: a section's `rwlock_section_begin` (which starts the transaction and takes the
 * lock, migration 012) for the BEGIN, and its `rwlock_section_commit` (release times, COMMIT, idle
 * bound restored, migration 009) for the COMMIT. So a section costs the round trips of the plain
 * transaction it wraps. Installed on the section's own connection only, for the section's
 * transaction only; every other statement passes through unchanged.
 */
export class SectionCalls {
  #begin: ArmedBegin | undefined;
  #commit: Armed | undefined;
  #committed = false;
  /** Once installed: the connection's own query() before, or null when it had none (the prototype's). */
  #previous: { query: unknown } | null | undefined;
  /** The query() the connection had when installed: every statement goes through it. */
  #original: ((...args: unknown[]) => unknown) | undefined;
  readonly #conn: RawConnection;

  constructor(conn: RawConnection) {
    this.#conn = conn;
  }

  /** True once the armed statement was sent in place of a COMMIT. */
  get committed(): boolean {
    return this.#committed;
  }

  /**
   * Arms `sql` for knex's next BEGIN: `send`'s promise gets its reply, or its error translated as
   * `query()` translates one. knex itself is told its BEGIN succeeded either way, so that the
   * transaction's callback runs and decides on the reply; after an error it throws, and knex
   * rolls back whatever the call had begun. `otherwise`: the statement to send, on the open
   * transaction, if knex's callback starts without that BEGIN having been seen (`beginNow`).
   * `refusal`, asked when the BEGIN comes: an error when the call must not go after all (knex's
   * BEGIN then goes as it is, and `send` rejects with the error). `sent`: whether it went.
   */
  beforeBegin(sql: string, otherwise: string, refusal: () => unknown): { send: Send; sent: () => boolean } {
    let sent = false;
    const send: Send = (_sql, values) =>
      new Promise((resolve, reject) => {
        if (this.#previous === undefined) this.#install();
        this.#begin = {
          sql,
          otherwise,
          values,
          refusal,
          resolve,
          reject,
          onSend: () => (sent = true),
        };
      });
    return { send, sent: () => sent };
  }

  /**
   * Called first in the transaction's callback: if the armed BEGIN was not sent (knex began some
   * other way), the transaction is open by now, and the take goes as a statement of its own
   * (`otherwise`). Whether it went so.
   */
  beginNow(): boolean {
    const armed = this.#take();
    if (armed === undefined) return false;
    this.#send({ sql: armed.otherwise }, armed.values, (err, out) =>
      err ? armed.reject(translate(err)) : armed.resolve(out),
    );
    return true;
  }

  /** The armed BEGIN, now to be sent, or undefined (none, or refused: its promise rejected). */
  #take(): ArmedBegin | undefined {
    const armed = this.#begin;
    this.#begin = undefined;
    if (armed === undefined) return undefined;
    const refused = armed.refusal();
    if (refused !== undefined) {
      armed.reject(refused);
      return undefined;
    }
    armed.onSend();
    return armed;
  }

  /** Arms `sql` for knex's COMMIT. */
  beforeCommit(sql: string, values: SqlValue[]): void {
    if (this.#previous === undefined) this.#install();
    this.#commit = { sql, values };
  }

  #send(opts: object, values: SqlValue[], done: (err: DriverError | null, ...out: unknown[]) => void): unknown {
    return this.#original!.call(this.#conn, opts, values, done);
  }

  #install(): void {
    const conn = this.#conn as unknown as { query: (...args: unknown[]) => unknown };
    // An instrumentation may have set the connection's own query(): put it back, not the prototype's.
    const original = conn.query;
    this.#original = original;
    this.#previous = Object.prototype.hasOwnProperty.call(conn, 'query') ? { query: original } : null;
    conn.query = (opts: unknown, ...rest: unknown[]): unknown => {
      const callback = rest[rest.length - 1];
      const sql = typeof opts === 'object' && opts !== null ? (opts as { sql?: unknown }).sql : undefined;
      if (typeof callback !== 'function' || (sql !== 'BEGIN;' && sql !== 'COMMIT;'))
        return original.call(conn, opts, ...rest);
      const done = callback as (e: unknown, ...o: unknown[]) => void;
      const armed = sql === 'BEGIN;' ? this.#take() : undefined;
      if (armed !== undefined) {
        return this.#send({ ...(opts as object), sql: armed.sql }, armed.values, (err, ...out) => {
          if (err) armed.reject(translate(err));
          else armed.resolve(out[0]);
          done(null, ...(err ? [[], undefined] : out));
        });
      }
      if (sql === 'COMMIT;' && this.#commit !== undefined) {
        const commit = this.#commit;
        this.#commit = undefined;
        this.#committed = true;
        return this.#send({ ...(opts as object), sql: commit.sql }, commit.values, (err, ...out) => {
          // knex takes 1305 (no such procedure) at a COMMIT for a commit done implicitly by DDL, and
          // would resolve the transaction: here nothing was committed, so it is an error like any other.
          if (err !== null && err.errno === ER_SP_DOES_NOT_EXIST) done(new SchemaMissingError(err));
          else done(err, ...out);
        });
      }
      return original.call(conn, opts, ...rest);
    };
  }

  /** Back to the connection's own query(); an armed BEGIN never sent fails its promise. */
  remove(): void {
    const begin = this.#begin;
    this.#begin = undefined;
    this.#commit = undefined;
    begin?.reject(new Error('the section ended before its BEGIN was sent'));
    if (this.#previous === undefined) return;
    this.#original = undefined;
    if (this.#previous === null) delete (this.#conn as { query?: unknown }).query;
    else (this.#conn as { query: unknown }).query = this.#previous.query;
    this.#previous = undefined;
  }
}
