import type { Knex } from 'knex';
import { setTimeout as sleep } from 'node:timers/promises';
import type { LockContext } from './context.js';
import type { Grant, FenceExecutor } from './api.js';
import {
  ConnectionLostError,
  InvalidOptionsError,
  LockAbortedError,
  LockOutcomeUnknownError,
  LockTimeoutError,
  SectionError,
  TransactionConflictError,
} from '../errors.js';
import type { IsolationLevel } from '../options.js';
import {
  errnoOf,
  ER_DUP_ENTRY,
  isConflict,
  isConnectionLost,
  isLockWaitTimeout,
  query,
  withConnection,
  type RawConnection,
} from '../sql/connection.js';
import { WRITER_INTENT } from '../sql/acquire.js';
import { askDatabase, conflictBackoffMs } from '../sql/retry.js';
import { checkSchemaVersion } from '../sql/schema-version.js';
import {
  boundStatement,
  CREATE_ROW,
  detectSectionServer,
  logSection,
  restoreBounds,
  RESTORE_LOCK_WAIT,
  ROW_EXISTS,
  TAKE,
  takeStatement,
  type SectionServer,
} from '../sql/section.js';
import { withdrawAcquire } from '../sql/withdraw.js';
import type { LockMode } from '../types.js';
import { newToken } from './token.js';
import { acquireChannel, fenceChannel, isTraced, traced } from '../observability/tracing.js';
import { backoffDelay, type Ticket } from './wait.js';

/** A resource a section takes: the id as given, its bytes as stored, and the mode. */
export interface SectionTarget {
  resource: Buffer;
  resourceId: string;
  mode: LockMode;
}

export interface SectionOptions {
  waitMs: number;
  signal: AbortSignal | undefined;
  isolationLevel: IsolationLevel | undefined;
}

/** The work of a section: its transaction, and one grant per target, in the targets' order. */
export type SectionWork<T> = (trx: Knex.Transaction, grants: readonly Grant[]) => Promise<T>;

/**
 * Test-only switches for negative controls, not exported from any package entry: `idleBound:
 * false` runs sections without the server's idle bound (the paused-holder test); `guard: false`
 * takes rows with a plain read that neither checks the counts nor locks (the exclusion tests).
 */
export const sectionTesting = { idleBound: true, guard: true };

/**
 * Runs `work` as one one-commit section over `targets`, which the caller gives ALREADY SORTED by
 * `resource` bytes (Buffer.compare) and distinct: every section takes its rows in that one order,
 * so two sections never deadlock on each other. Throws InvalidOptionsError, with nothing done,
 * when they are not.
 *
 * In one transaction on one pooled connection: the rows are taken in order (a guarded UPDATE, or a
 * guarded shared read for a reader where the topology certifies shared locks), one `t_lock_log`
 * row per target is written granted and released (`released_by = section`), `work(trx, grants)`
 * runs, and the transaction commits once. The counts never change, so nothing is left held by a
 * section that fails, times out, is aborted or whose process dies: its transaction rolls back.
 *
 * Waiting: another section's row lock is waited on in the take itself, bounded by the time left
 * of `waitMs` in whole seconds, rounded up (innodb_lock_wait_timeout, at least 1 s). A durable
 * holder refuses the take: the transaction rolls back (a writer first marks its writer intent, in
 * a commit of its own, as a durable writer does) and the section tries again with the durable
 * acquire's backoff, woken early by a release in this process. Past `waitMs`: LockTimeoutError;
 * `signal`: LockAbortedError (a take blocked on a row lock is interrupted with KILL QUERY).
 * A deadlock or certification conflict rolls the whole section back and runs it again, `work`
 * included (up to `deadlockRetries`, then TransactionConflictError). A COMMIT whose reply was lost
 * is settled by the first target's token: committed (the value is returned) or certainly not
 * (ConnectionLostError).
 */
export async function runSection<T>(
  ctx: LockContext,
  targets: readonly SectionTarget[],
  work: SectionWork<T>,
  options: SectionOptions,
): Promise<T> {
  checkTargets(targets);
  const { waitMs, signal } = options;
  if (signal?.aborted) throw new LockAbortedError(signal.reason);
  await checkSchemaVersion(ctx.knex);
  const traces = new SectionTraces(ctx, targets, waitMs);
  try {
    return await waitAndRun(ctx, targets, work, options, traces);
  } catch (err) {
    traces.failed(err);
    throw err;
  }
}

