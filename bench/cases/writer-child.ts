// A writer in a process of its own (no shared in-process wait queue with the readers), for the
// writer-starvation case: every `everyMs` it waits for a write lock on the resource, holds it 1 ms,
// releases, and reports every wait to the parent over IPC.
import { setTimeout as sleep } from 'node:timers/promises';
import { connectKnex } from '../../harness/database.js';
import { createLockManager } from '../../src/index.js';

const [url, database, resourceId, durationMs, everyMs, intentMs, waitMs] = process.argv.slice(2);
if (!url || !database || !resourceId || !durationMs || !everyMs || !intentMs || !waitMs) {
  throw new Error('usage: writer-child url db resource durationMs everyMs writerIntentMs waitMs');
}
const knex = connectKnex(url, database, { poolMax: 4 });
const locks = createLockManager({ knex, writerIntentMs: Number(intentMs) });
const waits: number[] = [];
let timeouts = 0;
const end = Date.now() + Number(durationMs);
process.send?.({ ready: true });
while (Date.now() < end) {
  await sleep(Number(everyMs) * (0.5 + Math.random()));
  const t0 = performance.now();
  try {
    const grant = await locks.acquireWrite(resourceId, { waitMs: Number(waitMs) });
    waits.push(performance.now() - t0);
    await sleep(1);
    await grant.release();
  } catch (err) {
    if ((err as Error).name !== 'LockTimeoutError') throw err;
    timeouts++;
  }
}
await knex.destroy();
process.send?.({ waits, timeouts });
