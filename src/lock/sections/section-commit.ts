import type { LockContext } from '../context/lock-context.js';
import { ConnectionLostError, LockOutcomeUnknownError } from '../../errors.js';
import { errnoOf, ER_DUP_ENTRY } from '../../sql/connection.js';
import { askDatabase } from '../../sql/retry.js';
import { withdrawAcquire } from '../../sql/withdraw.js';
import type { SectionTarget } from './section-types.js';

/**
 * A COMMIT whose reply was lost: a released row written under the section's token in its place
 * either fails on the duplicate (the section's row is there: it committed) or succeeds (it never
 * will: the section's insert of that token would fail).
 */
export async function settleSectionCommit<T>(
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
