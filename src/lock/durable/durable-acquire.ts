import {
  errnoOf,
  ER_DUP_ENTRY,
  ER_SP_DOES_NOT_EXIST,
  withConnection,
  type ConnectionWait,
  type RawConnection,
} from '../../sql/connection.js';
import type { LockContext } from '../context/lock-context.js';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  DatabaseUnreachableError,
  LockAbortedError,
  LockOutcomeUnknownError,
  LockTimeoutError,
  PermitLimitError,
  ResourceKindError,
  SchemaMissingError,
  TransactionConflictError,
} from '../../errors.js';
import { DurableGrant } from './grant.js';
import { askDatabase, unreachablePauseMs, waitedOut, withRetries } from '../../sql/retry.js';
import {
  acquirePermitWithStatements,
  acquireWithStatements,
  callAcquire,
  callAcquirePermit,
  refusedOnLockWait,
  type AcquireReply,
  type PermitAsk,
} from '../../sql/acquire.js';
import { findGrantByToken } from '../../sql/lookup.js';
import { withdrawAcquire } from '../../sql/withdraw.js';
import { newToken } from './token.js';
import { RELEASED_BY, STATUS, type LockMode } from '../../types.js';
import { backoffDelay } from '../waiting/wait.js';
import { checkSchemaVersion } from '../../sql/schema-version.js';
import { ensureReleasable } from './privilege-probe.js';
import { healStale } from './heal-stale.js';

/** A resource to lock: the id as given, and its bytes as stored. */
export interface Target {
  mode: LockMode;
  resourceId: string;
  resource: Buffer;
  /** A permit target's semaphore limit and how many permits it takes (mode 'permit' only). */
  permit?: PermitAsk;
}

/**
 * One attempt, for `tryAcquire*`: the Grant, or null when the resource is held (by a grant or a
 * section) or the attempt lost a deadlock or certification race on every try: contention is an
 * answer, not an error. DatabaseUnreachableError at once when no connection could be had.
 */
export async function tryOnce(ctx: LockContext, t: Target): Promise<DurableGrant | null> {
  try {
    return await attempt(ctx, t, 0);
  } catch (err) {
    if (err instanceof TransactionConflictError) return null;
    throw err;
  }
}

/**
 * Waits for a lock: the Grant, or LockTimeoutError after `waitMs`, or LockAbortedError. Waiters
 * of this manager queue per resource (FIFO): only the head polls, and a holder that releases and
 * re-acquires in a loop cannot barge past them. Between processes the database decides. An
 * attempt never waits on another transaction's row lock (see `acquireWithStatements`), so the
 * pauses between attempts are the only waits, and `waitMs` and `signal` bound them. When no
 * connection can be had, the attempt is made again after a growing pause (`unreachablePauseMs`)
 * until the deadline: then DatabaseUnreachableError, or LockTimeoutError if an attempt did reach
 * the database and found the resource held.
 */
