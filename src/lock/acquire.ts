import { errnoOf, ER_DUP_ENTRY, ER_SP_DOES_NOT_EXIST, withConnection, type RawConnection } from '../sql/connection.js';
import type { LockContext } from './context.js';
import {
  DatabaseUnreachableError,
  LockAbortedError,
  LockOutcomeUnknownError,
  LockTimeoutError,
  SchemaMissingError,
  TransactionConflictError,
} from '../errors.js';
import { HeldGrant } from './grant.js';
import { askDatabase, withRetries } from '../sql/retry.js';
import { acquireWithStatements, callAcquire } from '../sql/acquire.js';
import { findGrantByToken } from '../sql/lookup.js';
import { withdrawAcquire } from '../sql/withdraw.js';
import { isNeverSent } from '../sql/unreachable.js';
import { newToken } from './token.js';
import { RELEASED_BY, STATUS, type LockMode } from '../types.js';
import { backoffDelay } from './wait.js';
import { checkSchemaVersion } from '../sql/schema-version.js';
import { ensureReleasable } from './privilege-probe.js';

/** A resource to lock: the id as given, and its bytes as stored. */
export interface Target {
  mode: LockMode;
  resourceId: string;
  resource: Buffer;
}

/**
 * Waits for a lock: the Grant, or LockTimeoutError after `waitMs`, or LockAbortedError. Waiters
 * of this manager queue per resource (FIFO): only the head polls, and a holder that releases and
 * re-acquires in a loop cannot barge past them. Between processes the database decides.
 */
export async function acquire(
  ctx: LockContext,
  t: Target,
  waitMs: number,
  signal: AbortSignal | undefined,
): Promise<HeldGrant> {
  const { backoffMinMs, backoffMaxMs, writerIntentMs } = ctx.options;
  // A monotonic clock: a wall-clock step must not end a wait early, and whole milliseconds would
  // end it up to one short.
  const startedAt = performance.now();
  const deadline = startedAt + waitMs;
  const intentMs = t.mode === 'write' && waitMs > 0 ? writerIntentMs : 0;
  if (signal?.aborted) throw new LockAbortedError(signal.reason);
  if (waitMs === 0) {
    const grant = await attempt(ctx, t, intentMs);
    if (grant) return unlessAborted(grant, signal);
    throw new LockTimeoutError(t.resourceId, t.mode, waitMs);
  }
  const ticket = ctx.queues.join(t.resource.toString('hex'), t.mode);
  let granted: LockMode | null = null;
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
      let grant: HeldGrant | null;
      try {
        grant = await attempt(ctx, t, intentMs);
      } catch (err) {
        // Every try of this attempt was rolled back by a conflict (a hot resource row written on
        // several members of a multi-primary cluster at once): nothing was granted. The caller
        // asked to wait: try again, up to the deadline. At once, backoff restarted: the tries
        // already paused between them, and a conflict says the row is moving, not that it is held.
        if (!(err instanceof TransactionConflictError) || deadline - performance.now() <= 0) throw err;
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

async function unlessAborted(grant: HeldGrant, signal: AbortSignal | undefined): Promise<HeldGrant> {
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
): Promise<number | null> {
  if (!ctx.acquirePath.statements) {
    try {
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
  return acquireWithStatements(conn, t.resource, t.mode, ctx.ownerBytes, token, intentMs);
}

/**
 * One acquire, retried after a conflict. An attempt whose reply was lost is
 * withdrawn (see `withdrawAcquire`): that tells whether it was granted without needing to see the
 * server thread that ran it, and if it was not, it never will be, so a new attempt is safe.
 */
export async function attempt(ctx: LockContext, t: Target, intentMs: number): Promise<HeldGrant | null> {
  await checkSchemaVersion(ctx.knex);
  await ensureReleasable(ctx);
  let token = newToken();
  const grant = await withRetries(
    ctx.policy,
    `${t.mode} acquire`,
    async () => {
      token = newToken();
      const id = await withConnection(ctx.knex, (conn) => acquireOnce(ctx, conn, t, token, intentMs)).catch(
        (err: unknown) => {
          // Never sent: nothing was granted.
          throw isNeverSent(err) ? new DatabaseUnreachableError(`${t.mode} acquire`, null, err) : err;
        },
      );
      return id === null ? null : HeldGrant.create(ctx, id, t.resourceId, t.resource, t.mode, token);
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
      const grant = HeldGrant.create(ctx, row.id, t.resourceId, t.resource, t.mode, lostToken);
      if (row.status === STATUS.released) {
        grant.committed(); // granted, and released since (reaped): nothing is held
        return { value: null };
      }
      return { value: grant };
    },
  );
  // A grant id a JS number cannot hold is refused here, its grant released (HeldGrant.admit).
  return grant === null ? null : grant.admit();
}
