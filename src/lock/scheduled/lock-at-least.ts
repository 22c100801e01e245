import type { Grant } from '../../contract/api.js';

/**
 * Keeps `grant` until `atLeastMs` after it was granted, on the database clock, then releases it:
 * `lockAtLeastFor`. `ageMs` reads the grant's age on the database clock (null once it is no longer
 * live). Each wait is followed by another read, so the release is never sent before the database
 * says the time has passed, whatever this process's timers do; meanwhile the lease covers the rest
 * of the hold, so a reaper whose cutoff is shorter does not take it early. A process that dies
 * during the hold leaves the grant to the reaper, which releases it no earlier.
 */
export async function releaseAfterAtLeast(
  grant: Grant,
  atLeastMs: number,
  ageMs: () => Promise<number | null>,
): Promise<void> {
  for (;;) {
    const age = await ageMs();
    if (age === null) return; // released by someone else: nothing left to keep
    const left = Math.ceil(atLeastMs - age);
    if (left <= 0) {
      await grant.release();
      return;
    }
    if (!(await grant.extend(left))) return;
    await new Promise<void>((resolve) => setTimeout(resolve, left).unref());
  }
}
