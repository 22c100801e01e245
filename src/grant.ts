import type { Knex } from 'knex';
import { isConnectionLost, isDeadlock, withConnection } from './connection.js';
import { LockOutcomeUnknownError } from './errors.js';
import { integerOption } from './options.js';
import { extendLease } from './sql/extend.js';
import { resolveLost } from './resolve.js';
import { callRelease, type GrantRef } from './sql/release.js';
import { findGrantById } from './sql/lookup.js';
import { RELEASED_BY, STATUS, type LockMode } from './types.js';
import { wakeWaiters } from './wait.js';

export interface GrantContext {
  knex: Knex;
  deadlockRetries: number;
  resolveTimeoutMs: number;
}

/** A lock held by this process. `id` is the fencing token: strictly increasing within one database. */
export class Grant {
  readonly id: number;
  readonly resourceId: string;
  readonly mode: LockMode;
  readonly owner: string;
  /** Hex of the client-generated token stored with the grant row. */
  readonly token: string;
  readonly #resource: Buffer;
  readonly #ctx: GrantContext;
  readonly #lost = new AbortController();
  #done = false;

  constructor(ctx: GrantContext, id: number, resourceId: string, resource: Buffer, mode: LockMode, owner: string, token: Buffer) {
    this.#ctx = ctx;
    this.id = id;
    this.resourceId = resourceId;
    this.#resource = resource;
    this.mode = mode;
    this.owner = owner;
    this.token = token.toString('hex');
  }

  /** @internal */
  get ref(): GrantRef {
    return { id: this.id, resource: this.#resource, mode: this.mode };
  }

  /**
   * Aborted when this process learns that the grant was released by someone else (the reaper or an
   * operator) while it still held it: an extension found it gone, or the fenced commit was refused.
   */
  get signal(): AbortSignal {
    return this.#lost.signal;
  }

  /** @internal The grant was found released by someone else. */
  markLost(): void {
    this.settle();
    if (!this.#lost.signal.aborted) this.#lost.abort(new Error(`grant ${this.id} was released by the reaper or an operator`));
  }

  /**
   * Extends the lease: the reaper will not release this grant before `ms` from now (database
   * clock), however old it is. True if the grant is still live; false (and `signal` aborted) if it
   * had already been released by someone else.
   */
  async extend(ms: number): Promise<boolean> {
    integerOption('ms', ms, 1, 2_147_483_647);
    if (this.#done) return false;
    return withConnection(this.#ctx.knex, async (conn) => {
      if (await extendLease(conn, this.id, ms)) return true;
      // Not live: lost, unless it was this holder's own release (an extension racing the commit).
      const row = await findGrantById(conn, this.id);
      if (row?.releasedBy !== RELEASED_BY.holder) this.markLost();
      return false;
    });
  }

  /** True once this object saw the grant end (released by it, or found released by someone else). */
  get settled(): boolean {
    return this.#done;
  }

  /** @internal Called when the grant ended inside a business commit or was found lost. */
  settle(): void {
    if (this.#done) return;
    this.#done = true;
    wakeWaiters(this.#resource.toString('hex'));
  }

  /**
   * Releases the grant. Idempotent: true when this call released it, false when it had already
   * been released (by this holder earlier, the reaper or an operator), in which case nothing changes.
   */
  async release(): Promise<boolean> {
    if (this.#done) return false;
    const ref = this.ref;
    for (let attempt = 0; ; attempt++) {
      let threadId: number | null = null;
      try {
        const { released } = await withConnection(this.#ctx.knex, (conn) => {
          threadId = conn.threadId;
          return callRelease(conn, ref, 'holder', false);
        });
        this.settle();
        return released;
      } catch (err) {
        if (isDeadlock(err) && attempt < this.#ctx.deadlockRetries) continue;
        if (!isConnectionLost(err)) throw err;
        // Release is idempotent, so a lost reply is settled by reading the row back.
        const answer = await resolveLost(this.#ctx.knex, threadId, this.#ctx.resolveTimeoutMs, (c) => findGrantById(c, this.id));
        if (answer === undefined) throw new LockOutcomeUnknownError('release', this.token, this.id, err);
        const row = answer.grant;
        if (row === null || row.status === STATUS.released) {
          this.settle();
          return row !== null && row.releasedBy === RELEASED_BY.holder;
        }
        if (attempt >= this.#ctx.deadlockRetries) throw err;
      }
    }
  }
}
