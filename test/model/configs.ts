/**
 * The bounds each run checks (see docs/design.md, "The model"): clients, lock cycles per client,
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
