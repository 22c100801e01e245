import { resourceKey } from '../durable/resource-id.js';
import type { DurableGrant } from '../durable/grant.js';
import { keepLeaseAhead } from '../durable/lease.js';
import { newToken } from '../durable/token.js';
import type { ResolvedExclusiveOptions } from '../../options.js';
import { releaseAfterAtLeast } from './lock-at-least.js';

/** What `runExclusive` returns: the work's value, or, at once, who holds the job when another instance runs it. */
export type ExclusiveResult<T> = { ran: true; value: T } | { ran: false; heldBy: string | null };

/**
 * What a run needs of its manager: one attempt at a write grant, a holder's owner, a grant's age,
 * the live grant written under a token (a hand-over's successor), the fenced work, and to count the
 * hold after the run as in flight (close() waits for it).
 */
export interface ExclusiveSteps<T> {
  tryWrite(resourceId: string): Promise<DurableGrant | null>;
  heldBy(resourceId: string): Promise<string | null>;
  ageMs(grant: DurableGrant): Promise<number | null>;
  successor(token: Buffer): Promise<DurableGrant | null>;
  run(fence: DurableGrant): Promise<T>;
  inFlight(hold: Promise<void>): void;
}

/**
 * The job name is a resource id: refused (InvalidResourceIdError) where the job is set up
 * (`runExclusive`'s call, `@Exclusive`'s decoration), before any run.
 */
export function checkJobName(name: string): void {
  resourceKey(name);
}

/**
 * One run of a job on whichever instance gets its write grant first; the others return at once.
 * The grant's lease is kept ahead for at most `lockAtMostFor`; the work's transaction is fenced by
 * the job's grant, the one `current(name)` gives. Without `lockAtLeastFor` its commit releases the
 * grant. With it, the grant must outlive that commit: the fence hands the hold over to a successor
 * grant on the same resource, written in the same commit with the same grant time
 * (src/sql/hand-over.ts), which is kept until `lockAtLeastFor` has passed since the grant (on the
 * database clock), whatever the run's outcome, as ShedLock does; a run that did not commit keeps the
 * job's grant itself that long.
 */
export async function runExclusiveJob<T>(
  steps: ExclusiveSteps<T>,
  name: string,
  o: ResolvedExclusiveOptions,
): Promise<ExclusiveResult<T>> {
  const job = await steps.tryWrite(name);
  if (job === null) return { ran: false, heldBy: await steps.heldBy(name) };
  const keepAlive = keepLeaseAhead(job, o.leaseMs, o.lockAtMostFor);
  const successor = o.lockAtLeastFor > 0 ? newToken() : undefined;
  if (successor) job.handOverAtFence(successor, o.lockAtLeastFor);
  let started = false;
  try {
    await keepAlive.first;
    started = true;
    return { ran: true, value: await steps.run(job) };
  } finally {
    keepAlive.stop();
    if (started && successor) {
      // Committed: the hold is the successor's (none if the grant was lost); else still the job's.
      const hold = job.settled ? await steps.successor(successor).catch(() => null) : job;
      if (hold !== null && !hold.settled)
        steps.inFlight(releaseAfterAtLeast(hold, o.lockAtLeastFor, () => steps.ageMs(hold)).catch(() => undefined));
    } else if (!job.settled) await job.release().catch(() => undefined);
  }
}
