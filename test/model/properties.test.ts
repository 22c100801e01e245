import { describe, expect, it } from 'vitest';
import { summary, verify } from './spin.js';
import { SMALL, THREE_CLIENTS, TWO_CLIENTS_FAILOVER, TWO_CLIENTS_LOST_REPLIES } from './configs.js';

// Every run is exhaustive: Spin explores every interleaving of the bounded model. The safety runs
// check, at every commit, mutual exclusion, counts = live grants, the fence, no count given back
// twice, lost acquires settled right, lost commits reported right and reaping only of stale grants.
describe.concurrent('the lock protocol model, checked by Spin', () => {
  const safety: Array<[string, string[]]> = [
    [
      'safety, 2 clients, a lost reply (acquire, commit or release), crashes, reaper, operator',
      TWO_CLIENTS_LOST_REPLIES,
    ],
    ['safety, 2 clients, an asynchronous failover, crashes, reaper, operator', TWO_CLIENTS_FAILOVER],
    ['safety, 3 clients, crashes, reaper, operator', THREE_CLIENTS],
  ];
  for (const [name, defines] of safety) {
    it(name, async () => {
      const o = await verify({ defines });
      console.log(summary(name, o));
      expect(o.errors, o.trail.join('\n')).toBe(0);
    });
  }

  const progress: Array<[string, string]> = [
    ['progress under weak fairness: every stale grant is eventually released', 'stale_released'],
    ['progress under weak fairness: a free resource is eventually granted to a waiter', 'free_granted'],
  ];
  for (const [name, ltl] of progress) {
    it(name, async () => {
      const o = await verify({ defines: SMALL, ltl });
      console.log(summary(name, o));
      expect(o.errors, o.trail.join('\n')).toBe(0);
    });
  }
});
