// Waiters in a process of their own for the hand-over cases: on each 'phase' message, `waiters`
// loops wait for the write lock on the resource, hold it `holdMs`, release it, stay away `awayMs`,
// until `endAt`; then every grant goes back to the parent. Times are absolute (timeOrigin + now),
// so grants and releases of several processes on this machine can be put in one order.
import { setTimeout as sleep } from 'node:timers/promises';
import { connectKnex } from '../../harness/database.js';
import { createLockManager } from '../../src/index.js';

export interface Phase {
  resource: string;
  /** 'grant' (default): acquireWrite, hold, release. 'section': withWriteLock `{ section: true }`, holding inside its transaction. */
  via?: 'grant' | 'section';
  waiters: number;
  holdMs: number;
  awayMs: number;
  endAt: number;
}

/** One grant: asked at, granted at, release sent at, release returned at (absolute ms). */
export type GrantTimes = [asked: number, granted: number, releasing: number, released: number];

const [url, database] = process.argv.slice(2);
if (!url || !database) throw new Error('usage: handover-child url database');
const knex = connectKnex(url, database, { poolMax: 12 });
const locks = createLockManager({ knex });
const now = (): number => performance.timeOrigin + performance.now();

async function run(phase: Phase): Promise<GrantTimes[]> {
  const grants: GrantTimes[] = [];
  await Promise.all(
    Array.from({ length: phase.waiters }, async () => {
      while (now() < phase.endAt) {
        const asked = now();
        if (phase.via === 'section') {
          let granted = 0;
          let releasing = 0;
          await locks.withWriteLock(
            phase.resource,
            async () => {
              granted = now();
              await sleep(phase.holdMs);
              releasing = now();
            },
            { section: true, waitMs: 60_000 },
          );
          grants.push([asked, granted, releasing, now()]);
        } else {
          const g = await locks.acquireWrite(phase.resource, { waitMs: 60_000 });
          const granted = now();
          await sleep(phase.holdMs);
          const releasing = now();
          await g.release();
          grants.push([asked, granted, releasing, now()]);
        }
        if (phase.awayMs > 0) await sleep(phase.awayMs);
      }
    }),
  );
  return grants;
}

process.on('message', (m: { phase?: Phase; stop?: true }) => {
  if (m.stop) void knex.destroy().then(() => process.exit(0));
  else if (m.phase)
    void run(m.phase).then(
      (grants) => process.send?.({ grants }),
      (err: Error) => {
        console.error(err);
        process.exit(1);
      },
    );
});
process.send?.({ ready: true });