async function waitAndRun<T>(
  ctx: LockContext,
  targets: readonly SectionTarget[],
  work: SectionWork<T>,
  options: SectionOptions,
  traces: SectionTraces,
): Promise<T> {
  const { waitMs, signal } = options;
  const server = await sectionServer(ctx);
  const startedAt = performance.now();
  const deadline = startedAt + waitMs;
  const { backoffMinMs, backoffMaxMs } = ctx.options;
  let ticket: Ticket | undefined;
  let conflicts = 0;
  try {
    for (let n = 0; ;) {
      if (signal?.aborted) throw new LockAbortedError(signal.reason);
      const seen = ticket?.epoch ?? 0;
      let outcome: Outcome<T>;
      try {
        outcome = await attempt(ctx, server, targets, work, options, deadline, traces);
      } catch (err) {
        if (!isConflict(err)) throw err;
        if (++conflicts > ctx.policy.retries) throw new TransactionConflictError('the section', conflicts, err);
        await sleep(conflictBackoffMs(conflicts));
        continue;
      }
      if ('value' in outcome) {
        for (const t of targets) ctx.queues.wake(t.resource.toString('hex'));
        return outcome.value;
      }
      const t = outcome.refused;
      if (outcome.missing) {
        await ctx.knex.raw(CREATE_ROW, [t.resource]);
        continue;
      }
      const remaining = deadline - performance.now();
      if (remaining <= 0) throw new LockTimeoutError(t.resourceId, t.mode, waitMs);
      ticket ??= ctx.queues.join(t.resource.toString('hex'), t.mode);
      if (ticket.epoch !== seen) {
        n = 0;
        continue;
      }
      await ticket.pause(
        Math.min(remaining, backoffDelay(n++, backoffMinMs, backoffMaxMs, performance.now() - startedAt)),
        signal,
        seen,
      );
    }
  } finally {
    ticket?.leave(null);
  }
}

function checkTargets(targets: readonly SectionTarget[]): void {
  if (targets.length === 0) throw new InvalidOptionsError('a section needs at least one resource');
  for (let i = 1; i < targets.length; i++)
    if (Buffer.compare(targets[i - 1]!.resource, targets[i]!.resource) >= 0)
      throw new InvalidOptionsError('the resources of a section must be distinct and sorted by their bytes');
}

function sectionServer(ctx: LockContext): Promise<SectionServer> {
  const asked = (ctx.sections.server ??= withConnection(ctx.knex, detectSectionServer));
  // A failed probe (server unreachable) is asked again by the next section.
  asked.catch(() => {
    if (ctx.sections.server === asked) ctx.sections.server = undefined;
  });
  return asked;
}

type Outcome<T> = { value: T } | { refused: SectionTarget; missing: boolean };

/** Thrown inside the transaction to roll it back; carries why. */
class Refused {
  constructor(readonly outcome: { refused: SectionTarget; missing: boolean }) {}
}

