import type { Target } from '../durable/durable-acquire.js';
import { acquireGroupTraced, acquireTraced } from './acquire-calls.js';
import { checkPool, permitTarget, target } from './call-options.js';
import type { LockContext } from '../context/lock-context.js';
import { InvalidOptionsError, LockLostError } from '../../errors.js';
import { runFenced, runFencedHold, runGranted } from '../fence/fenced.js';
import type { GrantedWork, LockedGroupWork, LockedWork, LockSets } from '../../contract/api.js';
import { groupTargets, inResourceOrder } from '../groups/group.js';
import type { DurableGrant } from '../durable/grant.js';
import { keepLeaseAhead } from '../durable/lease.js';
import { joinGroup, joinOne, refuseNestedGrant } from './nesting.js';
import {
  booleanOption,
  resolveCallOptions,
  sharedOptions,
  type PermitOptions,
  type WithGrantOptions,
  type WithLockOptions,
} from '../../options.js';
import type { LockMode } from '../../types.js';
import { inHoldWrappers } from '../../contract/hold-wrappers.js';
import { runSection } from '../sections/section-run.js';

// The scoped calls (withWriteLock, withReadLock, withPermit, withLocks, withWriteGrant,
// withReadGrant): each acquires, holds its grants around the work with `runWhileHeld`, and releases.

/** What `runWhileHeld` settles after the run: a grant, or a group of them. */
interface Settled {
  readonly settled: boolean;
  release(): Promise<boolean>;
}

/**
 * Holds `held` (its `grants`) around `run`: inside their hold scope, so the work's queries are
 * children of the hold; with `leaseMs`, each lease kept ahead from before `run` starts until it
 * ends; then whatever `run` left unsettled (rolled back, or never started) is released. A release
 * is sent again while no connection can be had, up to `resolveTimeoutMs`; one that still cannot be
 * done rejects the call with its typed error (DatabaseUnreachableError or LockOutcomeUnknownError,
 * naming the grant), in place of what the work ended with: the caller must learn that a grant
 * stays live until the reaper takes it.
 */
export function runWhileHeld<T>(
  held: Settled,
  grants: readonly DurableGrant[],
  lease: { leaseMs?: number | undefined; maxHoldMs?: number | undefined },
  run: () => Promise<T>,
): Promise<T> {
  const { leaseMs, maxHoldMs } = lease;
  return inHoldWrappers(grants, async () => {
    const keepAlive = leaseMs === undefined ? [] : grants.map((g) => keepLeaseAhead(g, leaseMs, maxHoldMs));
    try {
      await Promise.all(keepAlive.map((k) => k.first));
      return await run();
    } finally {
      for (const k of keepAlive) k.stop();
      if (!held.settled) await held.release();
    }
  });
}

/** `withWriteLock` / `withReadLock`, and `withPermit` with its `permitTarget`. */
export async function scopedCall<T>(
  ctx: LockContext,
  mode: LockMode,
  resourceId: string,
  work: LockedWork<T>,
  options: WithLockOptions | undefined,
  what: string,
  permitTarget?: Target,
): Promise<T> {
  const t = permitTarget ?? target(mode, resourceId);
  const { waitMs, signal, isolationLevel, leaseMs, maxHoldMs, section, history } = resolveCallOptions(
    what,
    options,
    'scoped',
  );
  if (typeof work !== 'function')
    throw new InvalidOptionsError(`work: ${what} needs a function (trx, grant) => Promise`);
  const outer = joinOne(ctx, mode, t, what);
  if (outer) return work(outer.trx, outer.grant);
  checkPool(ctx, leaseMs !== undefined, what);
  if (section)
    return runSection(ctx, [t], (trx, grants) => work(trx, grants[0]!), {
      waitMs,
      signal,
      isolationLevel,
      history: sectionHistory(ctx, history),
    });
  const grant = await acquireTraced(ctx, t, waitMs, signal);
  return runWhileHeld(grant, [grant], { leaseMs, maxHoldMs }, () => runFenced(ctx, grant, work, isolationLevel));
}

