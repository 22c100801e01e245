// Other locks a team might reach for: MySQL GET_LOCK (not durable, tied to a connection) and a
// Redis lock (redis-semaphore's Mutex on one Redis), alone and around the same plain transaction the
// section cases wrap. Redis is optional: REDIS_URL, else 127.0.0.1:6379; when neither answers, the
// Redis cases are skipped with the reason, and so are the targets that read them.
//
// The Redis lock around a transaction is unsafe and unfenced, and is measured as such: its key
// expires after `lockTimeout` whatever the holder is doing (nothing refreshes it here), and the
// transaction does not check that the lock is still held when it commits, so a holder paused past
// the expiry commits alongside the next one. It is the cost a user compares a section with.
import type { Redis } from 'ioredis';
import type { Family, RoundCase, SkippedCase } from '../lib/family.js';
import { businessUpdate } from './fenced.js';

let redis: Redis | undefined;

/** The same options for every Redis case: one attempt (the resources are distinct), no refresh timer. */
const MUTEX_OPTIONS = { lockTimeout: 10_000, refreshInterval: 0, acquireAttemptsLimit: 1 } as const;

async function connectRedis(url: string): Promise<Redis> {
  const { Redis } = await import('ioredis');
  const client = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    retryStrategy: () => null,
    connectTimeout: 2000,
  });
  // connect() rejects with "Connection is closed."; the cause (e.g. ECONNREFUSED) comes as an event
  let cause: Error | undefined;
  client.on('error', (err: Error) => (cause ??= err));
  try {
    await client.connect();
    await client.ping();
    return client;
  } catch (err) {
    client.disconnect();
    throw cause ?? err;
  }
}

export const peers: Family = {
  groups: ['peers'],
  roundCases: async ({ raws, knex }) => {
    const cases: Array<RoundCase | SkippedCase> = [
      {
        id: 'peer.get_lock',
        group: 'peers',
        label: 'peer: MySQL GET_LOCK/RELEASE_LOCK',
        op: async (w) => {
          const [rows] = await raws[w]!.query('SELECT GET_LOCK(?, 0) AS got', [`bench-${w}`]);
          if (Number((rows as Array<{ got: number }>)[0]?.got) !== 1) return false;
          await raws[w]!.query('SELECT RELEASE_LOCK(?)', [`bench-${w}`]);
        },
      },
    ];
    const redisCases = [
      { id: 'peer.redis', label: 'peer: Redis lock (redis-semaphore Mutex, 1 Redis)' },
      {
        id: 'peer.redis.txn',
        label: 'peer: Redis lock (Mutex, 1 Redis; unsafe, unfenced) + plain knex txn, same UPDATE, distinct',
      },
    ];
    const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
    try {
      redis = await connectRedis(redisUrl);
    } catch (err) {
      const skip = `Redis not reachable at ${redisUrl} (${(err as Error).message})`;
      return [...cases, ...redisCases.map((c) => ({ ...c, group: 'peers', skip }))];
    }
    const { Mutex } = await import('redis-semaphore');
    const client = redis;
    cases.push(
      {
        ...redisCases[0]!,
        group: 'peers',
        op: async (w) => {
          const m = new Mutex(client, `bench-${w}`, MUTEX_OPTIONS);
          if (!(await m.tryAcquire())) return false;
          await m.release();
        },
      },
      {
        ...redisCases[1]!,
        group: 'peers',
        op: async (w) => {
          const m = new Mutex(client, `bench-txn-${w}`, MUTEX_OPTIONS);
          if (!(await m.tryAcquire())) return false;
          try {
            await knex.transaction((trx) => businessUpdate(trx, w + 1));
          } finally {
            await m.release();
          }
        },
        ratios: [{ name: 'x plain tx', to: 'plain.txn.distinct' }],
      },
    );
    return cases;
  },
  close: async () => void (await redis?.quit().catch(() => undefined)),
  targets: [],
};
