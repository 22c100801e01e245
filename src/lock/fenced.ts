import type { Knex } from 'knex';
import { isConnectionLost } from '../sql/connection.js';
import type { LockContext } from './context.js';
import { ConnectionLostError, LockLostError, LockOutcomeUnknownError, TransactionConflictError } from '../errors.js';
import type { FenceExecutor, LockedWork } from './api.js';
import type { HeldGrant } from './grant.js';
import type { IsolationLevel } from '../options.js';
import { withRetries } from '../sql/retry.js';

/** The fence's executor for a knex transaction. */
export function knexExecutor(trx: Knex.Transaction): FenceExecutor {
  return async (sql, params) => {
    const [result] = (await trx.raw(sql, params)) as unknown as [{ affectedRows: number }];
    return result.affectedRows;
  };
}

/**
 * Runs `work` in a knex transaction whose last statement is the grant's fence, so the business
 * writes and the release commit together or not at all. Under the library's retry policy: a
 * conflict rolls it back whole and it runs again under the same grant, if that is still live; a
 * COMMIT whose reply was lost, or that replied an error, is settled from the grant row. Any
 * rejection of `work`, whatever its value, rolls back and is rethrown as it is.
 */
export async function runFenced<T>(
  ctx: LockContext,
  grant: HeldGrant,
  work: LockedWork<T>,
  isolationLevel: IsolationLevel | undefined,
): Promise<T> {
  let commitSent = false;
  let value: T | undefined;
  let modeAtStart = grant.mode;
  let confirmedLive = false;
  return withRetries(
    ctx.policy,
    'the business transaction',
    async () => {
      commitSent = false;
      confirmedLive = false;
      value = undefined;
      modeAtStart = grant.mode;
      let failure: { error: unknown } | undefined;
      try {
        await ctx.knex.transaction(
          async (trx) => {
            try {
              value = await ctx.scopes.run(grant.ref.resource.toString('hex'), { grant, trx }, () => work(trx, grant));
            } catch (error) {
              failure = { error };
              // knex resolves a transaction whose callback threw undefined: always throw an Error to it.
              throw error instanceof Error ? error : new Error('business work rejected');
            }
            await grant.fence(knexExecutor(trx));
            commitSent = true;
          },
          isolationLevel ? { isolationLevel } : undefined,
        );
      } catch (caught) {
        // The work's own rejection says what happened: when the connection died under it, knex's
        // failed ROLLBACK would replace it.
        if (failure) throw failure.error;
        // A lost reply goes to the settling below; an error the COMMIT itself replied is settled here.
        if (!commitSent || isConnectionLost(caught)) throw caught;
        // It normally rolled back, but a cluster may apply a commit it replied an error for (see isLive).
        const live = await grant.isLive().catch((err: unknown) => {
          throw err instanceof LockOutcomeUnknownError
            ? new LockOutcomeUnknownError('business commit', grant.token, grant.id, caught)
            : err;
        });
        if (!live) {
          if (grant.signal.aborted) throw new LockLostError(grant.id);
          return value as T;
        }
        // Rolled back: a conflict runs again, anything else reaches the caller (the grant is released).
        confirmedLive = true;
        throw caught;
      }
      grant.committed();
      return value as T;
    },
    async (err) => {
      // Died before COMMIT was sent: the server rolls the transaction back; the grant is still ours.
      if (!commitSent) throw new ConnectionLostError('the business transaction', err);
      const outcome = await grant.settleLostCommit();
      if (outcome === undefined) throw new LockOutcomeUnknownError('business commit', grant.token, grant.id, err);
      if (outcome === 'committed') return { value: value as T };
      if (outcome === 'lost') throw new LockLostError(grant.id);
      throw new ConnectionLostError('the business transaction', err);
    },
    async (conflict, attempts) => {
      // A conflict rolled the work back: run it again only while the grant is live. A paused holder
      // whose grant was reaped learns so now, instead of redoing work that cannot commit.
      if (!confirmedLive) {
        // Nothing committed; a database that cannot say whether the grant is live is unreachable.
        const live = await grant.isLive().catch((err: unknown) => {
          throw err instanceof LockOutcomeUnknownError
            ? new ConnectionLostError('the business transaction', conflict)
            : err;
        });
        if (!live) throw new LockLostError(grant.id);
      }
      // A downgrade or upgrade commits at once, not with the work: a rerun would start under a grant
      // of the other mode (a withWriteLock callback writing under a read grant), so there is none.
      if (grant.mode !== modeAtStart)
        throw new TransactionConflictError(
          'the business transaction (not run again: its grant changed mode during it)',
          attempts,
          conflict,
        );
    },
  );
}
