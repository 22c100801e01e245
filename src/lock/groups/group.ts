import { errnoOf, translate } from '../../sql/connection.js';
import type { LockContext } from '../context/lock-context.js';
import {
  InvalidOptionsError,
  LockAbortedError,
  LockInvariantError,
  LockLostError,
  LockTimeoutError,
} from '../../errors.js';
import type { FenceExecutor, LockGroup } from '../../contract/api.js';
import type { FencedHold } from '../fence/fenced.js';
import type { DurableGrant } from '../durable/grant.js';
import { acquire, type Target } from '../durable/durable-acquire.js';
import { acquireAtOnce, oneCallApplies } from './group-acquire.js';
import { LIMITS, OPTION_KEYS, optionsObject, permitOptions } from '../../options.js';
import { RELEASE_SQL, RELEASED_ROWS, releaseManyParams, releaseManySql, releaseParams } from '../../sql/release.js';
import { resourceKey } from '../durable/resource-id.js';
import { fenceChannel, traced } from '../../contract/channels.js';
import type { LockMode } from '../../types.js';
import { testSwitches } from '../../test-switches.js';

/**
 * The targets of `withLocks` / `acquireMany`, validated before anything is written: a plain object
 * with `write` and `read` arrays of valid resource ids and a `permits` array of semaphores
 * (`{ id, permits, count? }`), each resource named once across all three, at least one and at most
 * LIMITS.maxGroupResources. Returned in the caller's order.
 */
export function groupTargets(what: string, sets: unknown): Target[] {
  if (typeof sets !== 'object' || sets === null || Array.isArray(sets))
    throw new InvalidOptionsError(`${what} needs the resources as { write: [...ids], read: [...ids] }`);
  const o = optionsObject(what, sets, ['write', 'read', 'permits']);
  const targets: Target[] = [];
  const seen = new Set<string>();
  for (const mode of ['write', 'read'] as const) {
    const ids = o[mode];
    if (ids === undefined) continue;
    if (!Array.isArray(ids)) throw new InvalidOptionsError(`${mode} must be an array of resource ids`);
    for (const resourceId of ids as unknown[]) {
      const resource = resourceKey(resourceId);
      const key = resource.toString('hex');
      if (seen.has(key))
        throw new InvalidOptionsError(
          `${what}: resource ${JSON.stringify(resourceId)} is named more than once (name it once, under write for a write lock)`,
        );
      seen.add(key);
      targets.push({ mode, resourceId: resourceId as string, resource });
    }
  }
  if (o.permits !== undefined) {
    if (!Array.isArray(o.permits))
      throw new InvalidOptionsError('permits must be an array of semaphores, each { id, permits, count? }');
    for (const set of o.permits as unknown[]) {
      const s = optionsObject(`${what} permits`, set ?? null, ['id', ...OPTION_KEYS.permit]);
      const resource = resourceKey(s.id);
      const key = resource.toString('hex');
      if (seen.has(key))
        throw new InvalidOptionsError(`${what}: resource ${JSON.stringify(s.id)} is named more than once`);
      seen.add(key);
      targets.push({ mode: 'permit', resourceId: s.id as string, resource, permit: permitOptions(what, s) });
    }
  }
  if (targets.length === 0)
    throw new InvalidOptionsError(`${what}: no resource to lock (write, read and permits are empty)`);
  if (targets.length > LIMITS.maxGroupResources)
    throw new InvalidOptionsError(
      `${what}: ${targets.length} resources; at most ${LIMITS.maxGroupResources} can be locked together`,
    );
  return targets;
}

/** The targets in resource byte order: the one order every group, durable or section, takes them in. */
export function inResourceOrder<T extends { resource: Buffer }>(targets: readonly T[]): T[] {
  return [...targets].sort((a, b) => Buffer.compare(a.resource, b.resource));
}

/** Traces one acquire of the group, as the manager traces any acquire. */
export type TraceAcquire = (t: Target, waitMs: number, run: () => Promise<DurableGrant>) => Promise<DurableGrant>;

