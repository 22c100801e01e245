import type { Knex } from 'knex';
import { setTimeout as sleep } from 'node:timers/promises';
import type { LockContext } from './context.js';
import type { Grant, FenceExecutor } from './api.js';
import {
  ConnectionLostError,
  DatabaseUnreachableError,
  InvalidOptionsError,
  LockAbortedError,
  LockOutcomeUnknownError,
  LockTimeoutError,
  type RwLockError,
  SectionError,
  TransactionConflictError,
} from '../errors.js';
import type { IsolationLevel } from '../options.js';
import {
  acquirePooled,
  errnoOf,
  ER_DUP_ENTRY,
  isConflict,
  isConnectionLost,
  isLockWaitTimeout,
  query,
  withConnection,
  type ConnectionWait,
  type PoolClient,
  type RawConnection,
} from '../sql/connection.js';
import { WRITER_INTENT } from '../sql/acquire.js';
import { askDatabase, conflictBackoffMs, unreachablePauseMs } from '../sql/retry.js';
import { checkSchemaVersion } from '../sql/schema-version.js';
import {
  boundStatement,
  CREATE_GATE,
  CREATE_ROW,
  detectSectionServer,
  GATE_TAKE,
  logSection,
  READ_DECISION,
  READ_LOCKING_ROW,
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
import { onAbort } from '../sql/abort.js';

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
 * takes rows with a plain read that neither checks the counts nor locks (the exclusion tests);
 * `lockRowShared: true` makes a reading section take the lock row with a shared lock, as before
 * the gate (the mixed-mode tests: durable readers then cannot share with it); `killThroughPool:
 * true` interrupts a waiting section as before (KILL QUERY through the pool, not awaited, the
 * connection handed back: the interruption tests' control). `onKill` is told of each KILL QUERY
 * a section's interruption sent, once it was answered.
 */
export const sectionTesting: {
  idleBound: boolean;
  guard: boolean;
  lockRowShared: boolean;
  killThroughPool: boolean;
  onKill: ((threadId: number) => void) | undefined;
} = { idleBound: true, guard: true, lockRowShared: false, killThroughPool: false, onKill: undefined };

/**
 * Runs `work` as one one-commit section over `targets`, which the caller gives ALREADY SORTED by
 * `resource` bytes (Buffer.compare) and distinct: every section takes its rows in that one order,
 * so two sections never deadlock on each other. Throws InvalidOptionsError, with nothing done,
 * when they are not.
 *
 * In one transaction on one pooled connection: every target's gate is taken (shared by a reader
 * where the topology certifies shared locks, exclusive otherwise), then its lock row (a guarded
 * UPDATE; a shared reader reads the row without locking it, deciding on the same guard), one
 * `t_lock_log` row per target is written granted and released (`released_by = section`),
 * `work(trx, grants)` runs, and the transaction commits once. The counts never change, so nothing
 * is left held by a section that fails, times out, is aborted or whose process dies: its
 * transaction rolls back.
 *
 * Waiting: another section's lock is waited on in the take itself, ended at the deadline of
 * `waitMs` (LockTimeoutError) or by `signal` (LockAbortedError) with a KILL QUERY from a connection
 * of its own, awaited (see SectionWaits). A durable holder refuses the take: the transaction
 * rolls back (a writer first marks its writer intent, in a commit of its own, as a durable writer
 * does) and the section tries again with the durable acquire's backoff, woken early by a release in
 * this process. No connection to be had: tried again after growing pauses until the deadline
 * (DatabaseUnreachableError). A deadlock or certification conflict rolls the whole section back and
 * runs it again, `work` included (up to `deadlockRetries`, then TransactionConflictError). A
 * connection lost before the COMMIT was sent: ConnectionLostError. A COMMIT whose reply was lost is
 * settled by the first target's token: committed (the value is returned) or certainly not
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
  const startedAt = performance.now();
  const deadline = startedAt + waitMs;
  const { backoffMinMs, backoffMaxMs } = ctx.options;
  let ticket: Ticket | undefined;
  let conflicts = 0;
  let reached = false;
  let unreachable = 0;
  try {
    for (let n = 0; ;) {
      if (signal?.aborted) throw new LockAbortedError(signal.reason);
      const seen = ticket?.epoch ?? 0;
      let outcome: Outcome<T>;
      try {
        await checkSchemaVersion(ctx.knex);
        const server = await sectionServer(ctx, { what: 'a section', deadline, signal });
        outcome = await attempt(ctx, server, targets, work, options, deadline, traces);
        reached = true;
        unreachable = 0;
      } catch (err) {
        if (err instanceof DatabaseUnreachableError) {
          // Nothing was sent: try again after a growing pause, up to the deadline.
          const remaining = deadline - performance.now();
          if (remaining <= 0)
            throw reached ? new LockTimeoutError(targets[0]!.resourceId, targets[0]!.mode, waitMs) : err;
          await pauseFor(Math.min(remaining, unreachablePauseMs(unreachable++)), signal);
          continue;
        }
        if (!isConflict(err)) throw err;
        if (++conflicts > ctx.policy.retries) throw new TransactionConflictError('the section', conflicts, err);
        await sleep(conflictBackoffMs(conflicts));
        continue;
      }
      if ('value' in outcome) {
        for (const t of targets) ctx.queues.wake(t.resource.toString('hex'));
        return outcome.value;
      }
      // The missing rows were created: decide again at once.
      if ('created' in outcome) continue;
      const t = outcome.refused;
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

/** Sleeps `ms`, or rejects with LockAbortedError when `signal` aborts first. */
function pauseFor(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new LockAbortedError(signal.reason));
    const timer = setTimeout(() => {
      unsubscribe?.();
      resolve();
    }, ms);
    const unsubscribe = signal
      ? onAbort(signal, () => {
          clearTimeout(timer);
          reject(new LockAbortedError(signal.reason));
        })
      : undefined;
  });
}

