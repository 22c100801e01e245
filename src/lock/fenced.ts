import { isConnectionLost } from '../sql/connection.js';
import type { LockContext } from './context.js';
import { ConnectionLostError, LockLostError, LockOutcomeUnknownError, TransactionConflictError } from '../errors.js';
import type { GrantedWork, LockedWork } from './api.js';
import type { HeldGrant } from './grant.js';
import type { IsolationLevel } from '../options.js';
import { withRetries } from '../sql/retry.js';
import { fromKnex } from '../adapters/index.js';

/** One attempt at a business transaction fenced by a grant, as {@link settleFenced} runs it. */
interface FencedAttempt<T> {
  /** Runs the transaction; resolves once it ended. */
  run(): Promise<T>;
  /** Whether this attempt's fence succeeded: from then on its transaction may have committed. */
  fenced(): boolean;
  /**
   * The transaction rejected after its fence, yet the grant row says its holder released it: the
   * commit happened (a COMMIT whose reply was lost or that replied an error). What the call returns
   * then, or throws.
   */
  committedAfterAll(caught: unknown): T;
}

/**
 * The one settling path for a business transaction fenced by `grant`, under the library's retry
 * policy: a conflict rolled it back whole and it runs again under the same grant, if that is
 * still live; a transaction that failed after its fence (a COMMIT whose reply was lost, or that
 * replied an error) is settled from the grant row; anything else is rethrown as it is.
 */
async function settleFenced<T>(ctx: LockContext, grant: HeldGrant, next: () => FencedAttempt<T>): Promise<T> {
  let current: FencedAttempt<T> | undefined;
  let modeAtStart = grant.mode;
  let confirmedLive = false;
  return withRetries(
    ctx.policy,
    'the business transaction',
    async () => {
      current = next();
      confirmedLive = false;
      modeAtStart = grant.mode;
      try {
        return await current.run();
      } catch (caught) {
        // A lost reply goes to the settling below; an error the COMMIT itself replied is settled here.
        if (!current.fenced() || isConnectionLost(caught)) throw caught;
        // It normally rolled back, but a cluster may apply a commit it replied an error for (see isLive).
        const live = await grant.isLive().catch((err: unknown) => {
          throw err instanceof LockOutcomeUnknownError
            ? new LockOutcomeUnknownError('business commit', grant.token, grant.id, caught)
            : err;
        });
        if (!live) {
          if (grant.signal.aborted) throw new LockLostError(grant.id);
          return current.committedAfterAll(caught);
        }
        // Rolled back: a conflict runs again, anything else reaches the caller (the grant is released).
        confirmedLive = true;
        throw caught;
      }
    },
    async (err) => {
      // Died before its fence succeeded: the server rolls the transaction back; the grant is still ours.
      if (current?.fenced() !== true) throw new ConnectionLostError('the business transaction', err);
      const outcome = await grant.settleLostCommit();
      if (outcome === undefined) throw new LockOutcomeUnknownError('business commit', grant.token, grant.id, err);
      if (outcome === 'committed') return { value: current.committedAfterAll(err) };
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

/**
 * Runs `work` in a knex transaction whose last statement is the grant's fence, so the business
 * writes and the release commit together or not at all, settled by {@link settleFenced}. Any
 * rejection of `work`, whatever its value, rolls back and is rethrown as it is.
 */
export function runFenced<T>(
  ctx: LockContext,
  grant: HeldGrant,
  work: LockedWork<T>,
  isolationLevel: IsolationLevel | undefined,
): Promise<T> {
  return settleFenced(ctx, grant, () => {
    let commitSent = false;
    let value: T | undefined;
    return {
      fenced: () => commitSent,
      committedAfterAll: () => value as T,
      async run() {
        let failure: { error: unknown } | undefined;
        try {
          await ctx.knex.transaction(
            async (trx) => {
              try {
                value = await ctx.scopes.run(grant.ref.resource.toString('hex'), { grant, trx }, () =>
                  work(trx, grant),
                );
              } catch (error) {
                failure = { error };
                // knex resolves a transaction whose callback threw undefined: always throw an Error to it.
                throw error instanceof Error ? error : new Error('business work rejected');
              }
              await grant.fence(fromKnex(trx));
              commitSent = true;
            },
            isolationLevel ? { isolationLevel } : undefined,
          );
        } catch (caught) {
          // The work's own rejection says what happened: when the connection died under it, knex's
          // failed ROLLBACK would replace it.
          if (failure) throw failure.error;
          throw caught;
        }
        grant.committed();
        return value as T;
      },
    };
  });
}

/**
 * Runs `work`, which runs its own (any ORM's) transaction and makes `grant.fence(adapter)` its last
 * statement, settled by {@link settleFenced}. When `work` resolves after a fence, the grant row
 * tells whether that transaction committed (the grant released by its holder) or rolled back (still
 * live: the caller releases it). When `work` rejects after a fence and the row says the commit
 * happened, the work's rejection is rethrown (it came after the commit), except for a COMMIT whose
 * reply was lost, which resolves undefined: the work had no value to give.
 */
export function runGranted<T>(ctx: LockContext, grant: HeldGrant, work: GrantedWork<T>): Promise<T | undefined> {
  return settleFenced<T | undefined>(ctx, grant, () => {
    const fencesBefore = grant.fences;
    const fenced = (): boolean => grant.fences > fencesBefore;
    return {
      fenced,
      committedAfterAll(caught) {
        if (isConnectionLost(caught)) return undefined;
        throw caught;
      },
      async run() {
        const value = await ctx.scopes.run(grant.ref.resource.toString('hex'), { grant, trx: undefined }, () =>
          work(grant),
        );
        // Verified, not assumed: the transaction may have rolled back after its fence (then the grant
        // is live and the caller releases it). isLive() settles a grant its holder's commit released.
        if (fenced()) await grant.isLive();
        return value;
      },
    };
  });
}