/**
 * Takes every target: first, where it applies (`oneCallApplies`), all of them in one acquire
 * transaction (`acquireAtOnce`), which grants all or none; else, or when that was refused, one
 * after another in resource byte order (every group waits in the same order, so two groups cannot
 * each hold what the other waits for), all within one `waitMs`. All or
 * nothing: when one cannot be taken (timeout, abort, error) those already taken are released, a
 * lost reply settled as `Grant.release` settles it, and the error is rethrown; a timeout names the
 * resource that was not granted and the whole `waitMs`.
 */
export async function acquireGroup(
  ctx: LockContext,
  targets: readonly Target[],
  waitMs: number,
  signal: AbortSignal | undefined,
  trace: TraceAcquire,
): Promise<HeldGroup> {
  const sorted = inResourceOrder(targets);
  const order = testSwitches.group.callerOrder ? targets : sorted;
  const deadline = performance.now() + waitMs;
  const taken: DurableGrant[] = [];
  // Granted all at once (in sorted order): each grant is then handed out by its own target's trace.
  let atOnce: DurableGrant[] | null = null;
  const oneCall = order === sorted && oneCallApplies(ctx, sorted) ? sorted : null;
  const take = async (t: Target, left: number): Promise<DurableGrant> => {
    if (atOnce) return atOnce[taken.length]!;
    if (oneCall && taken.length === 0) {
      atOnce = await acquireAtOnce(ctx, oneCall, {
        deadline,
        signal,
        timeout: (why, on) => new LockTimeoutError(t.resourceId, t.mode, waitMs, on, why),
      });
      await testSwitches.group.afterOneCall?.(atOnce !== null);
      if (atOnce) {
        if (signal?.aborted) throw new LockAbortedError(signal.reason);
        return atOnce[0]!;
      }
      left = Math.max(0, Math.ceil(deadline - performance.now()));
    }
    return acquire(ctx, t, left, signal);
  };
  try {
    for (const t of order) {
      const left = Math.max(0, Math.ceil(deadline - performance.now()));
      try {
        taken.push(await trace(t, left, () => take(t, left)));
        if (taken.length === 1) await testSwitches.group.afterFirst?.();
      } catch (err) {
        throw err instanceof LockTimeoutError
          ? new LockTimeoutError(t.resourceId, t.mode, waitMs, err.waitedFor, err.cause)
          : err;
      }
    }
  } catch (err) {
    // Newest first; a release that cannot be settled is left to the reaper, and the caller learns
    // why the group was not granted.
    const held = atOnce ?? taken;
    for (const grant of [...held].reverse()) await grant.release().catch(() => undefined);
    throw err;
  }
  return new HeldGroup(sorted.map((t) => taken.find((g) => g.ref.resource.equals(t.resource)) as DurableGrant));
}

/** A group of grants taken together: the implementation of {@link LockGroup}. */
export class HeldGroup implements LockGroup, FencedHold {
  readonly grants: readonly DurableGrant[];

  constructor(grants: readonly DurableGrant[]) {
    this.grants = grants;
  }

  /** The first grant: what LockOutcomeUnknownError and a refused fence name. */
  get id(): number {
    return this.grants[0]!.id;
  }

  get token(): string {
    return this.grants[0]!.token;
  }

  get settled(): boolean {
    return this.grants.every((g) => g.settled);
  }

  /** One fence event per grant, nested around the one statement, each with the group's outcome. */
  fence(execute: FenceExecutor): Promise<void> {
    return this.grants.reduceRight<() => Promise<void>>(
      (inner, g) => () =>
        traced(fenceChannel, () => ({ grant: g, grantId: g.id, resourceId: g.resourceId, mode: g.mode }), inner),
      () => this.#fence(execute),
    )();
  }

