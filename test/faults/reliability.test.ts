// The reliability suite (issue 5). Worker processes use the public API against servers this file
// starts itself; faults are injected until each kind is proven; the checker decides from the
// histories and the final database state. Then the same workload runs against deliberately broken
// variants, which the checker must catch, and against 3-node clusters: MariaDB Galera,
// MySQL Group Replication single-primary (workers follow the primary through a failover) and multi-primary,
// and a MariaDB primary with an asynchronous replica promoted when the primary is killed.
// FAULTS_TARGET lowers the per-kind target for a quick local iteration (the floor then fails).
// covers: src/index.ts, test/faults/checker.ts
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectKnex, createDatabase, parseMysqlUrl } from '../../harness/database.js';
import { startGalera, galeraMissing, type GaleraCluster } from '../support/galera.js';
import { startGroupReplication, type GroupCluster } from '../support/group-replication.js';
import { gtidSeq, startAsyncReplication, type AsyncPair } from '../support/replication.js';
import { FaultProxy } from '../support/proxy.js';
import { findBinary, freePort, initDataDir, runServer, stopProcess, type RunningServer } from '../../harness/server.js';
import { migrate } from '../../src/admin/index.js';
import { RELEASED_BY } from '../../src/types.js';
import { createBusinessTables } from './business.js';
import type { CheckName } from './checker.js';
import { judgeFailover, type FailoverLosses, type LossWindow } from './failover.js';
import { now, type FaultKind } from './history.js';
import {
  closeAdminPools,
  runScenario,
  type FaultContext,
  type ScenarioOptions,
  type ScenarioResult,
  type Target,
} from './scenario.js';
import { businessResources } from './mix.js';
import { writeSummary, type NegativeControl } from './summary.js';

const MIN_PER_KIND = 20;
const MIN_LOCK_OPS = 2000;
const TARGET = Number(process.env.FAULTS_TARGET ?? 22);
const STALE_MS = 2000;
const REAPER_MS = 500;

const suiteStarted = now();
const binary = findBinary(['mariadbd', 'mysqld']);
const work = mkdtempSync(join(tmpdir(), 'rwlock-faults-'));
let server: RunningServer | undefined;
let serverUrl = '';
let proxy: FaultProxy | undefined;
const runs: ScenarioResult[] = [];
const negatives: NegativeControl[] = [];
let floor = {
  lockOps: 0,
  minLockOps: MIN_LOCK_OPS,
  minPerKind: MIN_PER_KIND,
  kinds: {} as Record<string, number>,
  ok: false,
};

async function database(name: string, url: string, resources: string[]): Promise<void> {
  await createDatabase(url, name);
  const k = connectKnex(url, name);
  try {
    await migrate(k);
    await createBusinessTables(k, resources);
  } finally {
    await k.destroy();
  }
}

/**
 * Live grants as node `i` reports them, polled until there is one (or `timeoutMs` passes): a node
 * kill is aimed at a moment with locks held, which a kill at a fixed time can miss.
 */
async function whenGrantsLive(ctx: FaultContext, i: number, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const n = await ctx.liveGrants(i);
    if (n > 0 || ctx.stopping || Date.now() > deadline) return n;
    await sleep(10);
  }
}

function base(
  name: string,
  t: Target,
): Omit<ScenarioOptions, 'processFaults' | 'required' | 'minDurationMs' | 'maxDurationMs'> {
  return {
    name,
    database: `faults_${name.replace(/[^a-z0-9]/gi, '_')}`,
    dir: work,
    workerTargets: [t],
    reaperTargets: [t],
    main: t,
    workers: 6,
    reapers: 3,
    staleAfterMs: STALE_MS,
    reaperPeriodMs: REAPER_MS,
    resources: ['loan-1', 'loan-2', 'loan-3', 'loan-4', 'loan-5', 'loan-6', 'loan-7', 'loan-8'],
    slowResources: ['slow-1', 'slow-2', 'slow-3', 'slow-4'],
    slowFraction: 0.1,
    readFraction: 0.3,
    transitionFraction: 0.15,
    sectionFraction: 0.15,
    multiFraction: 0.1,
    // Semaphores of 2 permits, used by permit operations alone: "never more than 2 holders" is judged on each.
    semaphores: ['sem-1', 'sem-2'],
    permitLimit: 2,
    permitFraction: 0.1,
    // sem-2's limit changes every few seconds, as a redeploy would change it mid-run.
    changingLimits: { semaphores: ['sem-2'], limits: [2, 3], stepMs: 4000 },
    // A semaphore to permit operations, a write lock to every other armed write (killed holding it).
    flipResources: ['flip-1'],
    // Short leases on a third of the scoped operations (and on armed writes that hold no flip
    // resource): stale at the lease plus the grace, well before the cutoff, once their process is
    // killed or stopped.
    leaseMs: 500,
    leaseFraction: 0.3,
    faultLoops: 2,
    livenessSlackMs: 1500,
    log: (line) => console.log(`[faults] ${line}`),
  };
}

