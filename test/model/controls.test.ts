import { describe, expect, it } from 'vitest';
import { summary, verify } from './spin.js';
import { SMALL, THREE_CLIENTS, TWO_CLIENTS_FAILOVER, TWO_CLIENTS_LOST_REPLIES } from './configs.js';

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
  { defect: 'acquire UPDATE without resource_id', define: 'NO_RESOURCE_ID', defines: SMALL, breaks: 'db.w1==0' },
  { defect: 'a pre-check SELECT decides', define: 'PRECHECK', defines: SMALL, breaks: 'nw<=1' },
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
];

describe.concurrent('negative controls: each defect gives a counterexample', () => {
  for (const c of controls) {
    it(`${c.define}: ${c.defect}`, async () => {
      const o = await verify({ defines: [...c.defines, `-D${c.define}`], ltl: c.ltl, control: true });
      console.log(`${summary(c.define, o)}\ncounterexample (${o.trail.length} lines):\n${o.trail.join('\n')}`);
      expect(o.errors).toBeGreaterThanOrEqual(1);
      expect(o.output + o.trail.join('\n')).toContain(c.breaks);
    });
  }
});
