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
 * What a fenced transaction runs under: one grant, or a group of grants whose fence is one
 * statement. `isLive` is true while every grant is live; `lost` is the LockLostError of a grant
 * found released by someone else, null when none was; `modes` changes when a grant changes mode;
 * `id` and `token` are the grant a LockOutcomeUnknownError names.
 */
export interface FencedHold {
  readonly id: number;
  readonly token: string;
  fence(execute: FenceExecutor): Promise<void>;
  isLive(): Promise<boolean>;
  settleLostCommit(): Promise<'committed' | 'rolled-back' | 'lost' | undefined>;
  committed(): void;
  lost(): LockLostError | null;
  modes(): string;
}

/** One grant as a FencedHold. */
function singleHold(grant: HeldGrant): FencedHold {
  return {
    id: grant.id,
    token: grant.token,
    fence: (execute) => grant.fence(execute),
    isLive: () => grant.isLive(),
    settleLostCommit: () => grant.settleLostCommit(),
    committed: () => grant.committed(),
    lost: () => (grant.signal.aborted ? new LockLostError(grant.id) : null),
    modes: () => grant.mode,
  };
}

/**
 * Runs `work` in a knex transaction whose last statement is the grant's fence, so the business
 * writes and the release commit together or not at all; inside it, the grant's resource is held
 * in the current async context (a nested call on it joins). See runFencedHold.
 */
export function runFenced<T>(
  ctx: LockContext,
  grant: HeldGrant,
  work: LockedWork<T>,
  isolationLevel: IsolationLevel | undefined,
): Promise<T> {
  return runFencedHold(
    ctx,
    singleHold(grant),
    (trx) => ctx.scopes.run([[grant.ref.resource.toString('hex'), { grant, trx }]], () => work(trx, grant)),
    isolationLevel,
  );
}

/**
 * Runs `run` in a knex transaction whose last statement is the hold's fence, so the business
 * writes and the release commit together or not at all. Under the library's retry policy: a
 * conflict rolls it back whole and it runs again under the same grants, if they are still live; a
 * COMMIT whose reply was lost, or that replied an error, is settled from the grant rows. Any
 * rejection of `run`, whatever its value, rolls back and is rethrown as it is.
 */
export async function runFencedHold<T>(
  ctx: LockContext,
  grant: FencedHold,
  run: (trx: Knex.Transaction) => Promise<T>,
  isolationLevel: IsolationLevel | undefined,
): Promise<T> {
  let commitSent = false;
  let value: T | undefined;
  let modeAtStart = grant.modes();
  let confirmedLive = false;
  return withRetries(
    ctx.policy,
    'the business transaction',
    async () => {
      commitSent = false;
      confirmedLive = false;
      value = undefined;
      modeAtStart = grant.modes();
      let failure: { error: unknown } | undefined;
      try {
        await ctx.knex.transaction(
          async (trx) => {
            try {
              value = await run(trx);
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
          const lost = grant.lost();
          if (lost) throw lost;
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
      if (outcome === 'lost') throw grant.lost() ?? new LockLostError(grant.id);
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
        if (!live) throw grant.lost() ?? new LockLostError(grant.id);
      }
      // A downgrade or upgrade commits at once, not with the work: a rerun would start under a grant
      // of the other mode (a withWriteLock callback writing under a read grant), so there is none.
      if (grant.modes() !== modeAtStart)
        throw new TransactionConflictError(
          'the business transaction (not run again: its grant changed mode during it)',
          attempts,
          conflict,
        );
    },
  );
}