function checkTargets(targets: readonly SectionTarget[]): void {
  if (targets.length === 0) throw new InvalidOptionsError('a section needs at least one resource');
  for (let i = 1; i < targets.length; i++)
    if (Buffer.compare(targets[i - 1]!.resource, targets[i]!.resource) >= 0)
      throw new InvalidOptionsError('the resources of a section must be distinct and sorted by their bytes');
}

function sectionServer(ctx: LockContext, wait: ConnectionWait): Promise<SectionServer> {
  const asked = (ctx.sections.server ??= withConnection(ctx.knex, detectSectionServer, wait));
  // A failed probe (server unreachable) is asked again by the next section.
  asked.catch(() => {
    if (ctx.sections.server === asked) ctx.sections.server = undefined;
  });
  return asked;
}

type Outcome<T> = { value: T } | { refused: SectionTarget } | { created: true };

/** Thrown inside the transaction to roll it back; carries why. */
class Refused {
  constructor(
    readonly target: SectionTarget,
    /** What does not exist yet: created after the rollback, in autocommit, then the section decides again. */
    readonly missing: 'gate' | 'row' | null,
  ) {}
}

/** How a section takes one target: its gate's lock mode, and how it takes or reads the lock row. */
function takeKind(server: SectionServer, t: SectionTarget): 'unguarded' | 'write' | 'readShared' | 'readExclusive' {
  if (!sectionTesting.guard) return 'unguarded';
  if (t.mode === 'write') return 'write';
  return server.sharedLocksCertified ? 'readShared' : 'readExclusive';
}

