import { acquire, tryOnce, type Target } from '../durable/durable-acquire.js';
import { permitTarget, target } from './call-options.js';
import type { LockContext } from '../context/lock-context.js';
import { InvalidOptionsError, SectionError } from '../../errors.js';
import type { Grant, LockGroup, LockSets } from '../../contract/api.js';
import { acquireGroup, groupTargets, type HeldGroup } from '../groups/group.js';
import type { DurableGrant } from '../durable/grant.js';
import { keepLeaseAhead } from '../durable/lease.js';
import { resolveCallOptions, sharedOptions, type AcquireOptions, type PermitOptions } from '../../options.js';
import { acquireChannel, traced } from '../../contract/channels.js';
import type { LockMode } from '../../types.js';
import { SectionGrant } from '../sections/section-run.js';

// The manager's acquiring calls (tryAcquire*, acquire*, acquireMany): a grant or group handed to
// the caller, who releases it; and `traceAcquire`, which publishes each durable acquire of a call.

/**
 * A durable acquire of a resource that an enclosing section holds would wait on the section's
 * own row lock until its waitMs: refused at once.
 */
export function notInSection(ctx: LockContext, t: Target, what: string): void {
  if (ctx.scopes.held(t.resource.toString('hex'))?.grant instanceof SectionGrant)
    throw new SectionError(
      `${what}(${JSON.stringify(t.resourceId)}) inside a section on the same resource would wait on the section itself: use the section's grant, or with*Lock (which joins it)`,
    );
}

/** An acquire of `t`, published on the acquire tracing channel. */
export function traceAcquire<T extends DurableGrant | null>(
  ctx: LockContext,
  t: Target,
  waitMs: number,
  run: () => Promise<T>,
): Promise<T> {
  return traced(
    acquireChannel,
    () => ({ resourceId: t.resourceId, mode: t.mode, waitMs, owner: ctx.options.owner, knex: ctx.knex }),
    run,
  );
}

/** Waits for `t` within `waitMs`, traced. */
export function acquireTraced(
  ctx: LockContext,
  t: Target,
  waitMs: number,
  signal: AbortSignal | undefined,
): Promise<DurableGrant> {
  return traceAcquire(ctx, t, waitMs, () => acquire(ctx, t, waitMs, signal));
}

/** One attempt at `t`, traced. */
export function tryTraced(ctx: LockContext, t: Target): Promise<DurableGrant | null> {
  return traceAcquire(ctx, t, 0, () => tryOnce(ctx, t));
}

/** Takes every target of a group, each acquire traced. */
export function acquireGroupTraced(
  ctx: LockContext,
  targets: Target[],
  waitMs: number,
  signal: AbortSignal | undefined,
): Promise<HeldGroup> {
  return acquireGroup(ctx, targets, waitMs, signal, (t, w, run) => traceAcquire(ctx, t, w, run));
}

/** `tryAcquireWrite` / `tryAcquireRead`. */
export async function tryAcquireCall(
  ctx: LockContext,
  mode: LockMode,
  resourceId: string,
  argumentCount: number,
  what: string,
): Promise<Grant | null> {
  const t = target(mode, resourceId);
  // An options object here would otherwise be ignored silently, e.g. a waitMs the caller relies on.
  if (argumentCount > 1)
    throw new InvalidOptionsError(
      `${what} takes no options (one attempt); use ${what.replace('try', '').replace(/^A/, 'a')}(id, { waitMs }) to wait`,
    );
  notInSection(ctx, t, what);
  return tryTraced(ctx, t);
}

/** `acquireWrite` / `acquireRead`. */
export async function acquireCall(
  ctx: LockContext,
  mode: LockMode,
  resourceId: string,
  options: AcquireOptions | undefined,
  what: string,
): Promise<Grant> {
  const t = target(mode, resourceId);
  const { waitMs, signal, leaseMs, maxHoldMs } = resolveCallOptions(what, options, 'acquire');
  notInSection(ctx, t, what);
  const grant = await acquireTraced(ctx, t, waitMs, signal);
  // Kept ahead until released: the keep-alive stops at its first tick after the grant settles.
  if (leaseMs !== undefined) await keepLeaseAhead(grant, leaseMs, maxHoldMs).first;
  return grant;
}

/** `tryAcquirePermit`. */
export async function tryAcquirePermitCall(
  ctx: LockContext,
  resourceId: string,
  options: PermitOptions,
): Promise<Grant | null> {
  const what = 'tryAcquirePermit';
  const t = permitTarget(what, resourceId, options, true);
  notInSection(ctx, t, what);
  return tryTraced(ctx, t);
}

/** `acquirePermit`. */
export async function acquirePermitCall(
  ctx: LockContext,
  resourceId: string,
  options: PermitOptions & AcquireOptions,
): Promise<Grant> {
  const what = 'acquirePermit';
  const t = permitTarget(what, resourceId, options, false);
  const { waitMs, signal, leaseMs, maxHoldMs } = resolveCallOptions(what, sharedOptions(options), 'acquire');
  notInSection(ctx, t, what);
  const grant = await acquireTraced(ctx, t, waitMs, signal);
  if (leaseMs !== undefined) await keepLeaseAhead(grant, leaseMs, maxHoldMs).first;
  return grant;
}

/** `acquireMany`. */
export async function acquireManyCall(
  ctx: LockContext,
  sets: LockSets,
  options: AcquireOptions | undefined,
): Promise<LockGroup> {
  const targets = groupTargets('acquireMany', sets);
  const { waitMs, signal, leaseMs, maxHoldMs } = resolveCallOptions('acquireMany', options, 'acquire');
  for (const t of targets) notInSection(ctx, t, 'acquireMany');
  const group = await acquireGroupTraced(ctx, targets, waitMs, signal);
  if (leaseMs !== undefined) await Promise.all(group.grants.map((g) => keepLeaseAhead(g, leaseMs, maxHoldMs).first));
  return group;
}
