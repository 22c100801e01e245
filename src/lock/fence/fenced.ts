import type { Knex } from 'knex';
import { acquirePooled, isConnectionLost, type PoolClient } from '../../sql/connection.js';
import type { LockContext } from '../context/lock-context.js';
import {
  ConnectionLostError,
  DatabaseUnreachableError,
  LockInvariantError,
  LockLostError,
  LockOutcomeUnknownError,
  TransactionConflictError,
} from '../../errors.js';
import type { FenceExecutor, GrantedWork, LockedWork } from '../../contract/api.js';
import type { DurableGrant } from '../durable/grant.js';
import type { IsolationLevel } from '../../options.js';
import { withRetries } from '../../sql/retry.js';
import { isNeverSent } from '../../sql/unreachable.js';
import { fromKnex } from './fence-executor.js';
import { commitExecutor, fencesInCommit, replaceCommit } from './fence-in-commit.js';

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
  /** @internal */
  settleLostCommit(): Promise<'committed' | 'rolled-back' | 'lost' | undefined>;
  committed(): void;
  lost(): LockLostError | null;
  modes(): string;
}

/** One grant as a FencedHold. */
function singleHold(grant: DurableGrant): FencedHold {
  return {
    id: grant.id,
    token: grant.token,
    fence: (execute) => grant.fence(execute),
    isLive: () => grant.isLive(),
    settleLostCommit: () => grant.settleLostCommit(),
    committed: () => grant.committed(),
    lost: () => (grant.lost ? new LockLostError(grant.id) : null),
    modes: () => grant.mode,
  };
}

/** One attempt at a business transaction fenced by a hold, as {@link settleFenced} runs it. */
interface FencedAttempt<T> {
  /** Runs the transaction; resolves once it ended. */
  run(): Promise<T>;
  /** Whether this attempt's fence succeeded: from then on its transaction may have committed. */
  fenced(): boolean;
  /**
   * The transaction rejected after its fence, yet the grant rows say their holder released them:
   * the commit happened (a COMMIT whose reply was lost or that replied an error). What the call
   * returns then, or throws.
   */
  committedAfterAll(caught: unknown): T;
}

/**
 * The one settling path for a business transaction fenced by `hold`, under the library's retry
 * policy: a conflict rolled it back whole and it runs again under the same grants, if they are
 * still live; a transaction that failed after its fence (a COMMIT whose reply was lost, or that
 * replied an error) is settled from the grant rows; anything else is rethrown as it is.
 */
