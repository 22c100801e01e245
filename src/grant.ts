import type { Knex } from 'knex';
import { isConnectionLost, isDeadlock, withConnection } from './connection.js';
import { LockOutcomeUnknownError } from './errors.js';
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
