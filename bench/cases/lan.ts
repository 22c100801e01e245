// The same three operations as on loopback — the plain transaction, the section, and the Redis lock
// around the plain transaction — with a network round trip between the client and both servers
// (bench/lib/latency.ts), as on a LAN. On loopback the client and the server share 2 cores, so the
// cases are judged by CPU; across a network they are judged by round trips: a section sends the
// plain transaction's 3, the Redis lock + transaction 5 (acquire, BEGIN, UPDATE, COMMIT, release).
import type { Knex } from 'knex';
import type { Redis } from 'ioredis';
import { connectKnex } from '../../harness/database.js';
import { createLockManager, type LockManager } from '../../src/index.js';
import type { Family, RoundCase, SkippedCase } from '../lib/family.js';
import { startLatencyProxy, type LatencyProxy } from '../lib/latency.js';
import type { Target } from '../lib/targets.js';
import { businessUpdate } from './fenced.js';

/** Round trips added, ms: a fast LAN and a typical one within a data centre. */
const ROUND_TRIPS_MS = [0.25, 0.5] as const;
const SECTION = { section: true } as const;
const MUTEX_OPTIONS = { lockTimeout: 10_000, refreshInterval: 0, acquireAttemptsLimit: 1 } as const;

const LOCAL = new Set(['127.0.0.1', 'localhost', '[::1]']);
const slug = (ms: number): string => `lan-${ms}ms`;

const opened: Array<{ stop(): Promise<void> }> = [];

const targets: Target[] = [];
for (const ms of ROUND_TRIPS_MS)
  for (const c of [1, 16]) {
    targets.push({
      id: `${slug(ms)}/section-redis-txn c=${c}`,
      label: `${ms} ms round trip: section ÷ (Redis lock + plain txn) (distinct)`,
      of: { case: `${slug(ms)}.section`, c },
      per: { case: `${slug(ms)}.redis.txn`, c },
      ...(ms === 0.5 && c === 1 ? { atLeast: 1.2 } : {}),
    });
    targets.push({
      id: `${slug(ms)}/section-plain c=${c}`,
      label: `${ms} ms round trip: section ÷ plain txn (distinct)`,
      of: { case: `${slug(ms)}.section`, c },
      per: { case: `${slug(ms)}.plain.txn`, c },
    });
  }

async function redisThrough(port: number): Promise<Redis> {
  const { Redis } = await import('ioredis');
  const client = new Redis({
    host: '127.0.0.1',
    port,
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    retryStrategy: () => null,
  });
  await client.connect();
  await client.ping();
  return client;
}

export const lan: Family = {
  groups: ['lan'],
  roundCases: async ({ server, dbName, knex: direct }) => {
    const labels = ROUND_TRIPS_MS.flatMap((ms) => [
      { id: `${slug(ms)}.ping`, label: `${ms} ms RTT: SELECT 1 through knex` },
      { id: `${slug(ms)}.plain.txn`, label: `${ms} ms RTT: plain knex transaction, same UPDATE, distinct` },
      { id: `${slug(ms)}.section`, label: `${ms} ms RTT: section withWriteLock + 1-row UPDATE, distinct` },
      { id: `${slug(ms)}.redis.txn`, label: `${ms} ms RTT: Redis lock (Mutex; unsafe, unfenced) + plain knex txn` },
    ]);
    const skipAll = (skip: string): SkippedCase[] => labels.map((l) => ({ ...l, group: 'lan', skip }));
    const mysqlUrl = new URL(server.url);
    const redisUrl = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
    if (!LOCAL.has(mysqlUrl.hostname) || !LOCAL.has(redisUrl.hostname))
      return skipAll('the servers are not on this machine: the proxy adds latency on loopback only');
    const cases: Array<RoundCase | SkippedCase> = [
      {
        id: 'lan.direct.ping',
        group: 'lan',
        label: 'loopback: SELECT 1 through knex',
        op: () => direct.raw('SELECT 1').then(() => true),
        concurrency: [1],
      },
    ];
    for (const ms of ROUND_TRIPS_MS) {
      let proxies: LatencyProxy[];
      let knex: Knex | undefined;
      let locks: LockManager | undefined;
      let redis: Redis | undefined;
      try {
        proxies = [
          await startLatencyProxy(Number(mysqlUrl.port || 3306), ms),
          await startLatencyProxy(Number(redisUrl.port || 6379), ms),
        ];
        opened.push(...proxies);
        const through = new URL(server.url);
        through.hostname = '127.0.0.1';
        through.port = String(proxies[0]!.port);
        knex = connectKnex(through.toString(), dbName, { poolMax: 20 });
        locks = createLockManager({ knex });
        redis = await redisThrough(proxies[1]!.port);
      } catch (err) {
        cases.push(...skipAll(`no latency proxy: ${(err as Error).message}`).filter((c) => c.id.startsWith(slug(ms))));
        continue;
      }
      const [k, l, r] = [knex, locks, redis];
      opened.push({ stop: () => l.close() }, { stop: () => k.destroy() }, { stop: async () => void (await r.quit()) });
      const { Mutex } = await import('redis-semaphore');
      const ratios = [
        { name: 'x plain tx', to: `${slug(ms)}.plain.txn` },
        { name: 'x Redis lock + txn', to: `${slug(ms)}.redis.txn` },
      ];
      cases.push(
        {
          // What the proxy really adds: this p50 less the direct one (summary).
          id: `${slug(ms)}.ping`,
          group: 'lan',
          label: labels.find((x) => x.id === `${slug(ms)}.ping`)!.label,
          op: () => k.raw('SELECT 1').then(() => true),
          concurrency: [1],
        },
        {
          id: `${slug(ms)}.plain.txn`,
          group: 'lan',
          label: labels.find((x) => x.id === `${slug(ms)}.plain.txn`)!.label,
          op: (w) => k.transaction((trx) => businessUpdate(trx, w + 1)).then(() => true),
        },
        {
          id: `${slug(ms)}.section`,
          group: 'lan',
          label: labels.find((x) => x.id === `${slug(ms)}.section`)!.label,
          op: (w) => l.withWriteLock(`lan-${ms}-${w}`, (trx) => businessUpdate(trx, w + 1), SECTION).then(() => true),
          ratios,
        },
        {
          id: `${slug(ms)}.redis.txn`,
          group: 'lan',
          label: labels.find((x) => x.id === `${slug(ms)}.redis.txn`)!.label,
          op: async (w) => {
            const m = new Mutex(r, `bench-lan-${ms}-${w}`, MUTEX_OPTIONS);
            if (!(await m.tryAcquire())) return false;
            try {
              await k.transaction((trx) => businessUpdate(trx, w + 1));
            } finally {
              await m.release();
            }
          },
          ratios: [{ name: 'x plain tx', to: `${slug(ms)}.plain.txn` }],
        },
      );
    }
    return cases;
  },
  summary: (results) =>
    ROUND_TRIPS_MS.map((ms) => {
      const through = results.value(`${slug(ms)}.ping`, 'p50', 1);
      const direct = results.value('lan.direct.ping', 'p50', 1);
      return through === undefined || direct === undefined
        ? `latency proxy (${ms} ms asked): not measured`
        : `latency proxy (${ms} ms asked): a SELECT 1 round trip took ${(through - direct).toFixed(3)} ms more than on loopback (p50)`;
    }),
  close: async () => {
    // In reverse: clients before the proxies they talk through.
    for (const o of opened.splice(0).reverse()) await o.stop().catch(() => undefined);
  },
  targets,
};
