import type { Knex } from 'knex';
import type { LockContext } from '../context/lock-context.js';
import { ConnectionLostError, LockAbortedError, LockOutcomeUnknownError, LockTimeoutError } from '../../errors.js';
import {
  isConnectionLost,
  isLockWaitTimeout,
  query,
  type ConnectionWait,
  type RawConnection,
  type SqlValue,
} from '../../sql/connection.js';
import {
  boundStatement,
  CREATE_GATE,
  CREATE_ROW,
  idList,
  restoreAfterTake,
  restoreBounds,
  SECTION_BEGIN,
  SECTION_BEGIN_BARE,
  SECTION_BEGIN_ONE,
  SECTION_COMMIT,
  SECTION_COMMIT_BARE,
  SECTION_COMMIT_ONE,
  SECTION_TAKE,
  SET_RELEASED,
  takeStatement,
  type SectionServer,
} from '../../sql/section.js';
import { newToken } from '../durable/token.js';
import { inHoldWrappers } from '../../contract/hold-wrappers.js';
import { testSwitches } from '../../test-switches.js';
import { SectionCalls } from './section-calls.js';
import { settleSectionCommit } from './section-commit.js';
import { SectionGrant } from './section-grant.js';
import { Refused, takeKind, takeWithProcedure, takeWithStatements, type Taken } from './section-take.js';
import type { Deferred, SectionTraces } from './section-traces.js';
import type { SectionOptions, SectionTarget, SectionWork } from './section-types.js';
import { onSectionConnection } from './section-waits.js';

export type Outcome<T> = { value: T } | { refused: SectionTarget } | { created: true };

// Longer than 80 lines on purpose: the flags the transaction sets (commitSent, bounds, the work's
// failure, again) decide in the catch which error or outcome the caller gets, and with `ended` in
// the finally whether a ROLLBACK is sent and which bounds are restored. Kept in one function, their
// every write reads in order with the reads; the take, the commit interceptor, the lost-COMMIT
// settle and the session's restore are in functions of their own.
/**
 * One try of the whole section, in one transaction on one connection. The rows are taken in a
 * fixed order: every target's gate (in the targets' byte order), then the lock rows written
 * (writing sections, and reading ones where shared locks are not certified), then the reading
 * sections' plain reads of their lock rows. Every section takes its gates before any row, and a
 * durable acquire never waits, so no cycle of waits forms. A plain read comes after every lock, so
 * under REPEATABLE READ its snapshot is taken after every gate was granted.
 *
 * Where the database has the section procedures, the take is one call in place of knex's BEGIN
 * (`rwlock_section_begin`, migration 012: the transaction's start, bounds, gates, rows, log rows;
 * where only migration 009 is, `rwlock_section_take` after the BEGIN) and the commit one call in
 * place of knex's COMMIT (`rwlock_section_commit`: release times, COMMIT, idle bound restored):
 * the round trips of the plain transaction. Without them, one statement each, as
 * `takeWithStatements` sends them.
 */
