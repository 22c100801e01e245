import type { FenceExecutor } from '../../contract/api.js';
import type { LockContext } from '../context/lock-context.js';
import { LockInvariantError } from '../../errors.js';
import { errnoOf, ER_SP_DOES_NOT_EXIST, type DriverError, type RawConnection } from '../../sql/connection.js';
import { FENCE_COMMIT_CALL, fenceAndCommit } from '../../sql/fence-commit.js';
import { RELEASE_SQL, RELEASED_ROWS } from '../../sql/release.js';
import { affectedRows } from './fence-executor.js';

/** A statement sent on the transaction's connection, in the place of knex's COMMIT. */
export type Send = (sql: string, values: ReadonlyArray<number | string>) => Promise<unknown>;

/**
 * Whether a fenced knex transaction under one grant may send its fence and its COMMIT as one call
 * (`rwlock_fence_commit`, migration 015): where the manager calls procedures, and until a call
 * found the procedure missing.
 */
export function fencesInCommit(ctx: LockContext): boolean {
  return ctx.options.procedures !== false && !ctx.acquirePath.statements && !ctx.fences.apart;
}

/**
 * The fence's executor for the COMMIT's place: the release statement goes as `rwlock_fence_commit`,
 * which commits the transaction when it released the grant and rolls it back otherwise, and it
 * answers the rows the release changed, as an executor does. So the grant's own fence decides on
 * the answer (released, lost, or an invariant broken) and is traced as any fence. On a database
 * without the procedure (1305: nothing ran), the release and the COMMIT go apart, and so does every
 * later fence of this manager.
 */
export function commitExecutor(ctx: LockContext, send: Send): FenceExecutor {
  return async (sql, params) => {
    if (sql !== RELEASE_SQL) throw new LockInvariantError('a fence in the COMMIT runs the release statement only');
    try {
      return await fenceAndCommit(() => send(FENCE_COMMIT_CALL, params));
    } catch (err) {
      if (errnoOf(err) !== ER_SP_DOES_NOT_EXIST) throw err;
      ctx.fences.apart = true;
      const changed = affectedRows(await send(sql, params));
      if (changed === RELEASED_ROWS) await send('COMMIT', []);
      return changed;
    }
  };
}

/**
 * knex ends a transaction with `COMMIT;`, a statement of its own on the transaction's connection.
 * Installed on that connection, this sends what `commit` sends in its place, in the same round
 * trip, and tells knex the COMMIT succeeded when `commit` resolves, or failed with its error. A
 * failed `commit` is followed by a ROLLBACK (nothing when the call already rolled back, or the
 * connection is gone), so the connection never goes back to the pool inside the transaction.
 * Every other statement passes through unchanged. Returns the removal, back to the connection's
 * own query().
 */
export function replaceCommit(conn: RawConnection, commit: (send: Send) => Promise<void>): () => void {
  const target = conn as unknown as { query: (...args: unknown[]) => unknown };
  // An instrumentation may have set the connection's own query(): put it back, not the prototype's.
  const original = target.query;
  const own = Object.prototype.hasOwnProperty.call(target, 'query');
  let armed = true;
  target.query = (opts: unknown, ...rest: unknown[]): unknown => {
    const callback = rest[rest.length - 1];
    const sql = typeof opts === 'object' && opts !== null ? (opts as { sql?: unknown }).sql : undefined;
    if (!armed || typeof callback !== 'function' || sql !== 'COMMIT;') return original.call(conn, opts, ...rest);
    armed = false;
    const done = callback as (e: unknown, ...o: unknown[]) => void;
    const send: Send = (text, values) =>
      new Promise((resolve, reject) => {
        original.call(conn, { ...(opts as object), sql: text }, values, (err: DriverError | null, out: unknown) =>
          err ? reject(err) : resolve(out),
        );
      });
    commit(send).then(
      () => done(null, [], undefined),
      (err: unknown) => {
        void send('ROLLBACK', [])
          .catch(() => undefined)
          .then(() => done(err));
      },
    );
    return undefined;
  };
  return () => {
    if (own) target.query = original;
    else delete (target as { query?: unknown }).query;
  };
}
