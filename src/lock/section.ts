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
  SchemaMissingError,
  SectionError,
  TransactionConflictError,
} from '../errors.js';
import type { IsolationLevel } from '../options.js';
import {
  acquirePooled,
  errnoOf,
  ER_DUP_ENTRY,
  ER_SP_DOES_NOT_EXIST,
  isConflict,
  isConnectionLost,
  isLockWaitTimeout,
  query,
  withConnection,
  type ConnectionWait,
  type DriverError,
  type PoolClient,
  type RawConnection,
  type SqlValue,
} from '../sql/connection.js';
import { WRITER_INTENT } from '../sql/acquire.js';
import { askDatabase, conflictBackoffMs, unreachablePauseMs } from '../sql/retry.js';
import { checkSchemaVersion } from '../sql/schema-version.js';
import {
  boundStatement,
  callSectionTake,
  CREATE_GATE,
  CREATE_ROW,
  detectSectionServer,
  GATE_TAKE,
  idList,
  logSection,
  READ_DECISION,
  READ_LOCKING_ROW,
  restoreAfterTake,
  restoreBounds,
  RESTORE_LOCK_WAIT,
  ROW_EXISTS,
  SECTION_COMMIT,
  SET_RELEASED,
  TAKE,
  takeStatement,
  type SectionServer,
  type TakeLetter,
  type TakeReply,
} from '../sql/section.js';
import { withdrawAcquire } from '../sql/withdraw.js';
import type { LockMode } from '../types.js';
import { newToken } from './token.js';
import { acquireChannel, fenceChannel, isTraced, traced } from '../observability/tracing.js';
import { backoffDelay, type Ticket } from './wait.js';
import { healStale } from './heal.js';
import { onAbort } from '../sql/abort.js';
import { inHoldScope } from '../observability/hold-scope.js';
import { testSwitches } from '../test-switches.js';

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
      // Held by a crashed holder's stale grant: it frees itself here, and the section decides again.
      if (await healStale(ctx, t.resource, { what: 'a section', deadline, signal })) continue;
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
  if (!testSwitches.section.guard) return 'unguarded';
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
 *
 * Where the database has the section procedures (migration 009), the take is one call after the
 * transaction's BEGIN (`rwlock_section_take`: bounds, gates, rows, log rows) and the commit one
 * call in place of knex's COMMIT (`rwlock_section_commit`: release times, COMMIT, idle bound
 * restored); without them, one statement each, as `takeWithStatements` sends them.
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
  const idleSec = testSwitches.section.idleBound ? Math.ceil(ctx.options.sectionIdleTimeoutMs / 1000) : null;
  const lockWaitSec = Math.max(1, Math.ceil((deadline - performance.now()) / 1000));
  const intentMs = waitMs > 0 ? ctx.options.writerIntentMs : 0;
  const tokens = targets.map(() => newToken());
  const kinds = targets.map((t) => takeKind(server, t));
  // The negative controls' takes exist only as statements.
  const viaProcedure =
    !ctx.acquirePath.statements &&
    !ctx.sections.statements &&
    testSwitches.section.guard &&
    !testSwitches.section.lockRowShared &&
    ctx.options.procedures !== false;
  return onSectionConnection(ctx, { what: 'a section', deadline, signal }, async (conn, waits) => {
    // A statement that may wait on another transaction's lock: ended by the deadline and the signal.
    const waiting = <R>(t: SectionTarget, sql: string): Promise<R> =>
      waits.run(
        () => query<R>(conn, takeStatement(server, sql, lockWaitSec), [t.resource]),
        deadline,
        signal,
        () => new LockTimeoutError(t.resourceId, t.mode, waitMs),
      );
    const commits = new CommitCall(conn);
    let ended = false;
    let commitSent = false;
    /** Which bounds the session holds that the finally must restore: none, the statements', the procedure's. */
    let bounds = 'none' as 'none' | 'statements' | 'procedure';
    let value: T | undefined;
    let grants: SectionGrant[] = [];
    let commit: Deferred<void> | undefined;
    let failure: { error: unknown } | undefined;
    let again = false;
    try {
      if (!viaProcedure) {
        const bound = boundStatement(server, idleSec, lockWaitSec);
        if (bound !== null) {
          bounds = 'statements';
          await query(conn, bound);
        }
      }
      let refusedWithIntent: Outcome<T> | undefined;
      await ctx.knex.transaction(
        async (trx) => {
          let ids: number[];
          if (viaProcedure) {
            const letters = kinds.map((kind) => takeLetter(kind, isolationLevel));
            bounds = 'procedure';
            let reply: TakeReply;
            try {
              reply = await waits.run(
                () =>
                  callSectionTake(
                    conn,
                    targets.map((t, i) => ({ resource: t.resource, letter: letters[i]! })),
                    ctx.ownerBytes,
                    tokens,
                    idleSec,
                    lockWaitSec,
                    intentMs,
                  ),
                deadline,
                signal,
                () => new LockTimeoutError(targets[0]!.resourceId, targets[0]!.mode, waitMs),
              );
            } catch (err) {
              // A CALL of a missing procedure fails before running anything: the statements, from the next try.
              if (
                ctx.options.procedures === 'auto' &&
                err instanceof SchemaMissingError &&
                errnoOf(err.cause) === ER_SP_DOES_NOT_EXIST
              ) {
                ctx.sections.statements = true;
                again = true;
                throw new Refused(targets[0]!, null);
              }
              throw err;
            }
            const t = targets[reply.at]!;
            if (reply.outcome === 'gate' || reply.outcome === 'row') throw new Refused(t, reply.outcome);
            if (reply.outcome === 'refused') throw new Refused(t, null);
            if (reply.outcome === 'intent') {
              refusedWithIntent = { refused: t };
              return; // commits the intent (and nothing else: the work has not run)
            }
            ids = reply.ids;
          } else {
            const taken = await takeWithStatements(ctx, conn, server, targets, kinds, tokens, {
              isolationLevel,
              intentMs,
              waiting,
            });
            if ('refused' in taken) {
              refusedWithIntent = taken;
              return;
            }
            ids = taken.ids;
          }
          grants = targets.map((t, i) => new SectionGrant(ids[i]!, t, ctx.options.owner, tokens[i]!.toString('hex')));
          await traces.taken(grants);
          try {
            value = await inHoldScope(grants, () => inScopes(ctx, targets, grants, trx, () => work(trx, grants)));
          } catch (error) {
            failure = { error };
            // knex resolves a transaction whose callback threw undefined: always throw an Error to it.
            throw error instanceof Error ? error : new Error('section work rejected');
          }
          // The release time, just before the commit: in the commit's own call where it can be.
          if (viaProcedure) commits.arm(SECTION_COMMIT, [idList(ids), idleSec === null ? 0 : 1]);
          else await query(conn, SET_RELEASED, [ids]);
          commitSent = true;
          commit = traces.commit(grants);
        },
        { connection: conn, ...(isolationLevel ? { isolationLevel } : {}) },
      );
      ended = true;
      // The commit's call restored the idle bound, after its COMMIT.
      if (commits.used) bounds = 'none';
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
        if (again) return { created: true };
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
      commits.remove();
      for (const g of grants) g.end();
      grants = [];
      if (!waits.poisoned) {
        // A failed statement or rollback must not hand the pool a connection in a transaction.
        if (!ended) await query(conn, 'ROLLBACK').catch(() => undefined);
        const restore =
          bounds === 'statements'
            ? restoreBounds(server, idleSec !== null)
            : bounds === 'procedure'
              ? restoreAfterTake(idleSec !== null)
              : null;
        if (restore !== null) await query(conn, restore).catch(() => undefined);
      }
    }
  });
}

