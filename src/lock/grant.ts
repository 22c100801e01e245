import { translate, withConnection, type RawConnection } from '../sql/connection.js';
import type { LockContext } from './context.js';
import { InvalidOptionsError, LockInvariantError, LockLostError, LockOutcomeUnknownError } from '../errors.js';
import { integerOption, LIMITS, type LockLostInfo } from '../options.js';
import { askDatabase, withRetries } from '../sql/retry.js';
import { extendLease } from '../sql/extend.js';
import { findGrantByToken } from '../sql/lookup.js';
import { RELEASE_SQL, RELEASED_ROWS, releaseGrant, releaseParams, type GrantRef, type ReleaseParams } from '../sql/release.js';
import { downgradeGrant, upgradeGrant } from '../sql/mode.js';
import { fenceChannel, lostChannel, releaseChannel, traced } from '../observability/tracing.js';
import { RELEASED_BY, STATUS, type LockMode } from '../types.js';

/**
 * Runs one statement on the caller's open transaction and resolves to its affected-row count.
 * `params` are numbers and hex strings; placeholders are `?`.
 */
export type FenceExecutor = (sql: string, params: ReleaseParams) => Promise<number>;

/** A lock held by this process. `id` is the fencing token: strictly increasing within one database server. */
export class Grant {
  readonly id: number;
  readonly resourceId: string;
  readonly owner: string;
  /** Hex of the client-generated token stored with the grant row. */
  readonly token: string;
  readonly #resource: Buffer;
  readonly #token: Buffer;
  readonly #ctx: LockContext;
  readonly #lost = new AbortController();
  #mode: LockMode;
  #done = false;

  /**
   * Grants come from a LockManager. Private, so the published declarations show no constructor a
   * user could call; `create` is the library's way in, and is left out of them.
   * @internal
   */
  static create(ctx: LockContext, id: number, resourceId: string, resource: Buffer, mode: LockMode, token: Buffer): Grant {
    return new Grant(ctx, id, resourceId, resource, mode, token);
  }

  private constructor(ctx: LockContext, id: number, resourceId: string, resource: Buffer, mode: LockMode, token: Buffer) {
    this.#ctx = ctx;
    this.id = id;
    this.resourceId = resourceId;
    this.#resource = resource;
    this.#mode = mode;
    this.owner = ctx.options.owner;
    this.#token = token;
    this.token = token.toString('hex');
  }

  /** 'write' or 'read'; a grant changes mode only through `downgrade()` or `tryUpgrade()`. */
  get mode(): LockMode {
    return this.#mode;
  }