/** One try of the whole section, in one transaction on one connection. */
async function attempt<T>(
  ctx: LockContext,
  server: SectionServer,
  targets: readonly SectionTarget[],
  work: SectionWork<T>,
  options: SectionOptions,
  deadline: number,
  traces: SectionTraces,
): Promise<Outcome<T>> {
  const { signal, isolationLevel, waitMs } = options;
  const idleSec = sectionTesting.idleBound ? Math.ceil(ctx.options.sectionIdleTimeoutMs / 1000) : null;
  const lockWaitSec = Math.max(1, Math.ceil((deadline - performance.now()) / 1000));
  const intentMs = waitMs > 0 ? ctx.options.writerIntentMs : 0;
  const tokens = targets.map(() => newToken());
  return withConnection(ctx.knex, async (conn) => {
    const bound = boundStatement(server, idleSec, lockWaitSec);
    if (bound !== null) await query(conn, bound);
    let ended = false;
    let commitSent = false;
    let value: T | undefined;
    let grants: SectionGrant[] = [];
    let commit: Deferred<void> | undefined;
    try {
      let refusedWithIntent: Outcome<T> | undefined;
      await ctx.knex.transaction(
        async (trx) => {
          for (const t of targets) {
            const taken = await take(ctx, conn, server, t, lockWaitSec, signal, waitMs);
            if (taken) continue;
            const exists = (await query<unknown[]>(conn, ROW_EXISTS, [t.resource])).length === 1;
            if (exists && t.mode === 'write' && intentMs > 0) {
              // As a durable writer: mark the intent, so new readers hold back while it waits.
              await query(conn, WRITER_INTENT, [intentMs * 1000, t.resource, intentMs * 500]);
              refusedWithIntent = { refused: t, missing: false };
              return; // commits the intent (and nothing else: the work has not run)
            }
            throw new Refused({ refused: t, missing: !exists });
          }
          if (!server.mariadb) await query(conn, RESTORE_LOCK_WAIT);
          for (const [i, t] of targets.entries()) {
            const id = await logSection(conn, t.resource, t.mode, ctx.ownerBytes, tokens[i]!);
            grants.push(new SectionGrant(id, t, ctx.options.owner, tokens[i]!.toString('hex')));
          }
          traces.taken(grants);
          value = await inScopes(ctx, targets, grants, trx, () => work(trx, grants));
          commitSent = true;
          commit = traces.commit(grants);
        },
        { connection: conn, ...(isolationLevel ? { isolationLevel } : {}) },
      );
      ended = true;
      commit?.resolve();
      if (refusedWithIntent) return refusedWithIntent;
      return { value: value as T };
    } catch (err) {
      commit?.reject(err);
      if (err instanceof Refused) {
        ended = true;
        return err.outcome as Outcome<T>;
      }
      if (commitSent && isConnectionLost(err)) {
        ended = true; // the connection is gone: its transaction is no longer ours to end
        return { value: await settleLostCommit(ctx, targets[0]!, tokens[0]!, err, value as T) };
      }
      if (!commitSent && isConnectionLost(err) && !signal?.aborted) {
        ended = true;
        throw new ConnectionLostError('the section', err);
      }
      throw err;
    } finally {
      for (const g of grants) g.end();
      grants = [];
      // A killed statement or failed rollback must not hand the pool a connection in a transaction.
      if (!ended) await query(conn, 'ROLLBACK').catch(() => undefined);
      const restore = restoreBounds(server, idleSec !== null);
      if (restore !== null) await query(conn, restore).catch(() => undefined);
    }
  });
}

/**
 * Takes one row: true when taken. A take blocked on a row lock past its bound is a
 * LockTimeoutError; one blocked when `signal` aborts is interrupted (KILL QUERY on another
 * connection) and becomes LockAbortedError.
 */
async function take(
  ctx: LockContext,
  conn: RawConnection,
  server: SectionServer,
  t: SectionTarget,
  lockWaitSec: number,
  signal: AbortSignal | undefined,
  waitMs: number,
): Promise<boolean> {
  const kind = !sectionTesting.guard
    ? 'unguarded'
    : t.mode === 'write'
      ? 'write'
      : server.sharedLocksCertified
        ? 'readShared'
        : 'readExclusive';
  let pending = true;
  const interrupt = (): void => {
    if (pending && conn.threadId !== null) void ctx.knex.raw('KILL QUERY ?', [conn.threadId]).catch(() => undefined);
  };
  signal?.addEventListener('abort', interrupt, { once: true });
  try {
    const result = await query<unknown[] | { affectedRows: number }>(
      conn,
      takeStatement(server, kind === 'unguarded' ? UNGUARDED : TAKE[kind], lockWaitSec),
      [t.resource],
    );
    pending = false;
    if (signal?.aborted) throw new LockAbortedError(signal.reason);
    return Array.isArray(result) ? result.length === 1 : result.affectedRows === 1;
  } catch (err) {
    pending = false;
    if (signal?.aborted) throw new LockAbortedError(signal.reason);
    if (isLockWaitTimeout(err)) throw new LockTimeoutError(t.resourceId, t.mode, waitMs);
    throw err;
  } finally {
    signal?.removeEventListener('abort', interrupt);
  }
}

/** Runs `run` with every target's grant and transaction in the manager's scopes. */
function inScopes<T>(
  ctx: LockContext,
  targets: readonly SectionTarget[],
  grants: readonly SectionGrant[],
  trx: Knex.Transaction,
  run: () => Promise<T>,
): Promise<T> {
  return ctx.scopes.run(
    targets.map((t, i) => [t.resource.toString('hex'), { grant: grants[i]!, trx }] as const),
    run,
  );
}

