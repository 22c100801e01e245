// Where the certification conflicts of a Group Replication multi-primary cluster end up: a 3-node
// cluster, 12 workers (4 per node) on two hot resources, fenced writes and reads under the lock.
// Prints operations, outcomes by error code, which transaction exhausted its retries, and the
// cluster's own conflict counters. Heavy (three mysqld): run alone.
// Usage: npx tsx bench/gr-conflicts.ts [seconds=40]
import type { Knex } from 'knex';
import { connectKnex, createDatabase } from '../harness/database.js';
import { migrate } from '../src/admin/migrate.js';
import { createLockManager, RwLockError } from '../src/index.js';
import { startGroupReplication } from '../test/support/group-replication.js';

const seconds = Number(process.argv[2] ?? 40);
const RESOURCES = ['hot-a', 'hot-b'];
const WORKERS_PER_NODE = 4;

const cluster = await startGroupReplication({ mode: 'multi-primary', log: (l) => console.error(`[gr] ${l}`) });
const knexes: Knex[] = [];
try {
  const db = 'rwl_gr_conflicts';
  await createDatabase(cluster.nodes[0]!.url, db);
  const first = connectKnex(cluster.nodes[0]!.url, db, { poolMax: 4 });
  knexes.push(first);
  await migrate(first);
  await first.raw('CREATE TABLE counters (id VARCHAR(16) PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB');
  for (const r of RESOURCES) await first.raw('INSERT INTO counters VALUES (?, 0)', [r]);
  // Every node has the schema before the workers start (the group applies in order).
  for (const n of cluster.nodes) {
    const k = connectKnex(n.url, db, { poolMax: WORKERS_PER_NODE + 2 });
    knexes.push(k);
    for (;;) {
      const [rows] = (await k.raw(
        "SELECT COUNT(*) AS c FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'counters'",
      )) as unknown as [Array<{ c: number }>];
      if (Number(rows[0]!.c) === 1) break;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const outcomes = new Map<string, number>();
  const exhausted = new Map<string, number>();
  let ops = 0;
  let writes = 0;
  const until = Date.now() + seconds * 1000;
  const started = performance.now();
  const latencies: number[] = [];
  await Promise.all(
    knexes.slice(1).flatMap((k, node) =>
      Array.from({ length: WORKERS_PER_NODE }, async (_, w) => {
        const locks = createLockManager({ knex: k, owner: `n${node}w${w}` });
        while (Date.now() < until) {
          const resource = RESOURCES[Math.floor(Math.random() * RESOURCES.length)]!;
          const t0 = performance.now();
          ops++;
          try {
            if (Math.random() < 0.7) {
              await locks.withWriteLock(
                resource,
                async (trx) => trx.raw('UPDATE counters SET n = n + 1 WHERE id = ?', [resource]),
                { waitMs: 30_000 },
              );
              writes++;
            } else {
              await locks.withReadLock(
                resource,
                async (trx) => trx.raw('SELECT n FROM counters WHERE id = ?', [resource]),
                { waitMs: 30_000 },
              );
            }
            outcomes.set('ok', (outcomes.get('ok') ?? 0) + 1);
          } catch (err) {
            const code =
              err instanceof RwLockError
                ? err.code
                : `raw ${(err as { errno?: number }).errno ?? (err as Error).message}`;
            outcomes.set(code, (outcomes.get(code) ?? 0) + 1);
            if (code === 'ERR_RWLOCK_CONFLICT') {
              const what = /^(.*) was rolled back/.exec((err as Error).message)?.[1] ?? '?';
              exhausted.set(what, (exhausted.get(what) ?? 0) + 1);
            }
          }
          latencies.push(performance.now() - t0);
        }
      }),
    ),
  );
  const elapsed = (performance.now() - started) / 1000;
  const [sum] = (await first.raw('SELECT SUM(n) AS n FROM counters')) as unknown as [Array<{ n: number }>];
  const conflicts: string[] = [];
  for (const n of cluster.nodes) {
    const k = knexes[n.index + 1]!;
    const [cert] = (await k.raw(
      'SELECT COUNT_CONFLICTS_DETECTED AS n FROM performance_schema.replication_group_member_stats WHERE MEMBER_ID = @@server_uuid',
    )) as unknown as [Array<{ n: number }>];
    conflicts.push(String(cert[0]?.n ?? '?'));
  }
  latencies.sort((a, b) => a - b);
  const q = (p: number): number =>
    Math.round(latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))]!);
  const conflicted = outcomes.get('ERR_RWLOCK_CONFLICT') ?? 0;
  console.log(
    JSON.stringify({
      seconds: Math.round(elapsed),
      ops,
      opsPerSec: Math.round(ops / elapsed),
      outcomes: Object.fromEntries(outcomes),
      conflictPercent: Number(((100 * conflicted) / ops).toFixed(2)),
      exhaustedIn: Object.fromEntries(exhausted),
      committedWrites: writes,
      counterSum: Number(sum[0]!.n),
      certificationConflictsPerNode: conflicts,
      latencyMs: { p50: q(0.5), p99: q(0.99), max: q(1) },
    }),
  );
} finally {
  await Promise.all(knexes.map((k) => k.destroy()));
  await cluster.stop();
}