/** Whether a section writes its history row: the call's `history`, else its manager's `sectionHistory`. */
function sectionHistory(ctx: LockContext, history: boolean | undefined): boolean {
  return history ?? ctx.options.sectionHistory;
}

/** `withPermit`: no section, as a semaphore's holders are counted durable grants. */
export async function withPermitCall<T>(
  ctx: LockContext,
  resourceId: string,
  work: LockedWork<T>,
  options: PermitOptions & Omit<WithLockOptions, 'section'>,
): Promise<T> {
  const what = 'withPermit';
  const t = permitTarget(what, resourceId, options, false);
  const rest = sharedOptions(options);
  if (booleanOption('section', rest.section, false))
    throw new InvalidOptionsError('section: withPermit has no one-commit section (permit holders are durable grants)');
  return scopedCall(ctx, 'permit', resourceId, work, rest, what, t);
}

/** `withLocks`. */
export async function scopedGroupCall<T>(
  ctx: LockContext,
  sets: LockSets,
  work: LockedGroupWork<T>,
  options: WithLockOptions | undefined,
): Promise<T> {
  const what = 'withLocks';
  const targets = groupTargets(what, sets);
  const { waitMs, signal, isolationLevel, leaseMs, maxHoldMs, section, history } = resolveCallOptions(
    what,
    options,
    'scoped',
  );
  if (typeof work !== 'function')
    throw new InvalidOptionsError(`work: ${what} needs a function (trx, grants) => Promise`);
  const joined = joinGroup(ctx, targets);
  if (joined) return work(joined.trx, joined.grants);
  checkPool(ctx, leaseMs !== undefined, what);
  // A section takes the rows in the same order, in its one transaction.
  if (section) {
    if (targets.some((t) => t.mode === 'permit'))
      throw new InvalidOptionsError(
        'section: withLocks with permits has no one-commit section (permit holders are durable grants)',
      );
    return runSection(ctx, inResourceOrder(targets), work, {
      waitMs,
      signal,
      isolationLevel,
      history: sectionHistory(ctx, history),
    });
  }
  const group = await acquireGroupTraced(ctx, targets, waitMs, signal);
  // The work, its commit and the release inside the hold scope: its queries are children of the
  // first grant's hold, as a single grant's are of its own.
  return runWhileHeld(group, group.grants, { leaseMs, maxHoldMs }, async () => {
    try {
      return await runFencedHold(
        ctx,
        group,
        (trx) =>
          ctx.scopes.run(
            group.grants.map((grant) => [grant.ref.resource.toString('hex'), { grant, trx }] as const),
            () => work(trx, group.grants),
          ),
        isolationLevel,
      );
    } catch (err) {
      // A refused group fence cannot say which grant was lost: releasing the rest finds it.
      if (err instanceof LockLostError && !group.settled) {
        await group.release().catch(() => undefined);
        throw group.lost() ?? err;
      }
      throw err;
    }
  });
}

/** `withWriteGrant` / `withReadGrant`. */
export async function grantedCall<T>(
  ctx: LockContext,
  mode: LockMode,
  resourceId: string,
  work: GrantedWork<T>,
  options: WithGrantOptions | undefined,
  what: string,
): Promise<T | undefined> {
  const t = target(mode, resourceId);
  const { waitMs, signal, leaseMs, maxHoldMs } = resolveCallOptions(what, options, 'granted');
  if (typeof work !== 'function') throw new InvalidOptionsError(`work: ${what} needs a function (grant) => Promise`);
  refuseNestedGrant(ctx, t, what);
  checkPool(ctx, leaseMs !== undefined, what);
  const grant = await acquireTraced(ctx, t, waitMs, signal);
  return runWhileHeld(grant, [grant], { leaseMs, maxHoldMs }, () => runGranted(ctx, grant, work));
}