beforeAll(async () => {
  if (!binary) throw new Error('the reliability suite needs mariadbd (apt-get install mariadb-server)');
  const datadir = join(work, 'server');
  initDataDir(binary, datadir);
  server = await runServer(binary, datadir, await freePort(), ['--innodb-buffer-pool-size=128M']);
  serverUrl = `mysql://root@127.0.0.1:${server.port}/`;
  proxy = new FaultProxy('127.0.0.1', server.port);
  await proxy.listen();
});

afterAll(async () => {
  await closeAdminPools();
  await proxy?.close();
  if (server) await stopProcess(server.process, 'SIGKILL');
  // Run results go to the ignored .tmp/ so a run leaves the tree clean; docs quote a chosen run.
  const text = writeSummary(join(import.meta.dirname, '..', '..', '.tmp', 'faults-summary.md'), {
    when: new Date().toISOString(),
    durationMs: now() - suiteStarted,
    server: `${binary ?? '?'} (throwaway, single node), a 3-node MariaDB Galera cluster and 3-node MySQL 9.7 Group Replication clusters (single- and multi-primary) and a MariaDB primary with an asynchronous replica`,
    runs,
    negatives,
    floor,
  });
  console.log(`\n${text}`);
  if (process.env.FAULTS_KEEP) console.log(`[faults] histories kept in ${work}`);
  else rmSync(work, { recursive: true, force: true });
});

/**
 * A lane whose workload has a kind of operation (durable writes and reads, and permits where it has
 * semaphores) saw at least one of them succeed: zero violations over operations that all failed
 * (a lane set up without its semaphores' rows, say) would prove nothing about that kind.
 */
function expectEveryKindGranted(r: { check: { ops: Record<string, number> } }): void {
  const ops = r.check.ops;
  const kinds = new Set(Object.keys(ops).map((k) => k.split('.')[0]!));
  for (const kind of kinds) expect(ops[`${kind}.ok`] ?? 0, `${kind} operations that succeeded`).toBeGreaterThan(0);
}

/**
 * A lane's record met what changes a resource under it: leased grants, and a semaphore whose limit
 * changed; on a lane whose kills are aimed at operations, also leased grants and flip resources
 * left stale by a kill, the next holder of a flip resource of the other kind.
 */
function expectMixMet(r: ScenarioResult, aimedKills: boolean): void {
  const why = r.notes.join('\n');
  expect(r.mix.leased, why).toBeGreaterThan(0);
  expect(r.mix.limitChanges, why).toBeGreaterThan(0);
  if (!aimedKills) return;
  expect(r.mix.leasedStale, why).toBeGreaterThan(0);
  expect(r.mix.kindChangesAfterStale, why).toBeGreaterThan(0);
}

