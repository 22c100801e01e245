import { translate, withConnection, type RawConnection } from '../../sql/connection.js';
import type { LockContext } from '../context/lock-context.js';
import {
  DatabaseUnreachableError,
  GrantIdRangeError,
  InvalidOptionsError,
  LockInvariantError,
  LockLostError,
  LockOutcomeUnknownError,
} from '../../errors.js';
import { integerOption, LIMITS } from '../../options.js';
import { askDatabase, whileRowBusy, withRetries } from '../../sql/retry.js';
import { whileUnreachable } from '../../sql/unreachable.js';
import { extendLease } from '../../sql/extend.js';
import { findGrantByToken } from '../../sql/lookup.js';
import {
  RELEASE_SQL,
  RELEASED_ROWS,
  releaseByToken,
  releaseGrant,
  releaseParams,
  type GrantRef,
} from '../../sql/release.js';
import { downgradeGrant, upgradeGrant } from '../../sql/mode.js';
import { HAND_OVER_SQL, handOverParams, handOverReleaseParams } from '../../sql/hand-over.js';
import { fenceChannel, lostChannel, releaseChannel, traced } from '../../contract/channels.js';
import { lostBy, RELEASED_BY, STATUS, type LockLostInfo, type LockMode } from '../../types.js';
import type { FenceExecutor, Grant } from '../../contract/api.js';

/**
 * A lock held by this process: the implementation of {@link Grant}, whose declaration documents
 * each public member. `id` is the fencing token: strictly increasing within one database server.
 */
export class DurableGrant implements Grant {
  readonly id: number;
  readonly resourceId: string;
  readonly owner: string;
  /** Hex of the client-generated token stored with the grant row. */
  readonly token: string;
  readonly permits?: number;
  readonly #resource: Buffer;
  readonly #token: Buffer;
  readonly #ctx: LockContext;
  /** Aborted when the grant is found lost, or when its kept-ahead lease reaches its cap (`maxHoldMs`). */
  readonly #signal = new AbortController();
  #lost = false;
  #mode: LockMode;
  #done = false;
  #fences = 0;
  /** Set by handOverAtFence: the fence hands the hold over to a successor under this token. */
  #successor: { token: Buffer; leaseMs: number } | undefined;

  /**
   * Grants come from a LockManager. Private, so the published declarations show no constructor a
   * user could call; `create` is the library's way in, and is left out of them.
   * @internal
   */
  static create(
    ctx: LockContext,
    id: number,
    resourceId: string,
    resource: Buffer,
    mode: LockMode,
    token: Buffer,
    permits?: number,
  ): DurableGrant {
    return new DurableGrant(ctx, id, resourceId, resource, mode, token, permits);
  }

  private constructor(
    ctx: LockContext,
    id: number,
    resourceId: string,
    resource: Buffer,
    mode: LockMode,
    token: Buffer,
    permits?: number,
  ) {
    this.#ctx = ctx;
    if (permits !== undefined) this.permits = permits;
    this.id = id;
    this.resourceId = resourceId;
    this.#resource = resource;
    this.#mode = mode;
    this.owner = ctx.options.owner;
    this.#token = token;
    this.token = token.toString('hex');
  }

  get mode(): LockMode {
    return this.#mode;
  }

  /**
   * @internal The grant as handed out, or GrantIdRangeError when its id is not a safe integer: a
   * rounded `id` would make every later statement (release, fence, extend) name another grant or
   * none, leaving this one live. Released first, by its token, which needs no id.
   */
  async admit(): Promise<this> {
    if (Number.isSafeInteger(this.id)) return this;
    const { id: _id, ...ref } = this.ref;
    const reply = await askDatabase(this.#ctx.knex, this.#ctx.policy.resolveTimeoutMs, (conn) =>
      releaseByToken(conn, ref, 'holder'),
    );
    this.#done = true;
    const outcome = reply === undefined ? 'unknown' : reply.answer.released ? 'released' : 'not live';
    throw new GrantIdRangeError(reply?.answer.id ?? String(this.id), outcome);
  }