async function settleFenced<T>(ctx: LockContext, hold: FencedHold, next: () => FencedAttempt<T>): Promise<T> {
  let current: FencedAttempt<T> | undefined;
  let modeAtStart = hold.modes();
  let confirmedLive = false;
  return withRetries(
    ctx.policy,
    'the business transaction',
    async () => {
      current = next();
      confirmedLive = false;
      modeAtStart = hold.modes();
      try {
        return await current.run();
      } catch (caught) {
        // A lost reply goes to the settling below; an error the COMMIT itself replied is settled here.
        if (!current.fenced() || isConnectionLost(caught)) throw caught;
        // It normally rolled back, but a cluster may apply a commit it replied an error for (see isLive).
        const live = await hold.isLive().catch((err: unknown) => {
          throw err instanceof LockOutcomeUnknownError
            ? new LockOutcomeUnknownError('business commit', hold.token, hold.id, caught)
            : err;
        });
        if (!live) {
          const lost = hold.lost();
          if (lost) throw lost;
          return current.committedAfterAll(caught);
        }
        // Rolled back: a conflict runs again, anything else reaches the caller (the grant is released).
        confirmedLive = true;
        throw caught;
      }
    },
    async (err) => {
      // Died before its fence succeeded: the server rolls the transaction back; the grants are still ours.
      if (current?.fenced() !== true) throw new ConnectionLostError('the business transaction', err);
      const outcome = await hold.settleLostCommit();
      if (outcome === undefined) throw new LockOutcomeUnknownError('business commit', hold.token, hold.id, err);
      if (outcome === 'committed') return { value: current.committedAfterAll(err) };
      if (outcome === 'lost') throw hold.lost() ?? new LockLostError(hold.id);
      throw new ConnectionLostError('the business transaction', err);
    },
    async (conflict, attempts) => {
      // A conflict rolled the work back: run it again only while the grants are live. A paused holder
      // whose grant was reaped learns so now, instead of redoing work that cannot commit.
      if (!confirmedLive) {
        // Nothing committed; a database that cannot say whether the grant is live is unreachable.
        const live = await hold.isLive().catch((err: unknown) => {
          throw err instanceof LockOutcomeUnknownError
            ? new ConnectionLostError('the business transaction', conflict)
            : err;
        });
        if (!live) throw hold.lost() ?? new LockLostError(hold.id);
      }
      // A downgrade or upgrade commits at once, not with the work: a rerun would start under a grant
      // of the other mode (a withWriteLock callback writing under a read grant), so there is none.
      if (hold.modes() !== modeAtStart)
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
 * writes and the release commit together or not at all; inside it, the grant's resource is held
 * in the current async context (a nested call on it joins). Where the manager calls procedures,
 * the fence and the COMMIT go as one call (see runFencedHold).
 */
export function runFenced<T>(
  ctx: LockContext,
  grant: DurableGrant,
  work: LockedWork<T>,
  isolationLevel: IsolationLevel | undefined,
): Promise<T> {
  return runFencedHold(
    ctx,
    singleHold(grant),
    (trx) => ctx.scopes.run([[grant.ref.resource.toString('hex'), { grant, trx }]], () => work(trx, grant)),
    isolationLevel,
    grant,
  );
}

/**
 * Runs `run` in a knex transaction whose last statement is the hold's fence, so the business
 * writes and the release commit together or not at all, settled by {@link settleFenced}. Any
 * rejection of `run`, whatever its value, rolls back and is rethrown as it is.
 *
 * Under one grant (`single`) that hands nothing over, and where the manager calls procedures, the
 * fence goes in the place of knex's COMMIT as `rwlock_fence_commit` (migration 015): one round
 * trip for both, on a pool connection the transaction is given. A fence that finds the grant no
 * longer live has rolled the transaction back by then: it is answered as a fence sent before the
 * COMMIT is (LockLostError, nothing committed).
 */
export function runFencedHold<T>(
  ctx: LockContext,
  hold: FencedHold,
  run: (trx: Knex.Transaction) => Promise<T>,
  isolationLevel: IsolationLevel | undefined,
  single?: DurableGrant,
): Promise<T> {
  return settleFenced(ctx, hold, () => {
    let commitSent = false;
    /** The fence in the COMMIT's place refused it: the transaction was rolled back. */
    let refused = false;
    let value: T | undefined;
    return {
      fenced: () => commitSent && !refused,
      committedAfterAll: () => value as T,
      async run() {
        const inCommit = single !== undefined && !single.handsOver && fencesInCommit(ctx);
        let failure: { error: unknown } | undefined;
        const body = async (trx: Knex.Transaction): Promise<void> => {
          try {
            value = await run(trx);
          } catch (error) {
            failure = { error };
            // knex resolves a transaction whose callback threw undefined: always throw an Error to it.
            throw error instanceof Error ? error : new Error('business work rejected');
          }
          if (inCommit) return;
          await hold.fence(fromKnex(trx));
          commitSent = true;
        };
        const options = isolationLevel ? { isolationLevel } : {};
        try {
          if (!inCommit) await ctx.knex.transaction(body, options);
          else {
            const client = ctx.knex.client as unknown as PoolClient;
            const conn = await acquirePooled(client, { what: 'the business transaction' });
            const remove = replaceCommit(conn, async (send) => {
              commitSent = true;
              try {
                await single.fence(commitExecutor(ctx, send));
              } catch (err) {
                // The call answered: the grant was not live (or the counts disagree), and it rolled back.
                if (err instanceof LockLostError || err instanceof LockInvariantError) refused = true;
                throw err;
              }
            });
            try {
              await ctx.knex.transaction(body, { ...options, connection: conn });
            } finally {
              remove();
              await client.releaseConnection(conn);
            }
          }
        } catch (caught) {
          // The work's own rejection says what happened: when the connection died under it, knex's
          // failed ROLLBACK would replace it.
          if (failure) throw failure.error;
          // The transaction could not start for want of a connection: nothing ran.
          if (!commitSent && isNeverSent(caught))
            throw new DatabaseUnreachableError('the business transaction', caught);
          throw caught;
        }
        hold.committed();
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
export function runGranted<T>(ctx: LockContext, grant: DurableGrant, work: GrantedWork<T>): Promise<T | undefined> {
  return settleFenced<T | undefined>(ctx, singleHold(grant), () => {
    const fencesBefore = grant.fences;
    const fenced = (): boolean => grant.fences > fencesBefore;
    return {
      fenced,
      committedAfterAll(caught) {
        if (isConnectionLost(caught)) return undefined;
        throw caught;
      },
      async run() {
        const value = await ctx.scopes.run([[grant.ref.resource.toString('hex'), { grant, trx: undefined }]], () =>
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