/** The procedure's letter for a take (see `TakeLetter`). */
function takeLetter(kind: ReturnType<typeof takeKind>, isolationLevel: IsolationLevel | undefined): TakeLetter {
  if (kind === 'write') return 'w';
  if (kind === 'readExclusive') return 'x';
  // SERIALIZABLE makes the plain read of the lock row a locking one, which would hold up durable
  // readers' UPDATE: such a reading section takes the gate exclusively instead.
  return isolationLevel === 'serializable' ? 'e' : 's';
}

/**
 * The take as separate statements (a database without the section procedures, and the negative
 * controls): the gates, the lock rows, the plain reads, then the log rows. The log rows' ids, or a
 * refusal that marked a writer's intent (for the caller to commit); other refusals throw Refused.
 */
async function takeWithStatements(
  ctx: LockContext,
  conn: RawConnection,
  server: SectionServer,
  targets: readonly SectionTarget[],
  kinds: ReadonlyArray<ReturnType<typeof takeKind>>,
  tokens: readonly Buffer[],
  o: {
    isolationLevel: IsolationLevel | undefined;
    intentMs: number;
    waiting: <R>(t: SectionTarget, sql: string) => Promise<R>;
  },
): Promise<{ ids: number[] } | { refused: SectionTarget }> {
  const { waiting, intentMs } = o;
  for (const [i, t] of targets.entries()) {
    if (kinds[i] === 'unguarded') continue;
    const gate = kinds[i] === 'readShared' && takeLetter(kinds[i]!, o.isolationLevel) === 's' ? 'shared' : 'exclusive';
    if ((await waiting<unknown[]>(t, GATE_TAKE[gate])).length !== 1) throw new Refused(t, 'gate');
  }
  for (const [i, t] of targets.entries()) {
    const kind = kinds[i]!;
    if (kind === 'readShared' && !testSwitches.section.lockRowShared) continue;
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
      return { refused: t };
    }
    throw new Refused(t, exists ? null : 'row');
  }
  for (const [i, t] of targets.entries()) {
    if (kinds[i] !== 'readShared' || testSwitches.section.lockRowShared) continue;
    const [row] = await query<Array<{ free: number | string | null }>>(conn, READ_DECISION, [t.resource]);
    if (row === undefined) throw new Refused(t, 'row');
    if (Number(row.free) !== 1) throw new Refused(t, null);
  }
  if (!server.mariadb) await query(conn, RESTORE_LOCK_WAIT);
  const ids: number[] = [];
  for (const [i, t] of targets.entries())
    ids.push(await logSection(conn, t.resource, t.mode, ctx.ownerBytes, tokens[i]!));
  return { ids };
}