export async function acquire(
  ctx: LockContext,
  t: Target,
  waitMs: number,
  signal: AbortSignal | undefined,
): Promise<DurableGrant> {
  const { backoffMinMs, backoffMaxMs, writerIntentMs } = ctx.options;
  // A monotonic clock: a wall-clock step must not end a wait early, and whole milliseconds would
  // end it up to one short.
  const startedAt = performance.now();
  const deadline = startedAt + waitMs;
  const intentMs = t.mode === 'write' && waitMs > 0 ? writerIntentMs : 0;
  if (signal?.aborted) throw new LockAbortedError(signal.reason);
  if (waitMs === 0) {
    const grant = await tryOnce(ctx, t);
    if (grant) return unlessAborted(grant, signal);
    throw new LockTimeoutError(t.resourceId, t.mode, waitMs);
  }
  const ticket = ctx.queues.join(t.resource.toString('hex'), t.mode);
  let granted: LockMode | null = null;
  let reached = false;
  let unreachable = 0;
  let lastUnreachable: DatabaseUnreachableError | undefined;
  try {
    if (!ticket.isHead) {
      if (!(await ticket.untilHead(deadline, signal))) throw new LockTimeoutError(t.resourceId, t.mode, waitMs);
      const behind = ticket.takeBehindWriter();
      if (behind !== null) {
        // The previous head was just granted a conflicting lock: wait for its release (a local
        // release wakes us at once), polling in case it is released elsewhere.
        await ticket.pause(Math.min(Math.max(0, deadline - performance.now()), backoffMaxMs), signal, behind);
      }
    }
    for (let n = 0; ; n++) {
      if (signal?.aborted) throw new LockAbortedError(signal.reason);
      const seen = ticket.epoch;
      let grant: DurableGrant | null;
      try {
        grant = await attempt(ctx, t, intentMs, {
          deadline,
          signal,
          timeout: (why, on) => new LockTimeoutError(t.resourceId, t.mode, waitMs, on, why),
        });
        reached = true;
        unreachable = 0;
      } catch (err) {
        const remaining = deadline - performance.now();
        // A wait for a connection cut by the deadline after the server refused: the refusal is the reason.
        if (err instanceof LockTimeoutError && err.waitedFor === 'server' && lastUnreachable)
          throw new LockTimeoutError(t.resourceId, t.mode, waitMs, 'server', lastUnreachable);
        if (err instanceof DatabaseUnreachableError) {
          lastUnreachable = err;
          // Nothing was sent: try again after a pause that grows (never hammering a server that is
          // down), up to the deadline.
          // The wait ran out: a timeout whatever it waited for, the server's state in `cause`.
          if (remaining <= 0)
            throw new LockTimeoutError(t.resourceId, t.mode, waitMs, reached ? 'lock' : 'server', err);
          await ticket.pause(Math.min(remaining, unreachablePauseMs(unreachable++)), signal, ticket.epoch);
          // The pause used the wait up: no attempt whose connection would be asked for after its end.
          if (await waitedOut(deadline))
            throw new LockTimeoutError(t.resourceId, t.mode, waitMs, reached ? 'lock' : 'server', err);
          continue;
        }
        // Every try of this attempt was rolled back by a conflict (a hot resource row written on
        // several members of a multi-primary cluster at once): nothing was granted. The caller
        // asked to wait: try again, up to the deadline. At once, backoff restarted: the tries
        // already paused between them, and a conflict says the row is moving, not that it is held.
        if (!(err instanceof TransactionConflictError)) throw err;
        if (remaining <= 0) throw new LockTimeoutError(t.resourceId, t.mode, waitMs);
        n = -1;
        continue;
      }
      if (grant) {
        granted = signal?.aborted ? null : t.mode;
        return await unlessAborted(grant, signal);
      }
      const remaining = deadline - performance.now();
      if (remaining <= 0) throw new LockTimeoutError(t.resourceId, t.mode, waitMs);
      // A release in this process during the failed attempt: try again at once, backoff restarted.
      if (ticket.epoch !== seen) {
        n = -1;
        continue;
      }
      await ticket.pause(
        Math.min(remaining, backoffDelay(n, backoffMinMs, backoffMaxMs, performance.now() - startedAt)),
        signal,
        seen,
      );
    }
  } finally {
    ticket.leave(granted);
  }
}

async function unlessAborted(grant: DurableGrant, signal: AbortSignal | undefined): Promise<DurableGrant> {
  if (signal?.aborted) {
    await grant.release();
    throw new LockAbortedError(signal.reason);
  }
  return grant;
}

/** One acquire attempt, through the procedure or as plain statements (see `ProceduresMode`). */
async function acquireOnce(
  ctx: LockContext,
  conn: RawConnection,
  t: Target,
  token: Buffer,
  intentMs: number,
): Promise<AcquireReply> {
  if (!ctx.acquirePath.statements) {
    try {
      if (t.permit) return await callAcquirePermit(conn, t.resource, t.permit, ctx.ownerBytes, token);
      return await callAcquire(conn, t.resource, t.mode, ctx.ownerBytes, token, intentMs);
    } catch (err) {
      // A CALL of a missing procedure fails before running anything: nothing to undo.
      if (
        ctx.options.procedures !== 'auto' ||
        !(err instanceof SchemaMissingError) ||
        errnoOf(err.cause) !== ER_SP_DOES_NOT_EXIST
      )
        throw err;
      ctx.acquirePath.statements = true;
    }
  }
  if (t.permit) return acquirePermitWithStatements(conn, t.resource, t.permit, ctx.ownerBytes, token);
  return acquireWithStatements(conn, t.resource, t.mode, ctx.ownerBytes, token, intentMs);
}

/**
 * A refused attempt that met the other kind, or another limit: a typed error (nothing was written),
 * thrown once the resource's stale grants were healed and it was still refused (see `attempt`).
 */
function refusal(t: Target, reply: AcquireReply): Error | null {
  if (reply.id !== null || reply.conflict === undefined) return null;
  if (reply.conflict.kind === 'limit')
    return new PermitLimitError(t.resourceId, t.permit?.limit ?? 0, reply.conflict.heldLimit);
  return new ResourceKindError(t.resourceId, t.mode === 'permit' ? 'permit' : 'read-write');
}