  /** @internal */
  get ref(): GrantRef {
    return { id: this.id, resource: this.#resource, mode: this.#mode, token: this.#token };
  }

  /**
   * Aborted, with a LockLostError as its reason, when this process learns that the grant was
   * released by someone else (the reaper or an operator) while it still held it: an extension found
   * it gone, or the fence refused it.
   */
  get signal(): AbortSignal {
    return this.#lost.signal;
  }

  /** True once this object saw the grant end (released by it, or found released by someone else). */
  get settled(): boolean {
    return this.#done;
  }

  /**
   * The fence, for a business transaction on any driver or ORM. Call it as the last statement
   * before the caller's COMMIT, through `execute`, which runs one statement on that open
   * transaction and resolves to its affected-row count. It releases the grant inside the
   * transaction: if the transaction commits, the business writes and the release commit together;
   * if the grant is no longer live (reaped, or released by an operator) it throws LockLostError
   * and the caller must roll back. If the caller rolls back after a successful fence, the grant is
   * still held and `release()` releases it. After a commit, call `committed()` (no round trip) or
   * `release()` (one round trip; it then returns false).
   */
  fence(execute: FenceExecutor): Promise<void> {
    return traced(fenceChannel, () => ({ grant: this, grantId: this.id, resourceId: this.resourceId, mode: this.#mode }), () => this.#fence(execute));
  }

  async #fence(execute: FenceExecutor): Promise<void> {
    if (this.#done) throw new LockLostError(this.id, 'it was already released');
    let changed: unknown;
    try {
      changed = await execute(RELEASE_SQL, releaseParams(this.ref, 'holder'));
    } catch (err) {
      throw translate(err);
    }
    if (changed === RELEASED_ROWS) return;
    if (changed === 0) {
      this.#markLost('fence', 'look up');
      throw new LockLostError(this.id);
    }
    throw new LockInvariantError(`execute() resolved to ${typeof changed === 'number' ? changed : `${String(changed)} (a ${typeof changed})`}, expected the number ${RELEASED_ROWS} (released) or 0 (lost): does it resolve to the affected-row count, as a number?`);
  }

  /**
   * Turns this live write grant into a read grant, atomically: no writer can get in between, and
   * readers waiting can join at once. The same grant (id, token) stays held, now shared; the log
   * records when (`mode_changed_at`). Inside `withWriteLock` the rest of the callback then runs
   * under the read grant, and the fence checks and releases the read grant. Writes the callback
   * made before the downgrade stay invisible to the new readers until the transaction commits.
   */
  async downgrade(): Promise<void> {
    if (this.#mode !== 'write') throw new InvalidOptionsError(`downgrade: grant ${this.id} is a read grant`);
    await this.#changeMode(downgradeGrant, 'read');
    this.#ctx.queues.wake(this.#resource.toString('hex'));
  }

  /**
   * Turns this live read grant into a write grant if it is the resource's only holder: resolves to
   * this grant, now a write grant, or to null at once when other readers hold it too. Never waits,
   * so two readers trying to upgrade cannot deadlock.
   */
  async tryUpgrade(): Promise<Grant | null> {
    if (this.#mode !== 'read') throw new InvalidOptionsError(`tryUpgrade: grant ${this.id} is a write grant`);
    return (await this.#changeMode(upgradeGrant, 'write')) ? this : null;
  }

  /**
   * Runs a mode change; false when refused while the grant is live, LockLostError when it is not.
   * The grant row's mode is the truth: a change whose reply was lost is settled by reading it, and a
   * retry that finds the change already made (it committed before its reply was lost) counts as made.
   */
  async #changeMode(change: (conn: RawConnection, grant: GrantRef) => Promise<boolean>, to: LockMode): Promise<boolean> {
    if (this.#done) throw new LockLostError(this.id, 'it was already released');
    const ref = this.ref;
    const what = to === 'read' ? 'downgrade' : 'upgrade';
    const changed = await withRetries(this.#ctx.policy, what, () => withConnection(this.#ctx.knex, (conn) => change(conn, ref)), async (err) => {
      const reply = await askDatabase(this.#ctx.knex, this.#ctx.policy.resolveTimeoutMs, (conn) => findGrantByToken(conn, this.#token));
      if (reply === undefined) throw new LockOutcomeUnknownError(what, this.token, this.id, err);
      const row = reply.answer;
      if (row?.status === STATUS.live && row.mode === to) return { value: true };
      return row?.status === STATUS.live ? 'retry' : { value: false };
    });
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

  /**
   * Reads the grant row: true while the grant is live. False once it has ended: by this holder (its
   * fenced commit or a release; `signal` not aborted) or by the reaper or an operator (`signal`
   * aborted). After a COMMIT of a fenced transaction that replied an error, this says whether to run
   * it again: the error normally means it rolled back (true), but a cluster member that leaves the
   * group while the commit is being certified cannot know the outcome, and the rest of the group may
   * apply it (false, `signal` not aborted: it committed). Asks until the database answers (through a
   * failover), then LockOutcomeUnknownError after `resolveTimeoutMs`. For a COMMIT whose reply was
   * lost use `release()`, which waits for the lost transaction to finish.
   */
  async isLive(): Promise<boolean> {
    if (this.#done) return false;
    const reply = await askDatabase(this.#ctx.knex, this.#ctx.policy.resolveTimeoutMs, (conn) => findGrantByToken(conn, this.#token));
    if (reply === undefined) throw new LockOutcomeUnknownError('business commit', this.token, this.id, null);
    const row = reply.answer;
    if (row?.status === STATUS.live) return true;
    if (row?.releasedBy === RELEASED_BY.holder) this.#settle();
    else this.#markLost('fence', row?.releasedBy ?? null);
    return false;
  }

  /** Records that the transaction that ran `fence()` committed: the grant is released. No round trip. */
  committed(): void {
    this.#settle();
  }

  /**
   * Extends the lease: the reaper will not release this grant before `ms` from now (database
   * clock), however old it is. True if the grant is still live; false (and `signal` aborted) if it
   * had already been released by someone else.
   */
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

  /**
   * Releases the grant. Idempotent: true when this call released it, false when it had already
   * been released (by this holder earlier, the reaper or an operator), in which case nothing changes.
   * A lost reply is settled by running the same guarded statement again.
   */
  release(): Promise<boolean> {
    return traced(releaseChannel, () => ({ grant: this, grantId: this.id, by: 'holder' as const }), () => this.#release());
  }

  async #release(): Promise<boolean> {
    if (this.#done) return false;
    const ref = this.ref;
    const released = await withRetries(this.#ctx.policy, 'release', () => withConnection(this.#ctx.knex, (conn) => releaseGrant(conn, ref, 'holder')), async (err) => {
      const answer = await this.#settleByRelease();
      if (answer === undefined) throw new LockOutcomeUnknownError('release', this.token, this.id, err);
      return { value: answer.releasedNow || answer.releasedBy === RELEASED_BY.holder };
    });
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
    if (this.#lost.signal.aborted) return;
    this.#lost.abort(new LockLostError(this.id));
    const hook = this.#ctx.options.onLockLost;
    if (!hook && !lostChannel.hasSubscribers) return;
    const call = (by: number | null): void => {
      const info: LockLostInfo = { releasedBy: by === RELEASED_BY.reaper ? 'reaper' : by === RELEASED_BY.operator ? 'operator' : 'unknown', detectedBy };
      if (lostChannel.hasSubscribers) lostChannel.publish({ grant: this, grantId: this.id, resourceId: this.resourceId, mode: this.#mode, ...info });
      if (!hook) return;
      try {
        void Promise.resolve(hook(this, info)).catch((err: unknown) => this.#reportHookError(err));
      } catch (err) {
        this.#reportHookError(err);
      }
    };
    if (releasedBy !== 'look up') return call(releasedBy);
    void withConnection(this.#ctx.knex, (conn) => findGrantByToken(conn, this.#token)).then((row) => call(row?.releasedBy ?? null), () => call(null));
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
    process.emitWarning(`onLockLost threw for grant ${this.id}: ${text}`, { type: 'MysqlRwlockWarning', detail: stack });
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
