// covers: model/rwlock.pml
import { describe, expect, it } from 'vitest';
import { summary, verify } from './spin.js';
import {
  GROUPS,
  HEAL_NO_REAPER_LOST_REPLIES,
  HEAL_NO_REAPER_SMALL,
  HEAL_NO_REAPER_THREE_CLIENTS,
  JOBS_HAND_OVER,
  KINDS_DOWNGRADE,
  KINDS_HEAL,
  KINDS_HEAL_NO_REAPER,
  KINDS_TWO_HOLDERS,
  LEADER_THREE_HEALS,
  LEADER_TWO_TERMS_REAPER,
  MODE_CHANGES_AND_GRANT_FORM,
  PERMITS_LOST_REPLIES,
  PERMITS_THREE,
  SECTION_GROUPS,
  SECTIONS_LOST_COMMIT,
  BARE_SECTIONS_LOST_COMMIT,
  SECTIONS_REPAIR,
  SECTIONS_SMALL,
  SHORT_LEASES,
  SHORT_LEASES_HEAL_NO_REAPER,
  SHORT_LEASES_LOST_REPLIES,
  SMALL,
  THREE_CLIENTS,
  TWO_CLIENTS_FAILOVER,
  TWO_CLIENTS_LOST_REPLIES,
} from './configs.js';