describe('reliability under faults', () => {
  it('single node: no violations under every fault kind, each proven; the floor is met', async () => {
    const direct: Target = { serverUrl, adminUrl: serverUrl };
    const viaProxy: Target = { serverUrl: `mysql://root@127.0.0.1:${proxy!.port}/`, adminUrl: serverUrl };
    const o = base('single-node', viaProxy);
    await database(o.database, serverUrl, businessResources(o));
    // mariadbd SIGKILLed (with live grants) and restarted on the same datadir and port.
    const serverKills = async (ctx: FaultContext): Promise<void> => {
      while (!ctx.stopping) {
        await sleep(1500 + Math.random() * 1500);
        if (ctx.stopping || ctx.proven('server-sigkill') >= TARGET) continue;
        const live = await ctx.liveGrants(0);
        await stopProcess(server!.process, 'SIGKILL');
        server = await runServer(binary!, server!.datadir, server!.port, ['--innodb-buffer-pool-size=128M']);
        ctx.record({ t: now(), kind: 'server-sigkill', proven: live > 0, detail: `${live} live grants` });
      }
    };
    const r = await runScenario({
      ...o,
      reaperTargets: [direct],
      main: direct,
      proxy,
      processFaults: [
        'sigkill-before',
        'sigkill-during',
        'sigkill-after',
        'sigstop-past-cutoff',
        'kill-connection',
        'commit-reply-lost',
      ],
      extraFaults: [serverKills],
      required: {
        'sigkill-before': TARGET,
        'sigkill-during': TARGET,
        'sigkill-after': TARGET,
        'sigstop-past-cutoff': TARGET,
        'kill-connection': TARGET,
        'commit-reply-lost': TARGET,
        'server-sigkill': TARGET,
        'concurrent-reapers': TARGET,
        'reaper-vs-commit': TARGET,
      },
      minDurationMs: TARGET >= MIN_PER_KIND ? 60_000 : 10_000,
      maxDurationMs: 330_000,
    });
    runs.push(r);
    const kinds: Record<string, number> = {};
    for (const [k, f] of Object.entries(r.faults)) kinds[k] = f.proven;
    const expected: FaultKind[] = [
      'sigkill-before',
      'sigkill-during',
      'sigkill-after',
      'sigstop-past-cutoff',
      'kill-connection',
      'commit-reply-lost',
      'server-sigkill',
      'concurrent-reapers',
      'reaper-vs-commit',
    ];
    floor = {
      ...floor,
      lockOps: r.check.lockOps,
      kinds,
      ok: r.check.lockOps >= MIN_LOCK_OPS && expected.every((k) => (kinds[k] ?? 0) >= MIN_PER_KIND),
    };
    expect(r.check.violations).toEqual([]);
    expectEveryKindGranted(r);
    expectMixMet(r, true);
    expect(r.liveAgain).toBe(true);
    expect(r.check.lockOps).toBeGreaterThanOrEqual(MIN_LOCK_OPS);
    for (const k of expected) expect(kinds[k] ?? 0, `${k} proven`).toBeGreaterThanOrEqual(MIN_PER_KIND);
  });

  // No reaper process at all: crashed and paused holders' grants go only by the workers' own
  // self-healing acquires, and once the faults stop every resource is write-locked again, and free,
  // within the cutoff. Run alone: npx vitest run -c vitest.faults.config.ts test/faults/reliability.test.ts -t "no reaper".
  it('single node, no reaper process: no violations; crashed holders’ resources reacquired within the cutoff', async () => {
    const t: Target = { serverUrl, adminUrl: serverUrl };
    const o = { ...base('no-reaper', t), reapers: 0 };
    await database(o.database, serverUrl, businessResources(o));
    const required = Math.min(TARGET, 10);
    const r = await runScenario({
      ...o,
      processFaults: ['sigkill-before', 'sigkill-during', 'sigkill-after', 'sigstop-past-cutoff'],
      required: {
        'sigkill-during': required,
        'sigkill-after': required,
        'sigstop-past-cutoff': required,
      },
      minDurationMs: 30_000,
      maxDurationMs: 180_000,
    });
    runs.push(r);
    expect(r.check.violations).toEqual([]);
    expectEveryKindGranted(r);
    expectMixMet(r, true);
    expect(r.liveAgain).toBe(true);
    for (const k of ['sigkill-during', 'sigkill-after', 'sigstop-past-cutoff'])
      expect(r.faults[k]?.proven ?? 0, `${k} proven`).toBeGreaterThanOrEqual(required);
    expect(r.freeAfterMs, 'free after the last holder exited').not.toBeNull();
    expect(r.freeAfterMs!).toBeLessThanOrEqual(r.livenessBoundMs);
    // Every grant a killed or paused holder left was released as the reaper would, with no reaper running.
    expect(r.reaped).toBeGreaterThanOrEqual(
      (r.faults['sigkill-during']?.proven ?? 0) + (r.faults['sigstop-past-cutoff']?.proven ?? 0),
    );
  });

  const controls: Array<{ name: string; defect: string; tweak: Partial<ScenarioOptions>; expect: CheckName[] }> = [
    {
      name: 'fence-off',
      defect: 'business commits without the guarded log-row UPDATE; release separately',
      tweak: {
        workerVariant: 'nofence',
        processFaults: ['sigstop-past-cutoff'],
        required: { 'sigstop-past-cutoff': 6 },
      },
      expect: ['fence', 'lost-update'],
    },
    {
      name: 'reaper-unguarded',
      defect: 'reference-style reaper: no version/status check between reading candidates and releasing them',
      tweak: {
        reaperVariant: 'reference',
        referenceDelayMs: 400,
        slowFraction: 0.35,
        processFaults: [],
        required: {},
      },
      expect: ['overlap', 'invariant', 'lost-update', 'read-stability'],
    },
    {
      name: 'release-unguarded',
      defect: 'reference defect 5: release decrements even if the grant was already reaped',
      tweak: {
        workerVariant: 'release-unguarded',
        processFaults: ['sigstop-past-cutoff'],
        required: { 'sigstop-past-cutoff': 6 },
      },
      expect: ['overlap', 'invariant', 'lost-update', 'read-stability'],
    },
    {
      name: 'downgrade-split',
      defect: 'a downgrade done as release-then-acquire-read: a waiting writer gets in between',
      tweak: {
        workerVariant: 'downgrade-split',
        transitionFraction: 0.5,
        minDurationMs: 15_000,
        slowFraction: 0,
        processFaults: [],
        required: {},
      },
      expect: ['read-stability'],
    },
    {
      name: 'section-unguarded',
      defect:
        "a one-commit section that takes its row with a plain read: no guard, no row lock (the library's test switch testSwitches.section.guard = false)",
      tweak: {
        workerVariant: 'section-unguarded',
        minDurationMs: 12_000,
        sectionFraction: 0.5,
        slowFraction: 0,
        processFaults: [],
        required: {},
      },
      expect: ['overlap', 'lost-update'],
    },
    {
      name: 'multi-first-fence',
      defect:
        "a two-resource group whose one fence statement covers only its first grant (the library's test switch testSwitches.group.fenceFirstOnly): it commits on a resource whose grant was reaped",
      tweak: {
        workerVariant: 'multi-first-fence',
        minDurationMs: 12_000,
        // Every operation names both loans and is slow (the variant): two workers, so each gets both often.
        workers: 2,
        multiFraction: 1,
        processFaults: [],
        required: {},
      },
      expect: ['fence'],
    },
    {
      name: 'multi-caller-order',
      defect:
        "two-resource groups taken in the order the caller named them, not by resource bytes (the library's test switch testSwitches.group.callerOrder)",
      tweak: {
        workerVariant: 'multi-caller-order',
        minDurationMs: 12_000,
        multiFraction: 0.8,
        slowFraction: 0,
        processFaults: [],
        required: {},
      },
      expect: ['deadlock'],
    },
    {
      name: 'permit-unguarded',
      defect:
        "a permit acquire whose limit check reads the count, then adds to it with an UPDATE that checks nothing (the library's test-only testSwitches.acquire.permitUnguarded)",
      tweak: {
        workerVariant: 'permit-unguarded',
        minDurationMs: 12_000,
        semaphores: ['sem-1'],
        permitFraction: 0.8,
        slowFraction: 0,
        processFaults: [],
        required: {},
      },
      expect: ['permits'],
    },
  ];
  for (const c of controls) {
    it(`negative control ${c.name}: the checker reports violations`, async () => {
      const t: Target = { serverUrl, adminUrl: serverUrl };
      const o = { ...base(`negative-${c.name}`, t), workers: 4, resources: ['loan-1', 'loan-2'], faultLoops: 1 };
      await database(o.database, serverUrl, businessResources(o));
      const r = await runScenario({
        ...o,
        minDurationMs: 25_000,
        maxDurationMs: 60_000,
        ...c.tweak,
      } as ScenarioOptions);
      const checks = [...new Set(r.check.violations.map((v) => v.check))];
      negatives.push({
        name: c.name,
        defect: c.defect,
        caught: checks.some((k) => c.expect.includes(k)),
        checks,
        example: r.check.violations.find((v) => c.expect.includes(v.check))?.detail ?? '-',
        faults: r.faults,
      });
      expect(
        checks.filter((k) => c.expect.includes(k)),
        `violations: ${JSON.stringify(r.check.violations.slice(0, 5))}`,
      ).not.toEqual([]);
    });
  }

  it('galera: 3 nodes, one SIGKILLed mid-run and restarted; no violations; the lock is live after the rejoin', async () => {
    const missing = galeraMissing();
    if (missing) throw new Error(missing);
    let cluster: GaleraCluster | undefined;
    try {
      cluster = await startGalera({ log: (l) => console.log(`[faults] ${l}`) });
      const targets: Target[] = cluster.nodes.map((n) => ({ serverUrl: n.url, adminUrl: n.url }));
      const o = { ...base('galera', targets[0]!), workers: 6, workerTargets: targets, reaperTargets: targets };
      await database(o.database, targets[0]!.serverUrl, businessResources(o));
      const c = cluster;
      const nodeKill = async (ctx: FaultContext): Promise<void> => {
        await sleep(15_000);
        if (ctx.stopping) return;
        const live = await whenGrantsLive(ctx, 2, 30_000);
        await c.kill(2);
        const killedAt = Date.now();
        await sleep(5_000);
        await c.restart(2);
        ctx.record({
          t: now(),
          kind: 'galera-node-sigkill',
          proven: live > 0,
          detail: `node 3 had ${live} live grants; back Synced after ${Date.now() - killedAt} ms`,
        });
      };
      const r = await runScenario({
        ...o,
        processFaults: ['sigkill-during', 'sigstop-past-cutoff', 'kill-connection'],
        faultLoops: 1,
        extraFaults: [nodeKill],
        required: { 'galera-node-sigkill': 1, 'sigkill-during': 5, 'sigstop-past-cutoff': 5, 'kill-connection': 5 },
        minDurationMs: 45_000,
        maxDurationMs: 150_000,
      });
      r.notes.push(`cluster size after the run: ${await c.clusterSize(0)}`);
      // Certification conflicts the nodes saw (the library retries a 1213 at COMMIT); node 3's counters restarted with it.
      let cert = 0;
      let bf = 0;
      for (const n of c.nodes) {
        const conn = await mysql.createConnection({ host: '127.0.0.1', port: n.port, user: 'root' });
        const [rows] = await conn.query(
          "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_local_cert_failures', 'wsrep_local_bf_aborts')",
        );
        await conn.end();
        for (const row of rows as Array<{ Variable_name: string; Value: string }>) {
          if (row.Variable_name === 'wsrep_local_cert_failures') cert += Number(row.Value);
          else bf += Number(row.Value);
        }
      }
      r.notes.push(
        `wsrep_local_cert_failures ${cert}, wsrep_local_bf_aborts ${bf} (summed over the nodes): transactions Galera aborted as conflicts, with zero violations`,
      );
      runs.push(r);
      expect(r.faults['galera-node-sigkill']?.proven).toBe(1);
      expect(r.check.violations).toEqual([]);
      expectEveryKindGranted(r);
      expectMixMet(r, false);
      expect(r.liveAgain).toBe(true);
    } finally {
      await cluster?.stop();
    }
  });

  // Group Replication (MySQL 9.7 from the harness's chroot). Same workload, checker and floors as
  // the Galera case; conflicts the group detected are read from the nodes, and no caller may see
  // one as a raw driver error (the library retries it, or ends with its typed error).
  const RAW_CONFLICTS = ['ER_LOCK_DEADLOCK', 'ER_TRANSACTION_ROLLBACK_DURING_COMMIT', 'ER_ERROR_DURING_COMMIT'];
  const grFloor = { 'sigkill-during': 5, 'sigstop-past-cutoff': 5, 'kill-connection': 5 } as const;

  /** Conflicts the group's certification rejected, and InnoDB deadlocks, as the nodes count them. */
  async function groupConflicts(c: GroupCluster): Promise<string> {
    const per: string[] = [];
    for (const n of c.nodes) {
      const conn = await mysql.createConnection({ host: '127.0.0.1', port: n.port, user: 'root' });
      try {
        const [cert] = await conn.query(
          'SELECT COUNT_CONFLICTS_DETECTED AS n FROM performance_schema.replication_group_member_stats WHERE MEMBER_ID = @@server_uuid',
        );
        const [dl] = await conn.query(
          "SELECT COUNT AS n FROM information_schema.INNODB_METRICS WHERE NAME = 'lock_deadlocks'",
        );
        per.push(
          `node ${n.index + 1}: ${Number((cert as Array<{ n: number }>)[0]?.n ?? 0)} certification conflicts, ${Number((dl as Array<{ n: number }>)[0]?.n ?? 0)} deadlocks`,
        );
      } finally {
        await conn.end();
      }
    }
    return per.join('; ');
  }

  function rawConflicts(r: ScenarioResult): number {
    return RAW_CONFLICTS.reduce((n, code) => n + (r.errors[code] ?? 0), 0);
  }

  async function scalar(url: string, database: string, sql: string, values: unknown[] = []): Promise<number> {
    const conn = await mysql.createConnection({ ...parseMysqlUrl(url), database, connectTimeout: 3000 });
    try {
      const [rows] = await conn.query(sql, values);
      return Number((rows as Array<{ n: number }>)[0]?.n ?? 0);
    } finally {
      await conn.end();
    }
  }

  /** Waits until `url`'s node has `want` grants made after `afterId` and released by their holders: the workers reached it. */
  async function grantsCompletedOn(
    url: string,
    database: string,
    afterId: number,
    want: number,
    timeoutMs: number,
  ): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    let n = 0;
    while (Date.now() < deadline) {
      n = await scalar(
        url,
        database,
        `SELECT COUNT(*) AS n FROM t_lock_log WHERE id > ? AND released_by = ${RELEASED_BY.holder}`,
        [afterId],
      ).catch(() => n);
      if (n >= want) return n;
      await sleep(200);
    }
    return n;
  }

  it('group replication single-primary: the primary SIGKILLed mid-run, a new one elected, workers follow it, the old one rejoins; no violations; the lock is live again', async () => {
    let cluster: GroupCluster | undefined;
    try {
      cluster = await startGroupReplication({ mode: 'single-primary', log: (l) => console.log(`[faults] ${l}`) });
      const c = cluster;
      const targets: Target[] = c.nodes.map((n) => ({ serverUrl: n.url, adminUrl: n.url }));
      const first = await c.primary();
      const o = {
        ...base('gr-single-primary', targets[first]!),
        workerTargets: targets,
        reaperTargets: targets,
        // Samples and the record are read on a secondary that stays up; the aftermath on whichever node is primary then.
        main: targets[(first + 1) % 3]!,
        followPrimary: c.nodes.map((n) => n.url),
        settle: async () => targets[await c.primary()]!,
      };
      await database(o.database, targets[first]!.serverUrl, businessResources(o));
      const primaryKill = async (ctx: FaultContext): Promise<void> => {
        await sleep(15_000); // mid-run: the workload has been going for a while
        if (ctx.stopping) return;
        const old = await c.primary();
        const live = await whenGrantsLive(ctx, old, 30_000);
        await c.kill(old);
        const killedAt = Date.now();
        const elected = await c.primary(60_000);
        const electedAfter = Date.now() - killedAt;
        // Workers moved: grants made on the new primary after its election, and released by their holders.
        const since = await scalar(
          c.nodes[elected]!.url,
          o.database,
          'SELECT COALESCE(MAX(id), 0) AS n FROM t_lock_log',
        );
        const moved = await grantsCompletedOn(c.nodes[elected]!.url, o.database, since, o.workers, 30_000);
        const movedAfter = Date.now() - killedAt;
        await c.restart(old);
        const member = (await c.members(old))?.find((m) => m.port === c.nodes[old]!.port);
        ctx.record({
          t: now(),
          kind: 'gr-primary-sigkill',
          proven: live > 0 && elected !== old && moved >= o.workers && member?.role === 'SECONDARY',
          detail:
            `node ${old + 1} (primary, ${live} live grants) killed; node ${elected + 1} elected after ${electedAfter} ms; ` +
            `${moved} grants completed on it by ${movedAfter} ms; node ${old + 1} back ONLINE as ${member?.role ?? '?'} after ${Date.now() - killedAt} ms`,
        });
      };
      const r = await runScenario({
        ...o,
        processFaults: ['sigkill-during', 'sigstop-past-cutoff', 'kill-connection'],
        faultLoops: 1,
        extraFaults: [primaryKill],
        required: { 'gr-primary-sigkill': 1, ...grFloor },
        minDurationMs: 45_000,
        maxDurationMs: 150_000,
      });
      r.notes.push(`members after the run: ${JSON.stringify(await c.members((first + 1) % 3))}`);
      r.notes.push(
        `conflicts: ${await groupConflicts(c)}; raw conflict errors seen by callers: ${rawConflicts(r)}; typed ERR_RWLOCK_CONFLICT: ${r.errors.ERR_RWLOCK_CONFLICT ?? 0}`,
      );
      runs.push(r);
      expect(r.faults['gr-primary-sigkill']?.proven, r.notes.join('\n')).toBe(1);
      for (const [k, n] of Object.entries(grFloor))
        expect(r.faults[k]?.proven ?? 0, `${k} proven`).toBeGreaterThanOrEqual(n);
      expect(r.check.violations).toEqual([]);
      expectEveryKindGranted(r);
      expectMixMet(r, false);
      expect(rawConflicts(r)).toBe(0);
      expect(r.liveAgain).toBe(true);
    } finally {
      await cluster?.stop();
    }
  });

  it('group replication multi-primary: workers on all 3 nodes, one SIGKILLed and rejoined; no violations; conflicts retried; the lock is live again', async () => {
    let cluster: GroupCluster | undefined;
    try {
      cluster = await startGroupReplication({ mode: 'multi-primary', log: (l) => console.log(`[faults] ${l}`) });
      const c = cluster;
      const targets: Target[] = c.nodes.map((n) => ({ serverUrl: n.url, adminUrl: n.url }));
      const o = { ...base('gr-multi-primary', targets[0]!), workerTargets: targets, reaperTargets: targets };
      await database(o.database, targets[0]!.serverUrl, businessResources(o));
      const nodeKill = async (ctx: FaultContext): Promise<void> => {
        await sleep(15_000); // mid-run: the workload has been going for a while
        if (ctx.stopping) return;
        const live = await whenGrantsLive(ctx, 2, 30_000);
        await c.kill(2);
        const killedAt = Date.now();
        await c.restart(2);
        ctx.record({
          t: now(),
          kind: 'gr-node-sigkill',
          proven: live > 0,
          detail: `node 3 had ${live} live grants; back ONLINE after ${Date.now() - killedAt} ms`,
        });
      };
      const r = await runScenario({
        ...o,
        processFaults: ['sigkill-during', 'sigstop-past-cutoff', 'kill-connection'],
        faultLoops: 1,
        extraFaults: [nodeKill],
        required: { 'gr-node-sigkill': 1, ...grFloor },
        minDurationMs: 45_000,
        maxDurationMs: 150_000,
      });
      r.notes.push(`members after the run: ${JSON.stringify(await c.members(0))}`);
      r.notes.push(
        `conflicts: ${await groupConflicts(c)}; raw conflict errors seen by callers: ${rawConflicts(r)}; typed ERR_RWLOCK_CONFLICT: ${r.errors.ERR_RWLOCK_CONFLICT ?? 0}`,
      );
      runs.push(r);
      expect(r.faults['gr-node-sigkill']?.proven).toBe(1);
      for (const [k, n] of Object.entries(grFloor))
        expect(r.faults[k]?.proven ?? 0, `${k} proven`).toBeGreaterThanOrEqual(n);
      expect(r.check.violations).toEqual([]);
      expectEveryKindGranted(r);
      expectMixMet(r, false);
      expect(rawConflicts(r)).toBe(0);
      expect(r.liveAgain).toBe(true);
    } finally {
      await cluster?.stop();
    }
  });

  // Asynchronous replication (MariaDB 10.11, one replica): a failover tool's failover. The primary
  // is SIGKILLed with grants live and abandoned; the replica applies what it received, stops
  // replicating and becomes writable; workers and reapers follow it (the replica refused their
  // writes until then: they use an account read_only binds). Judged on the new primary, the only
  // state left: every check as usual, except that an operation acknowledged by the old primary
  // inside the loss window and missing on the new one is counted as lost (see failover.ts).
  //
  // Losses are made likely, honestly: a loss is a commit the primary acknowledged whose events
  // the replica's IO thread never received. On one machine the link is so fast that the window
  // is a few milliseconds and a kill usually loses nothing, so the link is cut (STOP SLAVE
  // IO_THREAD on the replica) for CUT_MS before the kill, as a network partition between primary
  // and replica would; the primary goes on committing and acknowledging, unaware, as it would
  // then. Events the replica had received are all applied before the promotion (that is not a
  // loss). The notes say what was lost, or that nothing was.
  const CUT_MS = 300;

  it('async replica failover: the primary SIGKILLed under load, the replica promoted, workers moved to it; no violations on the new primary; acknowledged commits it never received counted as lost', async () => {
    let pair: AsyncPair | undefined;
    try {
      pair = await startAsyncReplication({ log: (l) => console.log(`[faults] ${l}`) });
      const p = pair;
      const primary: Target = { serverUrl: p.primaryClientUrl, adminUrl: p.primaryUrl };
      const replica: Target = { serverUrl: p.replicaClientUrl, adminUrl: p.replicaUrl };
      const o = {
        ...base('async-failover', primary),
        // Samples and the record are read on the replica, which stays up; the aftermath on it, promoted.
        main: replica,
        followPrimary: [p.primaryClientUrl, p.replicaClientUrl],
        settle: async () => replica,
      };
      await database(o.database, p.primaryUrl, businessResources(o));
      await p.waitApplied((await p.primaryPosition()) ?? '', 30_000);
      let window: LossWindow | undefined;
      const facts: string[] = [];
      const primaryKill = async (ctx: FaultContext): Promise<void> => {
        await sleep(15_000); // mid-run: the workload has been going for a while
        if (ctx.stopping) return;
        await whenGrantsLive(ctx, 0, 30_000);
        // Anything acknowledged before `from` committed at or before `seen`, which the replica applied.
        const from = now();
        const seen = (await p.primaryPosition()) ?? '';
        const lagMs = await p.waitApplied(seen, 30_000);
        await p.cutLink();
        const cutAt = now();
        await sleep(CUT_MS);
        const live = await whenGrantsLive(ctx, 0, 30_000);
        const atKill = (await p.primaryPosition()) ?? '';
        const received = (await p.replicaStatus()).ioPos;
        await p.killPrimary();
        const killedAt = now();
        const promotion = await p.promote(60_000, now);
        window = { from, to: promotion.writableFrom };
        // Workers moved: grants made on the new primary after its promotion, released by their holders.
        const since = await scalar(p.replicaUrl, o.database, 'SELECT COALESCE(MAX(id), 0) AS n FROM t_lock_log');
        const moved = await grantsCompletedOn(p.replicaUrl, o.database, since, o.workers, 30_000);
        const movedAfter = now() - killedAt;
        const behind = gtidSeq(atKill) - gtidSeq(promotion.applied);
        facts.push(
          `replication lag before the cut: the replica applied the primary's position ${seen} ${lagMs} ms after it was read`,
          `link cut (STOP SLAVE IO_THREAD) ${Math.round(killedAt - cutAt)} ms before the kill; at the kill the primary reported ${atKill}, ` +
            `the replica had received ${received || '-'} and applied ${promotion.applied}: at least ${behind} transactions committed on the primary never reached it`,
        );
        ctx.record({
          t: now(),
          kind: 'async-primary-sigkill',
          proven: live > 0 && moved >= o.workers,
          detail:
            `primary (${live} live grants) killed; replica promoted ${Math.round(promotion.writableFrom - killedAt)} ms after the kill ` +
            `(writable ${promotion.ms} ms after promotion began); ${moved} grants completed on it by ${Math.round(movedAfter)} ms`,
        });
      };
      let losses: FailoverLosses | undefined;
      let plainAck = 0;
      const r = await runScenario({
        ...o,
        processFaults: [],
        faultLoops: 0,
        extraFaults: [primaryKill],
        required: { 'async-primary-sigkill': 1 },
        minDurationMs: 30_000,
        maxDurationMs: 90_000,
        judge: (checked, events, db) => {
          if (!window)
            return {
              ...checked,
              violations: [
                ...checked.violations,
                { check: 'ack', detail: 'the failover did not happen: no loss window' },
              ],
            };
          const judged = judgeFailover(checked, events, db, window);
          losses = judged.losses;
          plainAck = checked.violations.filter((v) => v.check === 'ack').length;
          return judged.result;
        },
      });
      r.notes.push(...facts);
      if (losses) {
        const l = losses;
        r.notes.push(
          `lost in the failover: ${l.grantsLost.length} grants the workers were given that the new primary does not have` +
            `${l.idsReissued.length ? ` (${l.idsReissued.length} of their ids given again by it to other grants)` : ''}; ` +
            `${l.acknowledgedLost.length} acknowledged operations whose business rows it does not have; ${l.modeChangesLost} acknowledged mode changes it does not have` +
            (l.grantsLost.length + l.acknowledgedLost.length === 0 ? ' — nothing was lost in this run' : '') +
            ` (the checker without the loss window reported ${plainAck} ack violations; it caps each check at 20)`,
          `grants released as by their holder while that holder found them gone (a stale release of a reissued id): ${l.releasedByOthers.length}`,
        );
      }
      runs.push(r);
      expect(r.faults['async-primary-sigkill']?.proven, r.notes.join('\n')).toBe(1);
      expect(r.check.violations).toEqual([]);
      expectEveryKindGranted(r);
      expectMixMet(r, false);
      expect(losses?.releasedByOthers, 'a stale release touched a reissued id').toEqual([]);
      expect(r.liveAgain).toBe(true);
    } finally {
      await pair?.stop();
    }
  });
});