/**
 * knex ends a transaction with `COMMIT;` on the connection it was given. Armed, this sends another
 * statement in its place, in the same round trip: a section's `rwlock_section_commit`, which also
 * records the release time and restores the idle bound. Installed on the section's own connection
 * only, for the section's transaction only; every other statement passes through unchanged.
 */
class CommitCall {
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
    if (testSwitches.section.killThroughPool) {
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
    testSwitches.section.onKill?.(threadId);
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
 * A section on the tracing channels, one context per target, marked `section: true` and naming
 * the manager's knex: on the acquire channel from the call to the first take of its rows (or the
 * failure that ended it before any), on the fence channel its commit. Nothing is built while no one
 * listens.
 */
class SectionTraces {
  readonly #takes: Array<Deferred<Grant>> = [];
  /** The traced take calls: settled once each acquire context has ended (and the hold begun). */
  readonly #traced: Array<Promise<unknown>> = [];
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
      this.#traced.push(
        traced(
          acquireChannel,
          () => ({
            resourceId: t.resourceId,
            mode: t.mode,
            waitMs,
            owner: ctx.options.owner,
            knex: ctx.knex,
            section: true as const,
          }),
          () => take.promise,
        ).catch(() => undefined),
      );
    }
  }

  /**
   * The take is done: its acquire contexts end with the grants. Resolves once they have ended, so
   * that a subscriber's hold for each grant exists before the work enters the hold scope.
   */
  taken(grants: readonly Grant[]): Promise<unknown> | undefined {
    if (this.#taken) return undefined;
    this.#taken = true;
    this.#takes.forEach((take, i) => take.resolve(grants[i]!));
    return this.#traced.length === 0 ? undefined : Promise.all(this.#traced);
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
        () => ({
          grant,
          grantId: grant.id,
          resourceId: grant.resourceId,
          mode: grant.mode,
          knex: this.ctx.knex,
          section: true as const,
        }),
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
