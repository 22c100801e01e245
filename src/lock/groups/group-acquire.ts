import {
  errnoOf,
  ER_DUP_ENTRY,
  ER_SP_DOES_NOT_EXIST,
  withConnection,
  type ConnectionWait,
} from '../../sql/connection.js';
import type { LockContext } from '../context/lock-context.js';
import {
  DatabaseUnreachableError,
  LockInvariantError,
  LockOutcomeUnknownError,
  SchemaMissingError,
  TransactionConflictError,
} from '../../errors.js';
import { DurableGrant } from '../durable/grant.js';
import { askDatabase, withRetries, type Settled } from '../../sql/retry.js';
import { callAcquireGroup, type GroupAcquireTarget } from '../../sql/acquire-group.js';
import { refusedOnLockWait } from '../../sql/acquire.js';
import { findGrantByToken, type LoggedGrant } from '../../sql/lookup.js';
import { withdrawAcquire } from '../../sql/withdraw.js';
import { newToken } from '../durable/token.js';
import { RELEASED_BY, STATUS } from '../../types.js';
import { checkSchemaVersion } from '../../sql/schema-version.js';
import { ensureReleasable } from '../durable/privilege-probe.js';
import type { Target } from '../durable/durable-acquire.js';

/** A read or write target, as the one-call group acquire takes it. */
type RwTarget = Target & GroupAcquireTarget;

/**
 * Whether a durable group may try the one-call acquire first: two or more targets, none a permit,
 * the procedures in use and found, and no waiter of this manager queued for any of its resources
 * (the call would barge past them; the acquire per resource joins their queue).
 */
export function oneCallApplies(ctx: LockContext, targets: readonly Target[]): targets is readonly RwTarget[] {
  return (
    targets.length > 1 &&
    !ctx.acquirePath.statements &&
    ctx.acquirePath.perResourceGroups !== true &&
    targets.every((t) => t.mode !== 'permit' && !ctx.queues.has(t.resource.toString('hex')))
  );
}

/**
 * Every target (in resource byte order) in one acquire transaction, when every one is free: the
 * grants in the targets' order, built as `attempt` builds each. Null when the group was refused
 * (nothing of it was written), when every try conflicted, when no connection could be had, or when
 * the server has no such procedure (remembered: this manager's groups then acquire per resource):
 * the caller then acquires per resource, which waits, heals and marks a writer's intent. A lost
 * reply is settled by withdrawing the first token: one transaction wrote every grant row, so the
 * withdrawal decides for all of them.
 */
export async function acquireAtOnce(
  ctx: LockContext,
  targets: readonly RwTarget[],
  wait: { deadline: number; signal?: AbortSignal | undefined; timeout?: ConnectionWait['timeout'] },
): Promise<DurableGrant[] | null> {
  const connectionWait = { what: `group acquire of ${targets.length} resources`, ...wait };
  let tokens: Buffer[] = [];
  let grants: DurableGrant[] | null;
  try {
    await checkSchemaVersion(ctx.knex, connectionWait);
    await ensureReleasable(ctx, connectionWait);
    grants = await withRetries(
      ctx.policy,
      'group acquire',
      async () => {
        tokens = targets.map(() => newToken());
        const reply = await withConnection(
          ctx.knex,
          // A row lock not had in time: refused, the per-resource acquire then waits as it does.
          (conn) =>
            refusedOnLockWait(conn, () => callAcquireGroup(conn, targets, ctx.ownerBytes, tokens), {
              granted: false as const,
              at: 0,
              why: 'held' as const,
            }),
          connectionWait,
        );
        return reply.granted ? reply.ids.map((id, i) => grantOf(ctx, targets[i]!, id, tokens[i]!)) : null;
      },
      (err) => settleLostGroup(ctx, targets, tokens, err),
    );
  } catch (err) {
    // The acquire per resource answers these as it always does: it tries again (pausing while no
    // connection can be had) until the deadline.
    if (err instanceof TransactionConflictError || err instanceof DatabaseUnreachableError) return null;
    if (err instanceof SchemaMissingError && errnoOf(err.cause) === ER_SP_DOES_NOT_EXIST) {
      // A database migrated only to version 10, which lock managers accept: no one-call acquire.
      ctx.acquirePath.perResourceGroups = true;
      return null;
    }
    throw err;
  }
  return grants === null ? null : admitAll(grants);
}

function grantOf(ctx: LockContext, t: RwTarget, id: number, token: Buffer): DurableGrant {
  return DurableGrant.create(ctx, id, t.resourceId, t.resource, t.mode, token);
}

/**
 * After a lost reply: the first token withdrawn (`withdrawAcquire`). Withdrawn: the group's
 * transaction had not written its first grant row, and if it tries it fails on the duplicate token
 * and rolls back whole, so nothing was granted and a new call is safe. A duplicate: the group
 * committed, every grant row with it, read back by token.
 */
async function settleLostGroup(
  ctx: LockContext,
  targets: readonly RwTarget[],
  tokens: readonly Buffer[],
  err: unknown,
): Promise<Settled<DurableGrant[] | null>> {
  const first = targets[0]!;
  const reply = await askDatabase(ctx.knex, ctx.policy.resolveTimeoutMs, async (conn) => {
    try {
      await withdrawAcquire(conn, first.resource, first.mode, tokens[0]!);
      return null;
    } catch (e) {
      if (errnoOf(e) !== ER_DUP_ENTRY) throw e;
      const rows: Array<LoggedGrant | null> = [];
      for (const token of tokens) rows.push(await findGrantByToken(conn, token));
      return rows;
    }
  });
  if (reply === undefined) throw new LockOutcomeUnknownError('acquire', tokens[0]!.toString('hex'), null, err);
  const rows = reply.answer;
  // Withdrawn (now, or by an earlier probe whose reply was lost too): never granted.
  if (rows === null || rows[0]?.releasedBy === RELEASED_BY.withdrawn) return 'retry';
  if (rows.some((r) => r === null))
    throw new LockInvariantError('a group acquire committed some of its grant rows but not all');
  const grants = rows.map((row, i) => grantOf(ctx, targets[i]!, row!.id, tokens[i]!));
  if (rows.every((row) => row!.status !== STATUS.released)) return { value: grants };
  // Granted, and one reaped since: the group is not held; what is still live goes back.
  for (const [i, grant] of grants.entries())
    if (rows[i]!.status === STATUS.released) grant.committed();
    else await grant.release().catch(() => undefined);
  return { value: null };
}

/** Each grant admitted (`DurableGrant.admit`); when one is refused, the others are released too. */
async function admitAll(grants: DurableGrant[]): Promise<DurableGrant[]> {
  for (const [i, grant] of grants.entries()) {
    try {
      await grant.admit();
    } catch (err) {
      for (const other of grants.filter((_, j) => j !== i)) await other.release().catch(() => undefined);
      throw err;
    }
  }
  return grants;
}