export async function attempt<T>(
  ctx: LockContext,
  server: SectionServer,
  targets: readonly SectionTarget[],
  work: SectionWork<T>,
  options: SectionOptions,
  deadline: number,
  traces: SectionTraces,
): Promise<Outcome<T>> {
  const { signal, isolationLevel, waitMs, history } = options;
  const idleSec = testSwitches.section.idleBound ? Math.ceil(ctx.options.sectionIdleTimeoutMs / 1000) : null;
  const lockWaitSec = Math.max(1, Math.ceil((deadline - performance.now()) / 1000));
  const intentMs = waitMs > 0 ? ctx.options.writerIntentMs : 0;
  const tokens = targets.map(() => newToken());
  const kinds = targets.map((t) => takeKind(server, t));
  /** A one-resource section with migration 013: its own begin and commit, no packed targets. */
  const oneTarget = targets.length === 1 && !ctx.sections.onePacked;
  /** Without history: migration 014's bare begin and commit for one resource; statements for more. */
  const bare = !history && targets.length === 1 && !ctx.sections.bareStatements;
  // The negative controls' takes exist only as statements.
  const viaProcedure =
    (history || bare) &&
    !ctx.acquirePath.statements &&
    !ctx.sections.statements &&
    testSwitches.section.guard &&
    !testSwitches.section.lockRowShared &&
    ctx.options.procedures !== false;
  const first = targets[0]!;
  const connectionWait: ConnectionWait = {
    what: 'a section',
    deadline,
    ...(signal ? { signal } : {}),
    timeout: (why, on) => new LockTimeoutError(first.resourceId, first.mode, waitMs, on, why),
  };
  return onSectionConnection(ctx, connectionWait, async (conn, waits) => {
    // A statement that may wait on another transaction's lock: ended by the deadline and the signal.
    const waiting = <R>(t: SectionTarget, sql: string): Promise<R> =>
      waits.run(
        () => query<R>(conn, takeStatement(server, sql, lockWaitSec), [t.resource]),
        deadline,
        signal,
        () => new LockTimeoutError(t.resourceId, t.mode, waitMs),
      );
    const calls = new SectionCalls(conn);
    let ended = false;
    let commitSent = false;
    /** Which bounds the session holds that the finally must restore: none, the statements', the procedure's. */
    let bounds = 'none' as Bounds;
    let value: T | undefined;
    let grants: SectionGrant[] = [];
    let commit: Deferred<void> | undefined;
    let failure: { error: unknown } | undefined;
    let again = false;
    /** The take sent in place of knex's BEGIN (migration 012), armed before the transaction starts. */
    let takeInBegin: Promise<Taken | { again: true }> | undefined;
    let takenByOne = false;
    /** The log rows written: none for a section without history (nothing to settle a lost COMMIT by). */
    let ids: number[] = [];
    const takeOptions = { isolationLevel, idleSec, lockWaitSec, intentMs, waits, deadline, signal, waitMs };
    try {
      if (viaProcedure && !ctx.sections.beginApart) {
        bounds = 'procedure';
        const sql = bare ? SECTION_BEGIN_BARE : oneTarget ? SECTION_BEGIN_ONE : SECTION_BEGIN;
        const begin = calls.beforeBegin(sql, SECTION_TAKE, () => waits.interruption());
        takeInBegin = takeWithProcedure(ctx, begin.send, sql, targets, kinds, tokens, {
          ...takeOptions,
          sent: begin.sent,
        });
        // Awaited in the transaction's callback, or in the finally when that never ran.
        takeInBegin.catch(() => undefined);
      }
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
          let taken: Taken | { again: true };
          if (takeInBegin) {
            // Unless the take went apart as the packed one (log rows and all), the one-resource begin
            // ran: so does its commit.
            takenByOne = !calls.beginNow() && oneTarget;
            taken = await takeInBegin;
          } else if (viaProcedure) {
            bounds = 'procedure';
            const send = (sql: string, values: SqlValue[]): Promise<unknown> => query(conn, sql, values);
            taken = await takeWithProcedure(ctx, send, SECTION_TAKE, targets, kinds, tokens, takeOptions);
          } else {
            taken = await takeWithStatements(ctx, conn, server, targets, kinds, tokens, {
              isolationLevel,
              intentMs,
              history,
              waiting,
            });
          }
          if ('again' in taken) {
            again = true;
            throw new Refused(targets[0]!, null);
          }
          if ('refused' in taken) {
            refusedWithIntent = taken;
            return; // commits the intent (and nothing else: the work has not run)
          }
          ids = taken.ids;
          grants = targets.map(
            (t, i) => new SectionGrant(ids[i] ?? 0, t, ctx.options.owner, tokens[i]!.toString('hex')),
          );
          await traces.taken(grants);
          try {
            value = await inHoldWrappers(grants, () => inScopes(ctx, targets, grants, trx, () => work(trx, grants)));
          } catch (error) {
            failure = { error };
            // knex resolves a transaction whose callback threw undefined: always throw an Error to it.
            throw error instanceof Error ? error : new Error('section work rejected');
          }
          // The release time, just before the commit: in the commit's own call where it can be.
          const idle = idleSec === null ? 0 : 1;
          if (viaProcedure && ids.length === 0) calls.beforeCommit(SECTION_COMMIT_BARE, [idle]);
          else if (viaProcedure)
            calls.beforeCommit(takenByOne ? SECTION_COMMIT_ONE : SECTION_COMMIT, [idList(ids), idle]);
          else if (ids.length > 0) await query(conn, SET_RELEASED, [ids]);
          commitSent = true;
          commit = traces.commit(grants);
        },
        { connection: conn, ...(isolationLevel ? { isolationLevel } : {}) },
      );
      ended = true;
      // The commit's call restored the idle bound, after its COMMIT.
      if (calls.committed) bounds = 'none';
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
        if (ids.length === 0 && !testSwitches.section.settleWithoutRow)
          throw new LockOutcomeUnknownError(
            'a section without history',
            tokens[0]!.toString('hex'),
            null,
            err,
            'it wrote no row to settle it by',
          );
        return { value: await settleSectionCommit(ctx, targets[0]!, tokens[0]!, err, value as T) };
      }
      if (!commitSent && isConnectionLost(err)) {
        ended = true;
        throw signal?.aborted ? new LockAbortedError(signal.reason) : new ConnectionLostError('the section', err);
      }
      if (isLockWaitTimeout(err)) throw new LockTimeoutError(targets[0]!.resourceId, targets[0]!.mode, waitMs);
      throw err;
    } finally {
      calls.remove();
      // A take armed for a BEGIN never sent has failed by now; one that was sent has settled unless
      // the callback never ran: its KILL, if its wait was interrupted, answered before the restore.
      await takeInBegin?.catch(() => undefined);
      for (const g of grants) g.end();
      grants = [];
      if (!waits.poisoned) await restoreSession(conn, server, ended, bounds, idleSec);
    }
  });
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

/** Which bounds a section's session holds: none, the statements', the procedure's. */
type Bounds = 'none' | 'statements' | 'procedure';

/**
 * The connection made fit for the pool again after a try: out of any transaction, and with the
 * session's bounds restored.
 */
async function restoreSession(
  conn: RawConnection,
  server: SectionServer,
  ended: boolean,
  bounds: Bounds,
  idleSec: number | null,
): Promise<void> {
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