  async #fence(execute: FenceExecutor): Promise<void> {
    const ended = this.grants.find((g) => g.settled);
    if (ended) throw new LockLostError(ended.id, 'it was already released');
    const fenced = testSwitches.group.fenceFirstOnly ? this.grants.slice(0, 1) : this.grants;
    const expected = RELEASED_ROWS * fenced.length;
    let changed: unknown;
    try {
      changed = await execute(
        releaseManySql(fenced.length),
        releaseManyParams(
          fenced.map((g) => g.ref),
          'holder',
        ),
      );
    } catch (err) {
      if (errnoOf(err) !== ER_UPDATE_WITHOUT_KEY_IN_SAFE_MODE) throw translate(err);
      // MariaDB's sql_safe_updates refuses a multi-table UPDATE that reads its rows by a range, as
      // the one statement reads the grants' rows (by primary key); it changed nothing and the
      // transaction goes on. The same fence, a statement per grant: each names its rows by
      // primary key, which safe mode takes.
      changed = await fenceOneByOne(execute, fenced);
    }
    if (changed === expected) return;
    if (typeof changed === 'number' && Number.isInteger(changed) && changed >= 0 && changed < expected)
      throw new LockLostError(
        this.id,
        `a grant of the group ${this.grants.map((g) => g.id).join(', ')} is no longer live; release() the group to learn which`,
      );
    throw new LockInvariantError(
      `execute() resolved to ${typeof changed === 'number' ? changed : `${String(changed)} (a ${typeof changed})`}, expected the number ${expected} (released) or less (one lost): does it resolve to the affected-row count, as a number?`,
    );
  }

  committed(): void {
    for (const g of this.grants) g.committed();
  }

  async release(): Promise<boolean> {
    let all = true;
    let failure: { error: unknown } | undefined;
    for (const g of this.grants) {
      try {
        if (!(await g.release())) all = false;
      } catch (error) {
        failure ??= { error };
      }
    }
    if (failure) throw failure.error;
    return all;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }

  /** @internal True while every grant is live; asks each, so each learns its own state. */
  async isLive(): Promise<boolean> {
    let live = true;
    for (const g of this.grants) if (!(await g.isLive())) live = false;
    return live;
  }

  /**
   * @internal After the group's fenced commit lost its reply: settles each grant (each release
   * waits for the lost transaction's row locks). One commit released all or none of them.
   */
  async settleLostCommit(): Promise<'committed' | 'rolled-back' | 'lost' | undefined> {
    const outcomes = [];
    for (const g of this.grants) outcomes.push(await g.settleLostCommit());
    if (outcomes.includes(undefined)) return undefined;
    if (outcomes.includes('lost')) return 'lost';
    return outcomes.every((o) => o === 'committed') ? 'committed' : 'rolled-back';
  }

  /** @internal */
  lost(): LockLostError | null {
    const g = this.grants.find((x) => x.lost);
    return g ? new LockLostError(g.id) : null;
  }

  /** @internal */
  modes(): string {
    return this.grants.map((g): LockMode => g.mode).join(',');
  }
}

/** MariaDB's refusal, under `sql_safe_updates`, of an UPDATE whose WHERE it does not take as using a key. */
const ER_UPDATE_WITHOUT_KEY_IN_SAFE_MODE = 1175;

/**
 * The group fence as one RELEASE_SQL per grant, in the caller's transaction: the rows they changed
 * in all, as the one statement would count them. It stops at a grant no longer live (0 rows): the
 * fence is then refused and the caller's transaction rolls back with the releases before it.
 */
async function fenceOneByOne(execute: FenceExecutor, grants: readonly DurableGrant[]): Promise<unknown> {
  let total = 0;
  for (const g of grants) {
    let changed: unknown;
    try {
      changed = await execute(RELEASE_SQL, releaseParams(g.ref, 'holder'));
    } catch (err) {
      throw translate(err);
    }
    if (changed !== RELEASED_ROWS) return changed === 0 ? total : changed;
    total += RELEASED_ROWS;
  }
  return total;
}
