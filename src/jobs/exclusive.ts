import { InvalidResourceIdError } from '../errors.js';
import type { HeldGrant } from '../lock/grant.js';
import { keepLeaseAhead } from '../lock/lease.js';
import { LIMITS, type ResolvedExclusiveOptions } from '../options.js';
import { releaseAfterAtLeast } from './hold.js';

/** What `runExclusive` returns: the work's value, or, at once, who holds the job when another instance runs it. */
export type ExclusiveResult<T> = { ran: true; value: T } | { ran: false; heldBy: string | null };

/**
 * The resource a run with `lockAtLeastFor` fences its transaction with: the job's own grant must
 * outlive the commit, which releases the grant it fences.
 */
export const RUN_SUFFIX = '#run';

/**
 * What a run needs of its manager: one attempt at a write grant, a holder's owner, a grant's age,
 * the fenced work, and to count the hold after the run as in flight (close() waits for it).
 */
export interface ExclusiveSteps<T> {
  tryWrite(resourceId: string): Promise<HeldGrant | null>;
  heldBy(resourceId: string): Promise<string | null>;
  ageMs(grant: HeldGrant): Promise<number | null>;
  run(fence: HeldGrant): Promise<T>;
  inFlight(hold: Promise<void>): void;
}

/** The job name is a resource id, and with `lockAtLeastFor` so is the name and RUN_SUFFIX. */
export function checkJobName(name: string, options: ResolvedExclusiveOptions): void {
  const max = LIMITS.maxResourceIdBytes - (options.lockAtLeastFor > 0 ? RUN_SUFFIX.length : 0);
  if (typeof name === 'string' && Buffer.byteLength(name, 'utf8') > max)
    throw new InvalidResourceIdError(
      `job name is ${Buffer.byteLength(name, 'utf8')} bytes in UTF-8; at most ${max} are allowed${max < LIMITS.maxResourceIdBytes ? ` with lockAtLeastFor (its run is fenced on "${RUN_SUFFIX}" after the name)` : ''}`,
    );
}

/**
 * One run of a job on whichever instance gets its write grant first; the others return at once.
 * The grant's lease is kept ahead for at most `lockAtMostFor`. Without `lockAtLeastFor` the work's
 * transaction is fenced by the job's grant and releases it in its commit. With it, the job's grant
 * must outlive that commit: the run takes a second grant, on the name and RUN_SUFFIX, fences the
 * transaction with that one, and keeps the job's grant until `lockAtLeastFor` has passed since it
 * was granted (on the database clock), whatever the run's outcome, as ShedLock does.
 */
export async function runExclusiveJob<T>(
  steps: ExclusiveSteps<T>,
  name: string,
  o: ResolvedExclusiveOptions,
): Promise<ExclusiveResult<T>> {
  const job = await steps.tryWrite(name);
  if (job === null) return { ran: false, heldBy: await steps.heldBy(name) };
  const keepAlive = [keepLeaseAhead(job, o.leaseMs, o.lockAtMostFor)];
  let fence = job;
  let started = false;
  try {
    if (o.lockAtLeastFor > 0) {
      const run = await steps.tryWrite(name + RUN_SUFFIX);
      // The previous run's fence grant, still live: that run may still commit, so this one does not start.
      if (run === null) return { ran: false, heldBy: await steps.heldBy(name + RUN_SUFFIX) };
      fence = run;
      keepAlive.push(keepLeaseAhead(run, o.leaseMs, o.lockAtMostFor));
    }
    await Promise.all(keepAlive.map((k) => k.first));
    started = true;
    return { ran: true, value: await steps.run(fence) };
  } finally {
    for (const k of keepAlive) k.stop();
    // An error is already on its way to the caller; if a release fails too, the reaper releases the grant.
    if (fence !== job && !fence.settled) await fence.release().catch(() => undefined);
    if (started && o.lockAtLeastFor > 0 && !job.settled)
      steps.inFlight(releaseAfterAtLeast(job, o.lockAtLeastFor, () => steps.ageMs(job)).catch(() => undefined));
    else if (!job.settled) await job.release().catch(() => undefined);
  }
}