// Every run is exhaustive: Spin explores every interleaving of the bounded model. The safety runs
// check, at every commit, mutual exclusion (over live grants and sections holding), counts = live
// grants, the fence (single and group), no count given back twice, lost acquires settled right, lost
// commits reported right, reaping (by the reaper or a self-healing acquire) only of stale grants, and
// a group that failed holding nothing. With KINDS: kinds never mix, and a refusal by the other kind
// or limit only while a holder that is not a crashed one's stale grant disagrees. With LEADER: terms'
// business commits in the order of the terms, and a campaigner leading again only with a higher
// term. With JOBS: no run commits while an earlier run's lockAtLeastFor window is open.
describe.concurrent('the lock protocol model, checked by Spin', () => {
  const safety: Array<[string, string[]]> = [
    [
      'safety, 2 clients, a lost reply (acquire, commit in flight, or release), crashes, self-healing acquires, reaper, operator',
      TWO_CLIENTS_LOST_REPLIES,
    ],
    [
      'safety, 2 clients, an asynchronous failover, crashes, self-healing acquires, reaper, operator',
      TWO_CLIENTS_FAILOVER,
    ],
    [
      'safety, 2 clients, a lost reply, crashes, self-healing acquires and no reaper, operator',
      HEAL_NO_REAPER_LOST_REPLIES,
    ],
    ['safety, 3 clients, crashes, self-healing acquires and no reaper, operator', HEAL_NO_REAPER_THREE_CLIENTS],
    ['safety, 3 clients, crashes, reaper, operator', THREE_CLIENTS],
    ["safety, 2 clients, a lost mode change's reply, withWriteGrant's settling", MODE_CHANGES_AND_GRANT_FORM],
    ["safety, 2 clients, sections and durable grants, a section's lost COMMIT", SECTIONS_LOST_COMMIT],
    [
      "safety, 2 clients, sections with and without history and durable grants, a section's lost COMMIT",
      BARE_SECTIONS_LOST_COMMIT,
    ],
    ['safety, 2 clients, sections and durable grants, repairLockCounts', SECTIONS_REPAIR],
    ['safety, 2 clients, durable and section groups of two resources, self-healing takes', GROUPS],
    ['safety, 3 clients, permits of a semaphore of 2, crashes, reaper, operator', PERMITS_THREE],
    ['safety, 2 clients, permits of a semaphore of 1, a lost reply, crashes, reaper, operator', PERMITS_LOST_REPLIES],
    [
      'safety, 2 clients, leases shorter than the cutoff, a renewer paused or dead, a lost reply, self-healing acquires, reaper',
      SHORT_LEASES_LOST_REPLIES,
    ],
    [
      'safety, 2 clients, write and read locks and permits of semaphores of 1 and 2 on one resource, crashes, self-healing acquires, reaper, operator',
      KINDS_HEAL,
    ],
    [
      'safety, 3 clients, two permits of a semaphore of 2 and another kind or limit, crashes, self-healing acquires and no reaper',
      KINDS_TWO_HOLDERS,
    ],
    [
      'safety, 2 clients of every kind and limit whose writers may downgrade, crashes, self-healing acquires, reaper',
      KINDS_DOWNGRADE,
    ],
    [
      'safety, 3 campaigners, renewals and fenced business transactions, crashes, successors that heal and no reaper, operator',
      LEADER_THREE_HEALS,
    ],
    ['safety, 2 campaigners of two terms each, fenced commits, crashes, reaper, operator', LEADER_TWO_TERMS_REAPER],
    [
      "safety, 2 instances of a job with lockAtLeastFor, the run's hand-over with a lost reply, crashes, healing tries, reaper, operator",
      JOBS_HAND_OVER,
    ],
  ];
  for (const [name, defines] of safety) {
    it(name, async () => {
      const o = await verify({ defines });
      console.log(summary(name, o));
      expect(o.errors, o.trail.join('\n')).toBe(0);
    });
  }

  const progress: Array<[string, string, string[]]> = [
    ['progress under weak fairness: every stale grant is eventually released', 'stale_released', SMALL],
    ['progress under weak fairness: a free resource is eventually granted to a waiter', 'free_granted', SMALL],
    [
      'progress under weak fairness: a section group never waits for ever holding a gate',
      'group_progress',
      SECTION_GROUPS,
    ],
    [
      'progress under weak fairness, no reaper: no client waits for ever behind a stale grant (it heals it)',
      'waiter_heals',
      HEAL_NO_REAPER_SMALL,
    ],
    [
      'progress under weak fairness, leases shorter than the cutoff: a grant whose lease ran out is released',
      'stale_released',
      SHORT_LEASES,
    ],
    [
      'progress under weak fairness, leases shorter than the cutoff, no reaper: a waiter heals a lease run out',
      'waiter_heals',
      SHORT_LEASES_HEAL_NO_REAPER,
    ],
  ];
  for (const [name, ltl, defines] of progress) {
    it(name, async () => {
      const o = await verify({ defines, ltl });
      console.log(summary(name, o));
      expect(o.errors, o.trail.join('\n')).toBe(0);
    });
  }

  // Readers share across modes: the model asserts that a durable reader is never granted while a read
  // section holds, and the counterexample is the witness that it is. READ_SECTION_TAKES_ROW (in
  // controls.test.ts) is the design where it is not: there the same search finds none.
  it('readers share: a durable reader is granted while a read section holds (a witness)', async () => {
    const o = await verify({ defines: [...SECTIONS_SMALL, '-DWITNESS_SHARE'], control: true });
    console.log(`${summary('WITNESS_SHARE', o)}\nwitness (${o.trail.length} lines):\n${o.trail.join('\n')}`);
    expect(o.errors).toBe(1);
    expect(o.output).toContain('secr[0]>0');
  });

  // The semaphore admits up to its limit, not fewer: the model asserts that fewer than LIMIT permits are
  // ever held at once, and the counterexample is the witness that LIMIT holders do hold together.
  it('permits share: 2 holders of a semaphore of 2 at once (a witness)', async () => {
    const o = await verify({ defines: [...PERMITS_THREE, '-DWITNESS_PERMITS'], control: true });
    console.log(`${summary('WITNESS_PERMITS', o)}\nwitness (${o.trail.length} lines)`);
    expect(o.errors).toBe(1);
    expect(o.output).toContain('cr<2');
  });

  // Healing decides a refusal by the other kind or limit: the model asserts that a call that met one is
  // never granted, and the counterexample is the witness that the heal frees a crashed holder's
  // resource for the other kind, in the same call.
  it('kinds: a call refused by the other kind is granted once it healed (a witness)', async () => {
    const o = await verify({ defines: [...KINDS_HEAL_NO_REAPER, '-DWITNESS_HEALED'], control: true });
    console.log(`${summary('WITNESS_HEALED', o)}\nwitness (${o.trail.length} lines):\n${o.trail.join('\n')}`);
    expect(o.errors).toBe(1);
    expect(o.output).toContain('(g!=0)&&mk');
  });
});