  /** @internal */
  get ref(): GrantRef {
    const ref: GrantRef = { id: this.id, resource: this.#resource, mode: this.#mode, token: this.#token };
    if (this.permits !== undefined) ref.permits = this.permits;
    return ref;
  }

  get signal(): AbortSignal {
    return this.#signal.signal;
  }

  /** @internal Whether this process found the grant released by someone else (`signal` may have aborted earlier, at a hold cap). */
  get lost(): boolean {
    return this.#lost;
  }

  /**
   * @internal The grant's kept-ahead lease reached its cap: `signal` aborts with `reason` so the
   * holder stops; the grant itself stays as it is, and goes stale as any grant whose lease ran out.
   */
  capHold(reason: unknown): void {
    if (!this.#signal.signal.aborted) this.#signal.abort(reason);
  }

  /** @internal Fences that succeeded (released the grant in their transaction), committed or not. */
  get fences(): number {
    return this.#fences;
  }

  get settled(): boolean {
    return this.#done;
  }

  /**
   * @internal From now on, this grant's fence hands its hold over instead of giving it up
   * (src/sql/hand-over.ts): its commit releases the grant and makes a successor live under `token`,
   * leased to `leaseMs` after this grant's time. A write grant only (runExclusive's `lockAtLeastFor`).
   */
  handOverAtFence(token: Buffer, leaseMs: number): void {
    if (this.#mode !== 'write') throw new LockInvariantError(`grant ${this.id}: only a write grant hands over`);
    this.#successor = { token, leaseMs };
  }

  /** @internal Whether this grant's fence hands its hold over (see handOverAtFence). */
  get handsOver(): boolean {
    return this.#successor !== undefined;
  }

  fence(execute: FenceExecutor): Promise<void> {
    return traced(
      fenceChannel,
      () => ({ grant: this, grantId: this.id, resourceId: this.resourceId, mode: this.#mode, knex: this.#ctx.knex }),
      () => this.#fence(execute),
    );
  }

  async #fence(execute: FenceExecutor): Promise<void> {
    if (this.#done) throw new LockLostError(this.id, 'it was already released');
    let changed: unknown;
    const successor = this.#successor;
    try {
      changed = await execute(
        RELEASE_SQL,
        successor ? handOverReleaseParams(this.ref) : releaseParams(this.ref, 'holder'),
      );
      if (changed === RELEASED_ROWS && successor) {
        const written = await execute(HAND_OVER_SQL, handOverParams(this.ref, successor.token, successor.leaseMs));
        if (written !== 1)
          throw new LockInvariantError(`hand-over of grant ${this.id} wrote ${String(written)} rows, expected 1`);
      }
    } catch (err) {
      throw err instanceof LockInvariantError ? err : translate(err);
    }
    if (changed === RELEASED_ROWS) {
      this.#fences++;
      return;
    }
    if (changed === 0) {
      this.#markLost('fence', 'look up');
      throw new LockLostError(this.id);
    }
    throw new LockInvariantError(
      `execute() resolved to ${typeof changed === 'number' ? changed : `${String(changed)} (a ${typeof changed})`}, expected the number ${RELEASED_ROWS} (released) or 0 (lost): does it resolve to the affected-row count, as a number?`,
    );
  }

  async downgrade(): Promise<void> {
    if (this.#mode !== 'write') throw new InvalidOptionsError(`downgrade: grant ${this.id} is a ${this.#mode} grant`);
    await this.#changeMode(downgradeGrant, 'read');
    this.#ctx.queues.wake(this.#resource.toString('hex'));
  }

  async tryUpgrade(): Promise<Grant | null> {
    if (this.#mode !== 'read') throw new InvalidOptionsError(`tryUpgrade: grant ${this.id} is a ${this.#mode} grant`);
    return (await this.#changeMode(upgradeGrant, 'write')) ? this : null;
  }

  /**
   * Runs a mode change; false when refused while the grant is live, LockLostError when it is not.
   * The grant row's mode is the truth: a change whose reply was lost is settled by reading it, and a
   * retry that finds the change already made (it committed before its reply was lost) counts as made.
   */
  async #changeMode(
    change: (conn: RawConnection, grant: GrantRef) => Promise<boolean>,
    to: LockMode,
  ): Promise<boolean> {
    if (this.#done) throw new LockLostError(this.id, 'it was already released');
    const ref = this.ref;
    const what = to === 'read' ? 'downgrade' : 'upgrade';
    const changed = await withRetries(
      this.#ctx.policy,
      what,
      () => whileRowBusy(this.#ctx.policy, what, () => withConnection(this.#ctx.knex, (conn) => change(conn, ref))),
      async (err) => {
        const reply = await askDatabase(this.#ctx.knex, this.#ctx.policy.resolveTimeoutMs, (conn) =>
          findGrantByToken(conn, this.#token),
        );
        if (reply === undefined) throw new LockOutcomeUnknownError(what, this.token, this.id, err);
        const row = reply.answer;
        if (row?.status === STATUS.live && row.mode === to) return { value: true };
        return row?.status === STATUS.live ? 'retry' : { value: false };
      },
    );
    const row = changed ? null : await withConnection(this.#ctx.knex, (conn) => findGrantByToken(conn, this.#token));
    if (changed || (row?.status === STATUS.live && row.mode === to)) {
      this.#mode = to;
      return true;
    }
    if (row === null || row.status !== STATUS.live) {
      if (row?.releasedBy === RELEASED_BY.holder) this.#settle();
      else this.#markLost('mode-change', row?.releasedBy ?? null);
      throw new LockLostError(this.id, 'it is no longer live');
    }
    return false;
  }

  async isLive(): Promise<boolean> {
    if (this.#done) return false;
    // A read: a reply lost with its connection is asked again (it changed nothing); no connection
    // to be had is DatabaseUnreachableError at once, as for every call but release() (api.md, rule 4).
    const row = await withRetries(
      this.#ctx.policy,
      'isLive',
      () => withConnection(this.#ctx.knex, (conn) => findGrantByToken(conn, this.#token)),
      async () => 'retry',
    );
    if (row?.status === STATUS.live) return true;
    if (row?.releasedBy === RELEASED_BY.holder) this.#settle();
    else this.#markLost('fence', row?.releasedBy ?? null);
    return false;
  }

  committed(): void {
    this.#settle();
  }

  async extend(ms: number): Promise<boolean> {
    integerOption('ms', ms, 1, LIMITS.maxTimerMs);
    if (this.#done) return false;
    return withConnection(this.#ctx.knex, async (conn) => {
      if (await extendLease(conn, this.id, this.#token, ms)) return true;
      // Not live: lost, unless it was this holder's own release (an extension racing the commit).
      const row = await findGrantByToken(conn, this.#token);
      if (row?.releasedBy === RELEASED_BY.holder) this.#settle();
      else this.#markLost('extend', row?.releasedBy ?? null);
      return false;
    });
  }

  release(): Promise<boolean> {
    return traced(
      releaseChannel,
      () => ({ grant: this, grantId: this.id, by: 'holder' as const, knex: this.#ctx.knex }),
      () => this.#release(),
    );
  }

  async #release(): Promise<boolean> {
    if (this.#done) return false;
    try {
      return await this.#releaseOnce();
    } catch (err) {
      // Nothing was sent: the grant is as it was, and this handle still holds it.
      if (err instanceof DatabaseUnreachableError)
        throw new DatabaseUnreachableError(
          `release of grant ${this.id}`,
          err.cause,
          'nothing was sent: the grant is as it was (live, unless the reaper or an operator released it); call release() again, or leave it to the reaper',
          this.id,
        );
      throw err;
    }
  }

  async #releaseOnce(): Promise<boolean> {
    const ref = this.ref;
    const released = await withRetries(
      this.#ctx.policy,
      'release',
      // A release that could not be sent for want of a connection is sent again, within resolveTimeoutMs.
      () =>
        whileUnreachable(this.#ctx.policy, 'release', this.id, () =>
          whileRowBusy(this.#ctx.policy, 'release', () =>
            withConnection(this.#ctx.knex, (conn) => releaseGrant(conn, ref, 'holder')),
          ),
        ),
      async (err) => {
        const answer = await this.#settleByRelease();
        if (answer === undefined) throw new LockOutcomeUnknownError('release', this.token, this.id, err);
        return { value: answer.releasedNow || answer.releasedBy === RELEASED_BY.holder };
      },
    );
    if (!released) {
      // Released before: by this holder's fenced commit, or by someone else (then it was lost).
      const row = await withConnection(this.#ctx.knex, (conn) => findGrantByToken(conn, this.#token));
      if (row && row.releasedBy !== RELEASED_BY.holder) this.#markLost('release', row.releasedBy);
    }
    this.#settle();
    return released;
  }

  /**
   * @internal After a fenced commit whose reply was lost: runs the release again. It waits for the
   * lost transaction's row lock, so it sees that transaction's outcome: if it releases now, the
   * transaction did not commit; if the row says the holder released it, it did.
   */
  async settleLostCommit(): Promise<'committed' | 'rolled-back' | 'lost' | undefined> {
    const answer = await this.#settleByRelease();
    if (answer === undefined) return undefined;
    this.#settle();
    if (answer.releasedNow) return 'rolled-back';
    if (answer.releasedBy === RELEASED_BY.holder) return 'committed';
    this.#markLost('fence', answer.releasedBy);
    return 'lost';
  }

  async #settleByRelease(): Promise<{ releasedNow: boolean; releasedBy: number | null } | undefined> {
    const ref = this.ref;
    const reply = await askDatabase(this.#ctx.knex, this.#ctx.policy.resolveTimeoutMs, async (conn) => {
      if (await releaseGrant(conn, ref, 'holder')) return { releasedNow: true, releasedBy: RELEASED_BY.holder };
      return { releasedNow: false, releasedBy: (await findGrantByToken(conn, ref.token))?.releasedBy ?? null };
    });
    return reply?.answer;
  }

  #settle(): void {
    if (this.#done) return;
    this.#done = true;
    this.#ctx.queues.wake(this.#resource.toString('hex'));
  }

  /**
   * The grant was found released by someone else: `signal` aborts, and `onLockLost` is called and
   * `mysql-rwlock:lost` published, once. `releasedBy` is what the log says, or 'look up' when the
   * finder could not read it (the fence runs on the caller's transaction): then, if anyone listens,
   * it is read on a pool connection of its own, which may have to wait for the one the caller's
   * transaction holds, so neither is awaited here.
   */
  #markLost(detectedBy: LockLostInfo['detectedBy'], releasedBy: number | null | 'look up'): void {
    this.#settle();
    if (this.#lost) return;
    this.#lost = true;
    if (!this.#signal.signal.aborted) this.#signal.abort(new LockLostError(this.id));
    const hook = this.#ctx.options.onLockLost;
    if (!hook && !lostChannel.hasSubscribers) return;
    const call = (by: number | null): void => {
      const info: LockLostInfo = { releasedBy: lostBy(by), detectedBy };
      if (lostChannel.hasSubscribers)
        lostChannel.publish({ grant: this, grantId: this.id, resourceId: this.resourceId, mode: this.#mode, ...info });
      if (!hook) return;
      try {
        void Promise.resolve(hook(this, info)).catch((err: unknown) => this.#reportHookError(err));
      } catch (err) {
        this.#reportHookError(err);
      }
    };
    if (releasedBy !== 'look up') return call(releasedBy);
    void withConnection(this.#ctx.knex, (conn) => findGrantByToken(conn, this.#token)).then(
      (row) => call(row?.releasedBy ?? null),
      () => call(null),
    );
  }

  /**
   * Never throws: it runs in a rejection handler (a throw there is an unhandled rejection, which
   * ends the process) and inside release(). A hook can reject with anything, including a value
   * whose String() throws (`Object.create(null)`) or a Proxy whose every trap throws.
   */
  #reportHookError(err: unknown): void {
    let text = 'a value that cannot be shown';
    let stack: string | undefined;
    try {
      if (err instanceof Error) {
        text = String(err.message);
        stack = typeof err.stack === 'string' ? err.stack : undefined;
      } else {
        text = String(err);
      }
    } catch {
      try {
        text = Object.prototype.toString.call(err);
      } catch {
        // keep the placeholder
      }
    }
    process.emitWarning(`onLockLost threw for grant ${this.id}: ${text}`, {
      type: 'MysqlRwlockWarning',
      detail: stack,
    });
  }

  /**
   * `await using grant = await locks.acquireWrite(id)` releases the grant when the scope ends.
   * Idempotent (a grant already released, by this holder or anyone else, is left as it is); a
   * release that fails rejects, so the failure is reported rather than lost.
   */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }
}