/**
 * A COMMIT whose reply was lost: a released row written under the section's token in its place
 * either fails on the duplicate (the section's row is there: it committed) or succeeds (it never
 * will: the section's insert of that token would fail).
 */
async function settleLostCommit<T>(
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

interface Deferred<V> {
  promise: Promise<V>;
  resolve: (value: V) => void;
  reject: (err: unknown) => void;
}

function deferred<V>(): Deferred<V> {
  let resolve!: (value: V) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<V>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // The traced copy reports a rejection; this one is not awaited by anyone else.
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

/**
 * A section on the tracing channels, one context per target, marked `section: true`: on the
 * acquire channel from the call to the first take of its rows (or the failure that ended it before
 * any), on the fence channel its commit. Nothing is built while no one listens.
 */
class SectionTraces {
  readonly #takes: Array<Deferred<Grant>> = [];
  #taken = false;

  constructor(
    readonly ctx: LockContext,
    readonly targets: readonly SectionTarget[],
    waitMs: number,
  ) {
    if (!isTraced(acquireChannel)) return;
    for (const t of targets) {
      const take = deferred<Grant>();
      this.#takes.push(take);
      void traced(
        acquireChannel,
        () => ({ resourceId: t.resourceId, mode: t.mode, waitMs, owner: ctx.options.owner, section: true as const }),
        () => take.promise,
      ).catch(() => undefined);
    }
  }

  taken(grants: readonly Grant[]): void {
    if (this.#taken) return;
    this.#taken = true;
    this.#takes.forEach((take, i) => take.resolve(grants[i]!));
  }

  failed(err: unknown): void {
    if (this.#taken) return;
    this.#taken = true;
    for (const take of this.#takes) take.reject(err);
  }

  /** The commit about to be sent: settle the returned deferred with its outcome. */
  commit(grants: readonly Grant[]): Deferred<void> | undefined {
    if (!isTraced(fenceChannel)) return undefined;
    const done = deferred<void>();
    for (const grant of grants)
      void traced(
        fenceChannel,
        () => ({ grant, grantId: grant.id, resourceId: grant.resourceId, mode: grant.mode, section: true as const }),
        () => done.promise,
      ).catch(() => undefined);
    return done;
  }
}

/** The negative control's take: any existing row, no lock. */
const UNGUARDED = 'SELECT 1 AS taken FROM t_read_write_lock WHERE resource_id = ?';

const NEVER = new AbortController().signal;

/**
 * The grant a section's work is given. Its id is the section's `t_lock_log` row (a fencing token
 * like any grant's); the section's commit is its release, so the methods that end or change a
 * durable grant are refused with SectionError. `isLive()` is true until the section's transaction
 * ends; `committed()` and `[Symbol.asyncDispose]` do nothing.
 */
export class SectionGrant implements Grant {
  readonly id: number;
  readonly resourceId: string;
  readonly owner: string;
  readonly token: string;
  readonly mode: LockMode;
  readonly signal: AbortSignal = NEVER;
  #ended = false;

  constructor(id: number, t: SectionTarget, owner: string, token: string) {
    this.id = id;
    this.resourceId = t.resourceId;
    this.mode = t.mode;
    this.owner = owner;
    this.token = token;
  }

  get settled(): boolean {
    return this.#ended;
  }

  /** @internal The section's transaction ended. */
  end(): void {
    this.#ended = true;
  }

  #refuse(what: string): Promise<never> {
    return Promise.reject(
      new SectionError(
        `${what}: a section's grant ends with the section's commit; use a durable lock (no section option) to ${what}`,
      ),
    );
  }

  fence(_execute: FenceExecutor): Promise<void> {
    return this.#refuse('fence');
  }
  downgrade(): Promise<void> {
    return this.#refuse('downgrade');
  }
  tryUpgrade(): Promise<Grant | null> {
    return this.#refuse('tryUpgrade');
  }
  extend(_ms: number): Promise<boolean> {
    return this.#refuse('extend');
  }
  release(): Promise<boolean> {
    return this.#refuse('release');
  }
  isLive(): Promise<boolean> {
    return Promise.resolve(!this.#ended);
  }
  committed(): void {}
  [Symbol.asyncDispose](): Promise<void> {
    return Promise.resolve();
  }
}
