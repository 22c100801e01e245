// A worker OS process, forked by the supervisor with its settings as JSON in argv[2]. It runs the
// scenario's load until told to stop, reports counters every 250 ms, and exits 0 when done.
import knexFactory from 'knex';
import { createLockManager } from '../src/index.js';
import { runLendingLoops } from './lending/worker-loop.js';
import {
  ZERO_COUNTS,
  type FaultKind,
  type FromWorker,
  type OpCounts,
  type ToWorker,
  type WorkerSettings,
} from './messages.js';
import { seededRandom } from './random.js';
import { runStockLoops } from './stock/worker-loop.js';

const settings = JSON.parse(process.argv[2] ?? '{}') as WorkerSettings;

function send(msg: FromWorker): void {
  if (process.connected) process.send?.(msg);
}

let stopping = false;
let armed: FaultKind | null = null;
let answerBank: (() => void) | null = null;

process.on('message', (msg: ToWorker) => {
  if (msg.type === 'stop') stopping = true;
  else if (msg.type === 'arm') armed = msg.fault;
  else if (msg.type === 'bank-answer') {
    answerBank?.();
    answerBank = null;
  }
});
// The supervisor going away must not leave orphans hammering the database.
process.on('disconnect', () => {
  stopping = true;
});

/** Counters since the last flush; the supervisor adds the deltas up. */
const counts: OpCounts = { ...ZERO_COUNTS };
function flushCounts(): void {
  send({ type: 'counts', counts: { ...counts } });
  Object.assign(counts, ZERO_COUNTS);
}

async function main(): Promise<void> {
  const db = knexFactory({
    client: 'mysql2',
    connection: settings.dbUrl,
    pool: { min: 0, max: settings.concurrency + 2 },
  });
  const locks = createLockManager({ knex: db, owner: settings.name });
  const rnd = seededRandom(settings.seed);
  const timer = setInterval(flushCounts, 250);
  send({ type: 'ready' });
  try {
    const common = { db, locks, name: settings.name, rnd, counts, send, stopping: () => stopping };
    if (settings.scenario === 'lending') {
      await runLendingLoops(
        {
          ...common,
          loans: settings.loans,
          investors: settings.investors,
          takeArmed: () => {
            const fault = armed;
            armed = null;
            return fault;
          },
          // Set up before the fault point is announced, so the answer cannot arrive first.
          bankAnswer: () => new Promise<void>((resolve) => (answerBank = resolve)),
        },
        settings.concurrency,
      );
    } else {
      await runStockLoops({ ...common, unsafe: settings.unsafe }, settings.concurrency);
    }
  } finally {
    clearInterval(timer);
    flushCounts();
    await db.destroy();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    send({ type: 'error', message: `worker ${settings.name} failed: ${(err as Error).stack ?? String(err)}` });
    process.exit(1);
  },
);
