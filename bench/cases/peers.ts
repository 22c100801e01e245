// Other locks a team might reach for: MySQL GET_LOCK (not durable, tied to a connection) and a
// Redis lock (redis-semaphore on one instance), skipped with a note when Redis is not reachable.
import type { Family, RoundCase } from '../lib/family.js';

let redis: { quit(): Promise<unknown> } | undefined;
/** Why the Redis peer was skipped, if it was. */
let redisNote = '';

export const peers: Family = {
  groups: ['peers'],
  roundCases: async ({ raws, log }) => {
    const cases: RoundCase[] = [
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
    const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
    try {
      const { Redis } = await import('ioredis');
      const { Mutex } = await import('redis-semaphore');
      const client = new Redis(redisUrl, {
        lazyConnect: true,
        maxRetriesPerRequest: 1,
        retryStrategy: () => null,
        connectTimeout: 2000,
      });
      await client.connect();
      await client.ping();
      redis = client;
      cases.push({
        id: 'peer.redis',
        group: 'peers',
        label: 'peer: Redis lock (redis-semaphore Mutex, 1 instance)',
        op: async (w) => {
          const m = new Mutex(client, `bench-${w}`, {
            lockTimeout: 10_000,
            refreshInterval: 0,
            acquireAttemptsLimit: 1,
          });
          if (!(await m.tryAcquire())) return false;
          await m.release();
        },
      });
    } catch (err) {
      redisNote = `Redis not reachable at ${redisUrl} (${(err as Error).message}): Redis peer skipped`;
      log(`[bench] ${redisNote}`);
    }
    return cases;
  },
  summary: () => (redisNote ? [redisNote] : []),
  close: async () => void (await redis?.quit().catch(() => undefined)),
  targets: [],
};