/**
 * One try of the whole section, in one transaction on one connection. The rows are taken in a
 * fixed order: every target's gate (in the targets' byte order), then the lock rows written
 * (writing sections, and reading ones where shared locks are not certified), then the reading
 * sections' plain reads of their lock rows. Every section takes its gates before any row, and a
 * durable acquire never waits, so no cycle of waits forms. A plain read comes after every lock, so
 * under REPEATABLE READ its snapshot is taken after every gate was granted.
 */
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
  const kinds = targets.map((t) => takeKind(server, t));
  return onSectionConnection(ctx, { what: 'a section', deadline, signal }, async (conn, waits) => {
    // A statement that may wait on another transaction's lock: ended by the deadline and the signal.
    const waiting = <R>(t: SectionTarget, sql: string): Promise<R> =>
      waits.run(
        () => query<R>(conn, takeStatement(server, sql, lockWaitSec), [t.resource]),
        deadline,
        signal,
        () => new LockTimeoutError(t.resourceId, t.mode, waitMs),
      );
    let ended = false;
    let commitSent = false;
    let value: T | undefined;
    let grants: SectionGrant[] = [];
    let commit: Deferred<void> | undefined;
    let failure: { error: unknown } | undefined;
    try {
      const bound = boundStatement(server, idleSec, lockWaitSec);
      if (bound !== null) await query(conn, bound);
      let refusedWithIntent: Outcome<T> | undefined;
      await ctx.knex.transaction(
        async (trx) => {
          for (const [i, t] of targets.entries()) {
            if (kinds[i] === 'unguarded') continue;
            // SERIALIZABLE makes the plain read of the lock row a locking one, which would hold up
            // durable readers' UPDATE: such a reading section takes the gate exclusively instead.
            const gate = kinds[i] === 'readShared' && isolationLevel !== 'serializable' ? 'shared' : 'exclusive';
            if ((await waiting<unknown[]>(t, GATE_TAKE[gate])).length !== 1) throw new Refused(t, 'gate');
          }
          for (const [i, t] of targets.entries()) {
            const kind = kinds[i]!;
            if (kind === 'readShared' && !sectionTesting.lockRowShared) continue;
            let taken: boolean;
            if (kind === 'write' || kind === 'readExclusive') {
              taken = (await waiting<{ affectedRows: number }>(t, TAKE[kind])).affectedRows === 1;
            } else {
              const sql = kind === 'unguarded' ? UNGUARDED : READ_LOCKING_ROW;
              taken = (await waiting<unknown[]>(t, sql)).length === 1;
            }
            if (taken) continue;
            const exists = (await query<unknown[]>(conn, ROW_EXISTS, [t.resource])).length === 1;
            if (exists && t.mode === 'write' && intentMs > 0) {
              // As a durable writer: mark the intent, so new readers hold back while it waits.
              await query(conn, WRITER_INTENT, [intentMs * 1000, t.resource, intentMs * 500]);
              refusedWithIntent = { refused: t };
              return; // commits the intent (and nothing else: the work has not run)
            }
            throw new Refused(t, exists ? null : 'row');
          }
          for (const [i, t] of targets.entries()) {
            if (kinds[i] !== 'readShared' || sectionTesting.lockRowShared) continue;
            const [row] = await query<Array<{ free: number | string | null }>>(conn, READ_DECISION, [t.resource]);
            if (row === undefined) throw new Refused(t, 'row');
            if (Number(row.free) !== 1) throw new Refused(t, null);
          }
          if (!server.mariadb) await query(conn, RESTORE_LOCK_WAIT);
          for (const [i, t] of targets.entries()) {
            const id = await logSection(conn, t.resource, t.mode, ctx.ownerBytes, tokens[i]!);
            grants.push(new SectionGrant(id, t, ctx.options.owner, tokens[i]!.toString('hex')));
          }
          traces.taken(grants);
          try {
            value = await inScopes(ctx, targets, grants, trx, () => work(trx, grants));
          } catch (error) {
            failure = { error };
            // knex resolves a transaction whose callback threw undefined: always throw an Error to it.
            throw error instanceof Error ? error : new Error('section work rejected');
          }
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
      // Interrupted by the deadline or the signal: the connection is gone, and so is the transaction.
      const interrupted = waits.interruption();
      if (interrupted) {
        ended = true;
        throw interrupted;
      }
      if (failure) {
        // The connection died under the work (a pause past sectionIdleTimeoutMs, a killed
        // connection, a restart): rolled back, as for a durable holder's business transaction.
        if (isConnectionLost(failure.error)) {
          ended = true;
          throw new ConnectionLostError('the section', failure.error);
        }
        // The work's own rejection, as it was (a conflict it met is rerun by the caller's loop).
        throw failure.error;
      }
      if (err instanceof Refused) {
        ended = true;
        if (err.missing === null) return { refused: err.target };
        // A resource never used (or whose gate is not made yet): create it, in autocommit.
        if (err.missing === 'gate') await waiting(err.target, CREATE_GATE);
        await waiting(err.target, CREATE_ROW);
        return { created: true };
      }
      if (commitSent && isConnectionLost(err)) {
        ended = true; // the connection is gone: its transaction is no longer ours to end
        return { value: await settleLostCommit(ctx, targets[0]!, tokens[0]!, err, value as T) };
      }
      if (!commitSent && isConnectionLost(err)) {
        ended = true;
        throw signal?.aborted ? new LockAbortedError(signal.reason) : new ConnectionLostError('the section', err);
      }
      if (isLockWaitTimeout(err)) throw new LockTimeoutError(targets[0]!.resourceId, targets[0]!.mode, waitMs);
      throw err;
    } finally {
      for (const g of grants) g.end();
      grants = [];
      if (!waits.poisoned) {
        // A failed statement or rollback must not hand the pool a connection in a transaction.
        if (!ended) await query(conn, 'ROLLBACK').catch(() => undefined);
        const restore = restoreBounds(server, idleSec !== null);
        if (restore !== null) await query(conn, restore).catch(() => undefined);
      }
    }
  });
}

/**
 * Runs `run` on a pool connection of a section's own, handed back to the pool after it, unless an
 * interruption that could not send its KILL destroyed it (see `SectionWaits`).
 */
async function onSectionConnection<R>(
  ctx: LockContext,
  wait: ConnectionWait,
  run: (conn: RawConnection, waits: SectionWaits) => Promise<R>,
): Promise<R> {
  const client = ctx.knex.client as unknown as PoolClient;
  const conn = await acquirePooled(client, wait);
  const waits = new SectionWaits(ctx, conn);
  try {
    return await run(conn, waits);
  } finally {
    // A destroyed connection fails the pool's check at its next checkout and is discarded there. Its
    // statement has failed by now: closing it also makes the pool's own close of it (a QUIT) fail at
    // once instead of waiting for a reply on a dead socket, which would keep its pool slot forever.
    if (waits.poisoned) (conn as { destroy?: () => void }).destroy?.();
    await client.releaseConnection(conn);
  }
}

/**
 * Ends a section's waits on other transactions' locks at its deadline (LockTimeoutError) or when
 * its signal aborts (LockAbortedError), whatever the server's lock wait timeout (whole seconds, kept
 * as a backstop). An interruption sends `KILL QUERY` for the section's server thread on a connection
 * opened for that alone (not from the pool, which may be full of waiting sections) and waits for its
 * reply before the section's connection is used again or handed back to the pool. So the KILL can
 * reach only the section's own statement: if that statement had already ended, the KILL finds the
 * thread idle, and the servers clear a KILL QUERY at the start of the thread's next command. (The
 * interruption before this one sent KILL QUERY through the pool without waiting for it; it ran when
 * a pool connection came free, by which time the section's connection could be running someone
 * else's query.) When no connection can be had for the KILL, the section's connection is destroyed
 * instead, never to be reused, so that the caller is still answered at once.
 */
/**
 * How long a section's statement may run, at least, before its deadline interrupts it: a statement
 * that waits for no one takes a few milliseconds, so one sent just before the deadline (or with
 * `waitMs: 0`) is not interrupted for its own work; a wait on another transaction's lock ends at most
 * this long after the deadline.
 */
export const STATEMENT_GRACE_MS = 100;

class SectionWaits {
  #interrupted: RwLockError | undefined;
  #killed: Promise<void> = Promise.resolve();
  #poisoned = false;

  constructor(
    readonly ctx: LockContext,
    readonly conn: RawConnection,
  ) {}

  /** True once the connection was destroyed by an interruption (no KILL could be sent). */
  get poisoned(): boolean {
    return this.#poisoned;
  }

  /** The error an interruption ended the section with, if one did. */
  interruption(): RwLockError | undefined {
    return this.#interrupted;
  }

  async run<R>(
    statement: () => Promise<R>,
    deadline: number,
    signal: AbortSignal | undefined,
    timeout: () => RwLockError,
  ): Promise<R> {
    // Aborted before this statement is sent: nothing of the section's runs on the connection, so no
    // KILL. One sent now would land on whatever the connection runs when it arrives: the section's
    // ROLLBACK, or the statement of the pool's next borrower once the section has handed it back.
    if (signal?.aborted) this.#interrupted ??= new LockAbortedError(signal.reason);
    if (this.#interrupted) {
      await this.#killed;
      throw this.#interrupted;
    }
    // A statement sent near the deadline still gets its own work's time: one attempt, even at waitMs 0.
    const due = performance.now() + Math.max(STATEMENT_GRACE_MS, deadline - performance.now());
    let timer: NodeJS.Timeout | undefined;
    // Node's timers count whole milliseconds of the event loop's clock: one may fire up to a
    // millisecond before performance.now() reaches its time (6.2 ms for a 7 ms timer, seen): armed
    // again until due, so a wait never ends before its deadline.
    const arm = (): void => {
      const left = due - performance.now();
      if (left > 0) timer = setTimeout(arm, left);
      else this.#interrupt(timeout());
    };
    arm();
    const unsubscribe = signal
      ? onAbort(signal, () => this.#interrupt(new LockAbortedError(signal.reason)))
      : undefined;
    let failure: { err: unknown } | undefined;
    let result: R | undefined;
    try {
      result = await statement();
    } catch (err) {
      failure = { err };
    } finally {
      clearTimeout(timer);
      unsubscribe?.();
    }
    if (this.#interrupted) {
      // Nothing more is sent on this connection until the KILL was answered.
      await this.#killed;
      throw this.#interrupted;
    }
    if (failure) {
      // The server's own bound (whole seconds) ended the wait first.
      if (isLockWaitTimeout(failure.err)) throw timeout();
      throw failure.err;
    }
    return result as R;
  }

  #interrupt(err: RwLockError): void {
    if (this.#interrupted) return;
    this.#interrupted = err;
    const threadId = this.conn.threadId;
    if (sectionTesting.killThroughPool) {
      // The negative control: the interruption before this one, which reached other users' queries.
      if (threadId !== null) void this.ctx.knex.raw('KILL QUERY ?', [threadId]).catch(() => undefined);
      return;
    }
    this.#killed = killQuery(this.ctx, threadId).then((answered) => {
      if (answered) return;
      // No KILL could be sent: the socket itself, so the statement fails now (mysql2's destroy()
      // only half-closes it); the connection is never reused.
      this.#poisoned = true;
      (this.conn as { stream?: { destroy(): void } }).stream?.destroy();
    });
  }
}

/** `KILL QUERY` of a server thread, on a connection opened for it and closed after: true once answered. */
async function killQuery(ctx: LockContext, threadId: number | null): Promise<boolean> {
  if (threadId === null) return false;
  const client = ctx.knex.client as unknown as {
    acquireRawConnection(): Promise<RawConnection>;
    destroyRawConnection(conn: RawConnection): Promise<void>;
  };
  let killer: RawConnection | undefined;
  try {
    killer = await client.acquireRawConnection();
    await query(killer, 'KILL QUERY ?', [threadId]);
    sectionTesting.onKill?.(threadId);
    return true;
  } catch {
    return false;
  } finally {
    if (killer) await client.destroyRawConnection(killer).catch(() => undefined);
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
  /** Never aborted: nobody else can end a section. One per grant, so listeners added to it go with it. */
  readonly signal: AbortSignal = new AbortController().signal;
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
