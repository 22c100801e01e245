/**
 * The bounds each run checks (see docs/model-runs.md, "Bounds"): clients, lock cycles per client,
 * lost replies in the whole run, whether the one asynchronous failover may happen, and which modes
 * and jobs take part.
 */
const TWO = ['-DNC=2', '-DNACQ=1'];
/**
 * Durable grants: one lost reply (an acquire, a commit that may still be in flight, or a release).
 * A refused acquire may heal its resource or not (HEAL keeps every behaviour without it).
 */
export const TWO_CLIENTS_LOST_REPLIES = [...TWO, '-DNLOST=1', '-DNOFAILOVER', '-DHEAL'];
export const TWO_CLIENTS_FAILOVER = [...TWO, '-DNLOST=0', '-DHEAL'];
/** Self-healing acquires and no reaper: stale grants go only by heals (and the operator). */
export const HEAL_NO_REAPER_LOST_REPLIES = [...TWO, '-DNLOST=1', '-DNOFAILOVER', '-DHEAL', '-DNO_REAPER'];
export const HEAL_NO_REAPER_THREE_CLIENTS = [
  '-DNC=3',
  '-DNACQ=1',
  '-DNLOST=0',
  '-DNOFAILOVER',
  '-DHEAL',
  '-DNO_REAPER',
];
export const HEAL_NO_REAPER_SMALL = [...TWO, '-DNLOST=0', '-DNOFAILOVER', '-DHEAL', '-DNO_REAPER'];
export const THREE_CLIENTS = ['-DNC=3', '-DNACQ=1', '-DNLOST=0', '-DNOFAILOVER'];
export const SMALL = [...TWO, '-DNLOST=0', '-DNOFAILOVER'];
/** Durable grants: a mode change whose reply is lost, and withWriteGrant's settling. */
export const MODE_CHANGES_AND_GRANT_FORM = [
  ...TWO,
  '-DNLOST=1',
  '-DNOFAILOVER',
  '-DMODE_LOST',
  '-DGRANT_FORM',
  '-DNO_LOST_GRANT_REPLY',
];
/** Durable grants and one-commit sections of either mode; a section's COMMIT reply lost. */
export const SECTIONS_LOST_COMMIT = [...TWO, '-DNLOST=1', '-DNOFAILOVER', '-DSECTIONS', '-DNO_LOST_GRANT_REPLY'];
/**
 * Durable grants and sections with history and without (BARE), of either mode; a section's COMMIT
 * reply lost: settled by its row, or (without history) reported unknown.
 */
export const BARE_SECTIONS_LOST_COMMIT = [...SECTIONS_LOST_COMMIT, '-DBARE'];
/** Durable grants and one-commit sections of either mode, and repairLockCounts. */
export const SECTIONS_REPAIR = [...TWO, '-DNLOST=0', '-DNOFAILOVER', '-DSECTIONS', '-DREPAIR'];
export const SECTIONS_SMALL = [...TWO, '-DNLOST=0', '-DNOFAILOVER', '-DSECTIONS'];
/** Groups of both resources, durable and section, against each other. */
export const GROUPS = [...TWO, '-DNLOST=0', '-DNOFAILOVER', '-DGROUPS', '-DGROUPS_ONLY', '-DHEAL'];
/** Every cycle a section group: the progress run of the ordered take. */
export const SECTION_GROUPS = [...TWO, '-DNLOST=0', '-DNOFAILOVER', '-DGROUPS', '-DSECTION_GROUPS_ONLY'];
/**
 * Permits: every cycle a durable permit of a semaphore of 2, three clients (so a third holder is
 * possible), with crashes, the reaper and the operator; and a semaphore of 1 with a lost reply.
 */
export const PERMITS_THREE = ['-DNC=3', '-DNACQ=1', '-DNLOST=0', '-DNOFAILOVER', '-DPERMITS', '-DLIMIT=2'];
export const PERMITS_LOST_REPLIES = [...TWO, '-DNLOST=1', '-DNOFAILOVER', '-DPERMITS', '-DLIMIT=1'];
/** Durable grants with one lost reply and the purge (for its control: with the floor it deletes nothing a step reads). */
export const PURGE_LOST_REPLIES = [...TWO, '-DNLOST=1', '-DNOFAILOVER', '-DPURGE'];
/**
 * Leases shorter than the cutoff (LONG_CUTOFF: no grant reaches the cutoff, only a lease running out
 * makes one stale): a renewer that pauses or dies, its lease run out, with the reaper and heals and a
 * lost reply; and the same without the reaper, where only a waiter's heal frees the resource.
 */
export const SHORT_LEASES_LOST_REPLIES = [...TWO, '-DNLOST=1', '-DNOFAILOVER', '-DHEAL', '-DLONG_CUTOFF'];
export const SHORT_LEASES = [...TWO, '-DNLOST=0', '-DNOFAILOVER', '-DLONG_CUTOFF'];
export const SHORT_LEASES_HEAL_NO_REAPER = [
  ...TWO,
  '-DNLOST=0',
  '-DNOFAILOVER',
  '-DHEAL',
  '-DNO_REAPER',
  '-DLONG_CUTOFF',
];
/**
 * Kinds and limits (KINDS): durable acquires of one resource as a write lock, a read lock, or a permit
 * of a semaphore of 1 or of 2, with self-healing acquires, crashes and the operator: 2 clients with the
 * reaper, the same without it, and 3 clients without it (two permits of a semaphore of 2, the third
 * another kind or limit, so that one heal must release two crashed holders' grants).
 */
export const KINDS_HEAL = [...TWO, '-DNLOST=0', '-DNOFAILOVER', '-DHEAL', '-DKINDS'];
export const KINDS_HEAL_NO_REAPER = [...KINDS_HEAL, '-DNO_REAPER'];
/** The same 2 clients with the reaper, whose writers may downgrade on a resource last used as a semaphore. */
export const KINDS_DOWNGRADE = [...KINDS_HEAL, '-DKINDS_DOWNGRADE'];
export const KINDS_TWO_HOLDERS = [
  '-DNC=3',
  '-DNACQ=1',
  '-DNLOST=0',
  '-DNOFAILOVER',
  '-DHEAL',
  '-DNO_REAPER',
  '-DKINDS',
  '-DKINDS_TWO_HOLDERS',
];
/**
 * Leader election (LEADER): 3 campaigners of one term each, two steps of leading per term (renewals,
 * fenced business transactions), successors' heals and no reaper; and 2 campaigners of two terms
 * each, one step of leading per term, with the reaper. Crashes and the operator in both.
 */
export const LEADER_THREE_HEALS = [
  '-DNC=3',
  '-DNACQ=1',
  '-DNLOST=0',
  '-DNOFAILOVER',
  '-DLEADER',
  '-DNLEAD=2',
  '-DHEAL',
  '-DNO_REAPER',
];
export const LEADER_TWO_TERMS_REAPER = ['-DNC=2', '-DNACQ=2', '-DNLOST=0', '-DNOFAILOVER', '-DLEADER', '-DNLEAD=1'];
/**
 * An exclusive job with lockAtLeastFor (JOBS): 2 instances, one fire each, the run's hand-over whose
 * COMMIT reply may be lost, crashes anywhere, tries that heal, the reaper and the operator.
 */
export const JOBS_HAND_OVER = [...TWO, '-DNLOST=1', '-DNOFAILOVER', '-DHEAL', '-DJOBS'];
