import type { Target } from '../durable/durable-acquire.js';
import type { LockContext } from '../context/lock-context.js';
import { InvalidOptionsError, LockUpgradeError, ResourceKindError } from '../../errors.js';
import type { Grant } from '../../contract/api.js';
import type { Knex } from 'knex';
import type { LockMode } from '../../types.js';

// The nesting rules of the scoped calls: when a call inside another scoped call of the same
// manager joins it, and when it is refused.

/**
 * Reentrancy of `with*Lock` / `withPermit`: inside an operation on the same resource (durable or
 * section), the call joins its grant and transaction, which hold the resource until they commit.
 * The enclosing operation, checked, or undefined when there is none.
 */
export function joinOne(
  ctx: LockContext,
  mode: LockMode,
  t: Target,
  what: string,
): { grant: Grant; trx: Knex.Transaction } | undefined {
  const resourceId = t.resourceId;
  const outer = ctx.scopes.held(t.resource.toString('hex'));
  if (!outer) return undefined;
  if (mode === 'write' && outer.grant.mode === 'read') throw new LockUpgradeError(resourceId);
  if ((mode === 'permit') !== (outer.grant.mode === 'permit'))
    throw new ResourceKindError(resourceId, mode === 'permit' ? 'permit' : 'read-write');
  if (mode === 'permit' && (outer.grant.permits ?? 1) < (t.permit?.count ?? 1))
    throw new InvalidOptionsError(
      `count: ${what} nested in a call that holds ${outer.grant.permits ?? 1} permits of ${JSON.stringify(resourceId)} asks for more`,
    );
  if (outer.trx === undefined)
    throw new InvalidOptionsError(
      `${what}: ${resourceId} is held by an enclosing withWriteGrant/withReadGrant, whose transaction is not a knex one to join; use its grant (locks.current(id).grant) and transaction`,
    );
  return { grant: outer.grant, trx: outer.trx };
}

/**
 * Reentrancy of withLocks: when one enclosing operation's transaction holds every resource named,
 * each in the mode asked or a stronger one, the call joins it (its grants in resource byte
 * order); a write asked where a read is held is refused (LockUpgradeError), as is a call that
 * names some held resources and not others, or resources held by different enclosing operations:
 * it cannot join one transaction, and waiting could deadlock with its own enclosing grants.
 */
export function joinGroup(ctx: LockContext, targets: Target[]): { trx: Knex.Transaction; grants: Grant[] } | undefined {
  const held = targets.map((t) => ({ t, outer: ctx.scopes.held(t.resource.toString('hex')) }));
  if (held.every((h) => h.outer === undefined)) return undefined;
  const trx = held.find((h) => h.outer !== undefined)!.outer!.trx;
  // A scoped grant's transaction is the caller's ORM's: a group cannot join it.
  if (trx === undefined)
    throw new InvalidOptionsError(
      `withLocks: a resource named is held by an enclosing withWriteGrant/withReadGrant, whose transaction is not a knex one to join`,
    );
  const partial = held.find((h) => h.outer === undefined || h.outer.trx !== trx);
  if (partial)
    throw new InvalidOptionsError(
      `withLocks: ${JSON.stringify(partial.t.resourceId)} is not held by the enclosing operation that holds the others; a nested withLocks names only resources one enclosing operation holds, or none of them`,
    );
  for (const h of held) {
    if (h.t.mode === 'write' && h.outer!.grant.mode === 'read') throw new LockUpgradeError(h.t.resourceId);
    if ((h.t.mode === 'permit') !== (h.outer!.grant.mode === 'permit'))
      throw new ResourceKindError(h.t.resourceId, h.t.mode === 'permit' ? 'permit' : 'read-write');
  }
  const sorted = [...held].sort((a, b) => Buffer.compare(a.t.resource, b.t.resource));
  return { trx: trx!, grants: sorted.map((h) => h.outer!.grant) };
}

/**
 * A `with*Grant` call's transaction is the caller's own: it cannot join an enclosing one, nor fence
 * a grant another call settles. Refused when the resource is held by an enclosing scoped call.
 */
export function refuseNestedGrant(ctx: LockContext, t: Target, what: string): void {
  if (ctx.scopes.held(t.resource.toString('hex')))
    throw new InvalidOptionsError(
      `${what}: ${t.resourceId} is already held by an enclosing scoped call of this manager; use its grant (locks.current(id).grant)`,
    );
}
