// covers: model/rwlock.pml
import { describe, expect, it } from 'vitest';
import { summary, verify } from './spin.js';
import {
  GROUPS,
  HEAL_NO_REAPER_SMALL,
  JOBS_HAND_OVER,
  KINDS_DOWNGRADE,
  KINDS_HEAL_NO_REAPER,
  LEADER_THREE_HEALS,
  LEADER_TWO_TERMS_REAPER,
  PERMITS_THREE,
  PURGE_LOST_REPLIES,
  SECTION_GROUPS,
  SECTIONS_REPAIR,
  BARE_SECTIONS_LOST_COMMIT,
  SECTIONS_SMALL,
  SHORT_LEASES,
  SHORT_LEASES_HEAL_NO_REAPER,
  SMALL,
  THREE_CLIENTS,
  TWO_CLIENTS_FAILOVER,
  TWO_CLIENTS_LOST_REPLIES,
} from './configs.js';

// Negative controls: the model with one defect switched on must give a counterexample, which is
// printed one model step a line. Each names the property it breaks (the failed assertion's text,
// or the ltl formula for progress), so a control that fails for another reason is caught too.
interface Control {
  defect: string;
  define: string;
  defines: string[];
  breaks: string;
  ltl?: string;
}

const controls: Control[] = [
  { defect: 'acquire UPDATE without resource_id', define: 'NO_RESOURCE_ID', defines: SMALL, breaks: 'db.wc[q]==cw' },
  { defect: 'a pre-check SELECT decides', define: 'PRECHECK', defines: SMALL, breaks: 'nw<=1' },
  {
    defect: "a permit's limit checked by a SELECT of the count, its UPDATE unguarded",
    define: 'PERMIT_PRECHECK',
    defines: PERMITS_THREE,
    breaks: 'cr<=2',
  },
  { defect: 'an unversioned reaper', define: 'UNVERSIONED_REAPER', defines: SMALL, breaks: 'db.g[id].stale' },
  { defect: 'release after reap gives the count back', define: 'RELEASE_AFTER_REAP', defines: SMALL, breaks: 'gb<=1' },
  { defect: 'client-clock reaping', define: 'CLIENT_CLOCK', defines: SMALL, breaks: 'db.g[id].stale' },
  {
    defect: 'a statement naming a grant by id alone (failover reissues the id)',
    define: 'ID_ONLY',
    defines: TWO_CLIENTS_FAILOVER,
    breaks: 'db.g[g].tok==',
  },
  {
    defect: 'a lost acquire settled by a token look-up',
    define: 'LOOKUP_SETTLE',
    defines: TWO_CLIENTS_LOST_REPLIES,
    breaks: 'nogrant',
  },
  {
    defect: 'a writer-intent mark that never expires',
    define: 'INTENT_NO_EXPIRY',
    defines: THREE_CLIENTS,
    breaks: 'acceptance cycle',
    ltl: 'free_granted',
  },
  {
    defect: 'a lease that, once set, keeps the reaper away for good',
    define: 'LEASE_FOREVER',
    defines: SMALL,
    breaks: 'acceptance cycle',
    ltl: 'stale_released',
  },
  {
    defect: 'the former lease rule (a lease only lengthens): a lease shorter than the cutoff never ends its grant',
    define: 'LEASE_LENGTHENS',
    defines: SHORT_LEASES,
    breaks: 'acceptance cycle',
    ltl: 'stale_released',
  },
  {
    defect: 'the former lease rule, no reaper: a waiter never heals a lease run out',
    define: 'LEASE_LENGTHENS',
    defines: SHORT_LEASES_HEAL_NO_REAPER,
    breaks: 'acceptance cycle',
    ltl: 'waiter_heals',
  },
  {
    defect: "a write section's UPDATE without its guard",
    define: 'SECTION_NO_GUARD',
    defines: SECTIONS_SMALL,
    breaks: 'nw<=1',
  },
  {
    defect: 'tryUpgrade without the gate (a read section holds)',
    define: 'UPGRADE_NO_GATE',
    defines: SECTIONS_SMALL,
    breaks: 'nw<=1',
  },
  {
    defect: "a group's fence that checks only its first grant",
    define: 'GROUP_FIRST_FENCE',
    defines: GROUPS,
    breaks: 'db.g[g2].st==1',
  },
  {
    defect: 'a group that times out keeping the grant it took',
    define: 'GROUP_KEEPS',
    defines: GROUPS,
    breaks: '(g==0)',
  },
  {
    defect: 'a one-call group acquire that commits its first take when the second is refused',
    define: 'GROUP_PARTIAL',
    defines: GROUPS,
    breaks: '(db.g[i].st!=1)',
  },
  {
    defect: "section groups taking rows in the caller's order (deadlock)",
    define: 'CALLER_ORDER',
    defines: SECTION_GROUPS,
    breaks: 'acceptance cycle',
    ltl: 'group_progress',
  },
  {
    defect: 'a purge without its floor deletes a committed grant a lost commit is settled from',
    define: 'PURGE_NO_FLOOR',
    defines: [...PURGE_LOST_REPLIES, '-DONLY_LOST_COMMIT'],
    breaks: 'said==',
  },
  {
    defect: 'a purge without its floor deletes a withdrawal before the late acquire arrives',
    define: 'PURGE_NO_FLOOR',
    defines: [...PURGE_LOST_REPLIES, '-DONLY_LOST_ACQUIRE'],
    breaks: 'nogrant',
  },
  {
    defect: 'a fence-and-commit call that commits the business writes of a refused fence',
    define: 'FENCE_COMMITS_REFUSED',
    defines: TWO_CLIENTS_LOST_REPLIES,
    breaks: 'ok||',
  },
  {
    defect: 'a lost COMMIT of a section without history settled by its token, as one with history is',
    define: 'BARE_SETTLE',
    defines: BARE_SECTIONS_LOST_COMMIT,
    breaks: 'said==',
  },
  {
    defect: 'a lost COMMIT settled by a non-locking look-up while it is in flight',
    define: 'LOOKUP_COMMIT_SETTLE',
    defines: TWO_CLIENTS_LOST_REPLIES,
    breaks: 'said==',
  },
  {
    defect: 'a heal that releases the grant it read without checking it again under the lock',
    define: 'HEAL_NO_GUARD',
    defines: HEAL_NO_REAPER_SMALL,
    breaks: 'db.g[hid].stale',
  },
  {
    defect: 'a heal that judges a grant by its age alone, ignoring its lease',
    define: 'HEAL_AGE_ONLY',
    defines: HEAL_NO_REAPER_SMALL,
    breaks: 'db.g[hid].stale',
  },
  {
    defect: 'no self-healing and no reaper: a waiter waits for ever behind a stale grant',
    define: 'NO_HEAL',
    defines: HEAL_NO_REAPER_SMALL,
    breaks: 'acceptance cycle',
    ltl: 'waiter_heals',
  },
  {
    defect: "a downgrade that leaves the last semaphore's permit_limit: its reader counts as a permit",
    define: 'DOWNGRADE_KEEPS_LIMIT',
    defines: KINDS_DOWNGRADE,
    breaks: 'pk==db.lim',
  },
  {
    defect: 'an attempt refused by the other kind or limit refused at once, before healing',
    define: 'REFUSE_BEFORE_HEAL',
    defines: KINDS_HEAL_NO_REAPER,
    breaks: '(nw==0)||(nr<nw)',
  },
  {
    defect: 'a leader that commits its business writes unfenced while it believes it leads',
    define: 'LEADER_UNFENCED',
    defines: LEADER_TWO_TERMS_REAPER,
    breaks: 'g>=lastterm',
  },
  {
    defect: "a term's fence that checks the grant without holding its row to the COMMIT",
    define: 'TERM_FENCE_UNLOCKED',
    defines: LEADER_THREE_HEALS,
    breaks: 'g>=lastterm',
  },
  {
    defect: "a job's hand-over as two transactions: release and commit, then take the successor",
    define: 'HAND_OVER_TWO_STEPS',
    defines: JOBS_HAND_OVER,
    breaks: '!(keep)',
  },
  {
    defect: 'repairLockCounts counting before it locks the lock row',
    define: 'REPAIR_COUNT_FIRST',
    defines: SECTIONS_REPAIR,
    breaks: 'db.wc[q]==cw',
  },
];

describe.concurrent('negative controls: each defect gives a counterexample', () => {
  for (const c of controls) {
    it(`${c.define}${c.defines.find((d) => d.startsWith('-DONLY_'))?.replace('-D', ' ') ?? ''}: ${c.defect}`, async () => {
      const o = await verify({ defines: [...c.defines, `-D${c.define}`], ltl: c.ltl, control: true });
      console.log(`${summary(c.define, o)}\ncounterexample (${o.trail.length} lines):\n${o.trail.join('\n')}`);
      expect(o.errors).toBeGreaterThanOrEqual(1);
      expect(o.output + o.trail.join('\n')).toContain(c.breaks);
    });
  }
});

// Readers share (properties.test.ts finds the witness). In the design where a read section takes the
// lock row's share lock, a durable reader is busy while it holds: the same search finds no witness.
describe('negative control of readers sharing', () => {
  it('READ_SECTION_TAKES_ROW: no durable reader is ever granted beside a read section', async () => {
    const o = await verify({ defines: [...SECTIONS_SMALL, '-DWITNESS_SHARE', '-DREAD_SECTION_TAKES_ROW'] });
    console.log(summary('READ_SECTION_TAKES_ROW', o));
    expect(o.errors).toBe(0);
  });
});
