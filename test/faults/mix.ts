// The parts of the workload that change what a resource is while the faults go on: short leases,
// a semaphore whose limit changes mid-run, and resources that are semaphores to some operations
// and write locks to others. What each lane's record shows of them, so a lane whose zero
// violations never met one of them fails instead of passing vacuously.
import { RELEASED_BY } from '../../src/types.js';
import { grantLimits, type DbState, type GrantRow } from './checker.js';
import { PROBE_OWNER, WITNESS_OWNER, type OpEvent } from './history.js';

export interface MixOptions {
  resources: string[];
  slowResources: string[];
  semaphores?: string[];
  permitLimit?: number;
  changingLimits?: { semaphores: string[]; limits: number[]; stepMs: number };
  flipResources?: string[];
}

/** Every resource with a business row: the lane's database is set up with these. */
export function businessResources(o: MixOptions): string[] {
  return [...o.resources, ...o.slowResources, ...(o.semaphores ?? []), ...(o.flipResources ?? [])];
}

/**
 * Each semaphore's limit for the checker: a changing one's highest (a grant killed before it
 * logged its own limit is judged by no lower one than it may have asked for), the others'
 * `permitLimit`, flip resources' too.
 */
export function semaphoreLimits(o: MixOptions): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of [...(o.semaphores ?? []), ...(o.flipResources ?? [])]) out[s] = o.permitLimit ?? 2;
  for (const s of o.changingLimits?.semaphores ?? []) out[s] = Math.max(...o.changingLimits!.limits);
  return out;
}

export interface MixEvidence {
  /** Grants taken with a lease (their row has `lease_until`), and those of them released as stale. */
  leased: number;
  leasedStale: number;
  /** On a flip resource: a grant of one kind released as stale (reaped or healed), the next of the other kind. */
  kindChangesAfterStale: number;
  /** On a changing semaphore: a permit grant whose limit differs from the one before it. */
  limitChanges: number;
}

const isPermit = (g: GrantRow): boolean => g.permits != null;

export function mixEvidence(o: MixOptions, state: DbState, events: OpEvent[]): MixEvidence {
  const leased = state.grants.filter((g) => g.leased);
  // The workload's own grants: not the witness a pause injector holds after the reap, nor the liveness probe's.
  const byTime = (resource: string): GrantRow[] =>
    state.grants
      .filter((g) => g.resource === resource && g.owner !== WITNESS_OWNER && g.owner !== PROBE_OWNER)
      .sort((a, b) => a.createdMs - b.createdMs || a.id - b.id);
  let kindChangesAfterStale = 0;
  for (const r of o.flipResources ?? []) {
    const list = byTime(r);
    for (let i = 1; i < list.length; i++) {
      const [a, b] = [list[i - 1]!, list[i]!];
      if (a.releasedBy === RELEASED_BY.reaper && isPermit(a) !== isPermit(b)) kindChangesAfterStale++;
    }
  }
  const limits = grantLimits(events);
  let limitChanges = 0;
  for (const r of o.changingLimits?.semaphores ?? []) {
    const asked = byTime(r)
      .map((g) => limits.get(g.id))
      .filter((l) => l !== undefined);
    for (let i = 1; i < asked.length; i++) if (asked[i] !== asked[i - 1]) limitChanges++;
  }
  return {
    leased: leased.length,
    leasedStale: leased.filter((g) => g.releasedBy === RELEASED_BY.reaper).length,
    kindChangesAfterStale,
    limitChanges,
  };
}
