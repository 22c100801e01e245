import { driverErrorOf } from './connection.js';
import { FENCE_REFUSED } from './routines-fence.js';
import { RELEASED_ROWS } from './release.js';

/**
 * The fence and the business COMMIT as one call (`rwlock_fence_commit`, migration 015), with
 * RELEASE_SQL's parameters (`releaseParams`): the business transaction is committed when the fence
 * released the grant, and rolled back otherwise.
 */
export const FENCE_COMMIT_CALL = 'CALL rwlock_fence_commit(?, ?, ?, ?, ?, ?, ?)';

/** ER_SIGNAL_EXCEPTION: what a routine's SIGNAL SQLSTATE '45000' is answered with. */
const ER_SIGNAL_EXCEPTION = 1644;

/**
 * Sends the call (`send`) and answers the rows its fence changed, as an executor does: RELEASED_ROWS
 * when it replied as a COMMIT does (committed); the count its refusal names (rolled back). Any other
 * error is thrown as it is.
 */
export async function fenceAndCommit(send: () => Promise<unknown>): Promise<number> {
  try {
    await send();
    return RELEASED_ROWS;
  } catch (err) {
    const e = driverErrorOf(err);
    const message = e?.errno === ER_SIGNAL_EXCEPTION ? (e as { sqlMessage?: string }).sqlMessage : undefined;
    if (message?.startsWith(`${FENCE_REFUSED} `) === true) return Number(message.slice(FENCE_REFUSED.length + 1));
    throw err;
  }
}