/** An attempt that met a row lock it could not have in time (`refusedOnLockWait`): refused, as if held. */
const REFUSED: AcquireReply = { id: null, busy: false };

/**
 * The pauses before a reader's re-attempts of an attempt stopped at the gate (`busy`): the gate is
 * held exclusively by a writing section for its whole work, or by a writer's acquire for its own
 * transaction, a fraction of a millisecond, which may be refused (readers hold) and then leave the
 * reader free to share. So a reader tries again a few times within about 31 ms in all (each pause
 * is random between half and all of its value) before the attempt counts as refused: a try answers
 * null, a waiting acquire goes on with its backoff. A writer stopped at the gate does not: whoever
 * holds it (a section, a reader being granted, a writer) leaves the resource held.
 */
export const COLLISION_PAUSES_MS: readonly number[] = [1, 2, 4, 8, 16];

/**
 * One acquire, retried after a conflict, and (a reader) re-attempted within `COLLISION_PAUSES_MS`
 * while the gate is busy. An attempt whose reply was lost is withdrawn (see `withdrawAcquire`): that
 * tells whether it was granted without needing to see the server thread that ran it, and if it was
 * not, it never will be, so a new attempt is safe. `wait` bounds the wait for a pool connection.
 */
export async function attempt(
  ctx: LockContext,
  t: Target,
  intentMs: number,
  wait: Pick<ConnectionWait, 'deadline' | 'signal' | 'timeout'> = {},
): Promise<DurableGrant | null> {
  const connectionWait = { what: `${t.mode} acquire of ${JSON.stringify(t.resourceId)}`, ...wait };
  await checkSchemaVersion(ctx.knex, connectionWait);
  await ensureReleasable(ctx, connectionWait);
  let token = newToken();
  let healed = false;
  const grant = await withRetries(
    ctx.policy,
    `${t.mode} acquire`,
    async () => {
      for (let i = 0; ; i++) {
        token = newToken();
        const reply = await withConnection(
          ctx.knex,
          (conn) => refusedOnLockWait(conn, () => acquireOnce(ctx, conn, t, token, intentMs), REFUSED),
          connectionWait,
        );
        const refused = refusal(t, reply);
        if (refused) {
          // The other kind or limit may be held only by stale grants (a crashed holder of the old
          // limit, a dead reader): healed first, then decided again. The refusal stands only while
          // a holder that is not stale disagrees (the heal released nothing).
          if (healed || !(await healStale(ctx, t.resource, connectionWait))) throw refused;
          healed = true;
          i = -1;
          continue;
        }
        if (reply.id !== null)
          return DurableGrant.create(ctx, reply.id, t.resourceId, t.resource, t.mode, token, t.permit?.count);
        // Readers and permits share: a collision with another acquire's short transaction is tried again.
        if (reply.busy && t.mode !== 'write' && i < COLLISION_PAUSES_MS.length) {
          await sleep(COLLISION_PAUSES_MS[i]! * (0.5 + Math.random() / 2));
          continue;
        }
        // Refused: a resource held only by stale grants (a crashed holder's) frees itself here,
        // and one more attempt of this call may then be granted.
        if (healed || !(await healStale(ctx, t.resource, connectionWait))) return null;
        healed = true;
        i = -1;
      }
    },
    async (err) => {
      const lostToken = token;
      const reply = await askDatabase(ctx.knex, ctx.policy.resolveTimeoutMs, async (conn) => {
        try {
          await withdrawAcquire(conn, t.resource, t.mode, lostToken);
          return null;
        } catch (e) {
          if (errnoOf(e) === ER_DUP_ENTRY) return findGrantByToken(conn, lostToken);
          throw e;
        }
      });
      if (reply === undefined) throw new LockOutcomeUnknownError('acquire', lostToken.toString('hex'), null, err);
      const row = reply.answer;
      // Withdrawn (now, or by an earlier probe whose reply was lost too): never granted.
      if (row === null || row.releasedBy === RELEASED_BY.withdrawn) return 'retry';
      const grant = DurableGrant.create(ctx, row.id, t.resourceId, t.resource, t.mode, lostToken, t.permit?.count);
      if (row.status === STATUS.released) {
        grant.committed(); // granted, and released since (reaped): nothing is held
        return { value: null };
      }
      return { value: grant };
    },
  );
  // A grant id a JS number cannot hold is refused here, its grant released (DurableGrant.admit).
  return grant === null ? null : grant.admit();
}
