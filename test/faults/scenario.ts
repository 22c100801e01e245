// Runs one fault scenario: worker and reaper processes against a database, faults injected until
// each kind is proven often enough, then the faults stop and the run is checked.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { connectKnex } from '../../harness/database.js';
import type { FaultProxy } from '../support/proxy.js';
import { createLockManager } from '../../src/index.js';
import { RELEASED_BY } from '../../src/types.js';
import { queryOn, retrying, type Target } from './admin.js';
import { check, type CheckResult, type DbState } from './checker.js';
import {
  appendJsonl,
  now,
  PROBE_OWNER,
  readJsonl,
  type FaultEvent,
  type FaultKind,
  type OpEvent,
  type ReaperRun,
} from './history.js';
import { injectOne, type InjectorEnv, type ProcessFault } from './injectors.js';
import { spawnReaper, spawnWorker, stopReapers, stopWorkers, type Slot } from './processes.js';
import type { ReaperConfig } from './reaper.js';
import { startSampler } from './sampler.js';
import { mixEvidence, semaphoreLimits, type MixEvidence, businessResources } from './mix.js';
import { liveGrantCount, loadGrants, readFinalState, waitFree } from './state.js';
import type { WorkerConfig, WorkerVariant } from './worker.js';

export { closeAdminPools, type Target } from './admin.js';
export type { ProcessFault } from './injectors.js';

export interface FaultContext {
  readonly stopping: boolean;
  record(f: FaultEvent): void;
  proven(kind: FaultKind): number;
  /** Live grants on the database, through target `i`'s admin url; -1 when it cannot be asked. */
  liveGrants(i: number): Promise<number>;
  log(line: string): void;
}

export interface ScenarioOptions {
  name: string;
  database: string;
  dir: string;
  workerTargets: Target[];
  reaperTargets: Target[];
  /** Where samples are read and where the record is read during the run. */
  main: Target;
  /**
   * Where the faults' aftermath is judged: liveness, the probe that locks every resource, the final
   * state. A single-primary cluster's current primary, found once the faults stopped; `main` by default.
   */
  settle?: () => Promise<Target>;
  /** Workers (and reapers) follow the primary among these nodes instead of a fixed target. */
  followPrimary?: string[];
  workers: number;
  reapers: number;
  staleAfterMs: number;
  reaperPeriodMs: number;
  workerVariant?: WorkerVariant;
  reaperVariant?: ReaperConfig['variant'];
  referenceDelayMs?: number;
  resources: string[];
  slowResources: string[];
  slowFraction: number;
  readFraction: number;
  /** Of the scoped operations, the share that change mode: writes downgrade, reads try to upgrade. */
  transitionFraction: number;
  /** Of the scoped operations, the share run as one-commit sections. */
  sectionFraction: number;
  /** Of all operations, the share on two resources (half of them as sections). */
  multiFraction: number;
  /** Semaphores of `permitLimit` permits, and the share of operations run as `withPermit` on one of them. */
  semaphores?: string[];
  permitLimit?: number;
  permitFraction?: number;
  /** Semaphores whose limit changes mid-run, resources whose kind changes, short leases: see WorkerConfig. */
  changingLimits?: WorkerConfig['changingLimits'];
  flipResources?: string[];
  leaseMs?: number;
  leaseFraction?: number;
  processFaults: ProcessFault[];
  /** Fault loops of process faults running side by side. */
  faultLoops: number;
  proxy?: FaultProxy;
  /** Extra fault loops (server kills); they run until ctx.stopping. */
  extraFaults?: Array<(ctx: FaultContext) => Promise<void>>;
  /** How often each kind must be proven before the faults stop (unless maxDurationMs passes). */
  required: Partial<Record<FaultKind, number>>;
  minDurationMs: number;
  maxDurationMs: number;
  /** Extra milliseconds allowed beyond cutoff + reaper period for liveness (reaper run time, polling). */
  livenessSlackMs: number;
  /**
   * Decides again from the checker's result, the histories and the final state, for a topology
   * whose promises differ (an asynchronous failover may lose acknowledged commits); may add notes.
   */
  judge?: (result: CheckResult, events: OpEvent[], db: DbState, notes: string[]) => CheckResult;
  log?: (line: string) => void;
}

export interface ScenarioResult {
  name: string;
  check: CheckResult;
  faults: Record<string, { injected: number; proven: number }>;
  notes: string[];
  durationMs: number;
  /** From the last holder's exit to the moment no grant was live. */
  freeAfterMs: number | null;
  /** From the end of the faults to the last holder's exit. */
  holdersGoneAfterMs: number;
  livenessBoundMs: number;
  liveAgain: boolean;
  /** What failed or unknown operations ended with, by error code or name. */
  errors: Record<string, number>;
  /** Grants released as `reaper`: by reaper processes or by self-healing acquires (with no reaper, all of them). */
  reaped: number;
  /** What the record shows of short leases, limit changes and kind changes. */
  mix: MixEvidence;
}

export async function runScenario(o: ScenarioOptions): Promise<ScenarioResult> {
  const log = o.log ?? (() => undefined);
  const dir = join(o.dir, o.name);
  mkdirSync(dir, { recursive: true });
  const started = now();
  const faults: FaultEvent[] = [];
  const notes: string[] = [];
  const faultsFile = join(dir, 'faults.jsonl');
  const q = queryOn(o.database);

  // --- processes -----------------------------------------------------------------------------
  const histories: string[] = [];
  const newWorker = (index: number, gen: number): Slot => {
    const target = o.workerTargets[index % o.workerTargets.length]!;
    return spawnWorker(dir, index, gen, target, (id): WorkerConfig => {
      const history = join(dir, `${id}.jsonl`);
      histories.push(history);
      return {
        id,
        serverUrl: target.serverUrl,
        ...(o.followPrimary ? { followPrimary: o.followPrimary } : {}),
        database: o.database,
        history,
        resources: o.resources,
        slowResources: o.slowResources,
        slowFraction: o.slowFraction,
        readFraction: o.readFraction,
        transitionFraction: o.transitionFraction,
        sectionFraction: o.sectionFraction,
        multiFraction: o.multiFraction,
        ...(o.semaphores
          ? { semaphores: o.semaphores, permitLimit: o.permitLimit, permitFraction: o.permitFraction }
          : {}),
        ...(o.changingLimits ? { changingLimits: o.changingLimits } : {}),
        ...(o.flipResources ? { flipResources: o.flipResources } : {}),
        ...(o.leaseMs ? { leaseMs: o.leaseMs, leaseFraction: o.leaseFraction } : {}),
        staleAfterMs: o.staleAfterMs,
        reaperPeriodMs: o.reaperPeriodMs,
        resolveTimeoutMs: 15_000,
        waitMs: 1000,
        variant: o.workerVariant ?? 'correct',
      };
    });
  };
  const slots: Slot[] = [];
  for (let i = 0; i < o.workers; i++) slots.push(newWorker(i, 0));
  const reaperLogs = Array.from({ length: o.reapers }, (_, k) => join(dir, `reaper${k}.jsonl`));
  const reapers = reaperLogs.map((file, k) =>
    spawnReaper(dir, {
      id: `reaper${k}`,
      serverUrl: o.reaperTargets[k % o.reaperTargets.length]!.serverUrl,
      ...(o.followPrimary ? { followPrimary: o.followPrimary } : {}),
      database: o.database,
      log: file,
      periodMs: o.reaperPeriodMs,
      staleAfterMs: o.staleAfterMs,
      variant: o.reaperVariant ?? 'library',
      referenceDelayMs: o.referenceDelayMs ?? 0,
    }),
  );
  const sampler = startSampler(o.main.adminUrl, o.database);

  // --- faults --------------------------------------------------------------------------------
  let stopping = false;
  const provenOf = (kind: FaultKind): number => faults.filter((f) => f.kind === kind && f.proven).length;
  const record = (f: FaultEvent): void => {
    faults.push(f);
    appendJsonl(faultsFile, f);
  };
  const ctx: FaultContext = {
    get stopping() {
      return stopping;
    },
    record,
    proven: provenOf,
    liveGrants: (i) => liveGrantCount(q, o.workerTargets[i % o.workerTargets.length]!),
    log,
  };
  const env: InjectorEnv = {
    q,
    database: o.database,
    staleAfterMs: o.staleAfterMs,
    reaperPeriodMs: o.reaperPeriodMs,
    record,
    ...(o.proxy ? { proxy: o.proxy } : {}),
    respawn: (slot) => {
      if (!stopping) slots[slots.indexOf(slot)] = newWorker(slot.index, slot.gen + 1);
    },
  };
  const faultLoop = async (): Promise<void> => {
    while (!stopping) {
      if (o.processFaults.length === 0) return;
      // The kind proven least so far goes next.
      const counts = o.processFaults.map((k) => provenOf(k) + Math.random() * 0.5);
      const kind = o.processFaults[counts.indexOf(Math.min(...counts))]!;
      try {
        await injectOne(env, slots, kind);
      } catch (err) {
        log(`fault ${kind} failed: ${(err as Error).message}`);
      }
      // Let the workload run between faults (jitter, not synchronisation).
      await sleep(200 + Math.random() * 400);
    }
  };
  const loops = [...Array.from({ length: o.faultLoops }, faultLoop), ...(o.extraFaults ?? []).map((f) => f(ctx))];

  // Faults run until every required kind is proven often enough (and at least minDurationMs).
  // Reaper contention and reaper/commit races are proven from the record, read back as the run goes.
  const fromRecord: FaultKind[] = ['concurrent-reapers', 'reaper-vs-commit'];
  let recordCounts: Partial<Record<FaultKind, number>> = {};
  let lastRecordRead = 0;
  for (;;) {
    await sleep(500);
    const elapsed = now() - started;
    const proven = (k: FaultKind): number => (fromRecord.includes(k) ? (recordCounts[k] ?? 0) : provenOf(k));
    const processSatisfied = Object.entries(o.required).every(
      ([k, n]) => fromRecord.includes(k as FaultKind) || provenOf(k as FaultKind) >= n,
    );
    if (processSatisfied && elapsed >= o.minDurationMs && now() - lastRecordRead > 5000) {
      lastRecordRead = now();
      const grants = await loadGrants(q, o.main).catch(() => undefined);
      if (grants) {
        recordCounts = {};
        const evidence = reaperEvidence(
          { grants, locks: [], effects: [], reads: [], counters: [] },
          reaperLogs.flatMap((f) => readJsonl<ReaperRun>(f)),
          histories.flatMap((h) => readJsonl<OpEvent>(h)),
          o.staleAfterMs,
        );
        for (const f of evidence) recordCounts[f.kind] = (recordCounts[f.kind] ?? 0) + 1;
      }
    }
    const satisfied = Object.entries(o.required).every(([k, n]) => proven(k as FaultKind) >= n);
    if ((satisfied && elapsed >= o.minDurationMs) || elapsed >= o.maxDurationMs) break;
  }
  stopping = true;
  await Promise.all(loops);
  const faultsStoppedAt = now();
  log(`${o.name}: faults stopped after ${Math.round(faultsStoppedAt - started)} ms`);

  // --- wind down and liveness ----------------------------------------------------------------
  await stopWorkers(slots, 30_000);
  // Workers finish the operation in hand when told to stop, so grants are still made after the
  // faults stop; from here on no holder is left, and the reaper's promise applies to what remains.
  const holdersGoneAt = now();
  // With no reaper process, a crashed holder's grant goes when its resource is asked for again (the
  // acquire heals it): the probe below asks for every resource, then they must all be free, within
  // the cutoff. With reapers, they free every resource on their own within the cutoff and a period.
  const noReaper = o.reapers === 0;
  const livenessBoundMs = o.staleAfterMs + (noReaper ? 0 : o.reaperPeriodMs) + o.livenessSlackMs;
  const settled = o.settle ? await retrying(o.settle, 60_000) : o.main;
  let freeAt = noReaper ? null : await waitFree(q, settled, holdersGoneAt + livenessBoundMs + 30_000);
  // The lock is live again: every resource can be write-locked.
  const knex = connectKnex(settled.adminUrl, o.database, { poolMax: 2 });
  let liveAgain = true;
  let probeReaped = 0;
  try {
    const locks = createLockManager({ knex, staleAfterMs: o.staleAfterMs, owner: PROBE_OWNER });
    // Every resource the workers used, semaphores and kind-flipping ids too: with no reaper, a
    // crashed permit holder goes only when its resource is asked for (a write heals it before it
    // would refuse by kind).
    for (const r of businessResources(o)) {
      const g = await retrying(
        () => locks.acquireWrite(r, { waitMs: o.staleAfterMs + o.reaperPeriodMs * 2 }),
        10_000,
      ).catch((e: unknown) => {
        // Said in the run's output: which resource, and what the last attempt met.
        console.log(`[faults] liveness probe: ${r} not write-locked:`, e);
        return null;
      });
      // A negative control's own corruption (counts given back twice) can make the probe's release
      // meet counts that disagree with the log: LockInvariantError. Not live, then; the checker
      // reports what the final state shows.
      let released = g
        ? await g.release().catch((e: unknown) => {
            console.log(`[faults] liveness probe: ${r}'s release failed:`, e);
            return false;
          })
        : false;
      if (g && !released) {
        // Released by someone else: a reaper, when the probe held it past the reapers' cutoff
        // (staleAfterMs on the database clock, from its acquire's commit to its release's) on a busy
        // machine. A holder gets the cutoff and no more: that is the reaper's promise, not a lock
        // that is stuck, and the resource is free again all the same. A grant still live is not.
        const [row] = await q<{ status: number; by: number | null }>(
          settled,
          'SELECT status, released_by AS `by` FROM t_lock_log WHERE id = ?',
          [g.id],
        ).catch(() => [undefined]);
        released = row !== undefined && Number(row.status) === 2;
        console.log(
          `[faults] liveness probe: ${r}'s grant ${g.id} not released by its release(); its row: ${JSON.stringify(row)}`,
        );
        if (released) probeReaped++;
      }
      if (!released) liveAgain = false;
    }
  } finally {
    await knex.destroy();
  }
  if (noReaper) freeAt = await waitFree(q, settled, now() + 30_000);
  await stopReapers(reapers);
  await sampler.stop();

  // --- the final state and the verdict -------------------------------------------------------
  const state: DbState = await readFinalState(q, settled, PROBE_OWNER);
  const events = histories.flatMap((h) => readJsonl<OpEvent>(h));
  const runs = reaperLogs.flatMap((f) => readJsonl<ReaperRun>(f));
  const checked = check({
    events,
    db: state,
    samples: sampler.samples,
    liveness: { holdersGoneAt, freeAt, boundMs: livenessBoundMs },
    ...(o.semaphores ? { permitLimits: semaphoreLimits(o) } : {}),
  });
  const result = o.judge ? o.judge(checked, events, state, notes) : checked;
  if (!liveAgain)
    result.violations.push({
      check: 'liveness',
      detail: 'a resource could not be write-locked after the faults stopped',
    });

  // --- evidence from the record: reapers contending, and reapers racing a holder's final commit ---
  for (const f of reaperEvidence(state, runs, events, o.staleAfterMs)) record(f);
  const reaperErrors = runs.filter((r) => r.error).length;
  const changed = (ev: 'downgraded' | 'upgraded'): number => events.filter((e) => e.ev === ev).length;
  const reapedChanged = state.grants.filter(
    (g) => g.modeChangedMs != null && g.releasedBy === RELEASED_BY.reaper,
  ).length;
  if (probeReaped > 0)
    notes.push(`liveness probe: ${probeReaped} of its grants reaped before their release (held past the cutoff)`);
  notes.push(
    `mode changes: ${changed('downgraded')} downgrades, ${changed('upgraded')} upgrades; ${reapedChanged} changed grants reaped`,
  );
  notes.push(
    `reaper rounds: ${runs.length} (${reaperErrors} failed, e.g. while the server was down), skipped rows: ${runs.reduce((n, r) => n + r.skipped, 0)}`,
  );
  const reaped = state.grants.filter((g) => g.releasedBy === RELEASED_BY.reaper).length;
  const healed = state.grants.filter(
    (g) => g.releasedBy === RELEASED_BY.reaper && !runs.some((r) => r.reaped.includes(g.id)),
  ).length;
  notes.push(`grants released as reaper: ${reaped}, of which by self-healing acquires (no reaper run): ${healed}`);
  const byDetail = (kind: FaultKind): string => {
    const m = new Map<string, number>();
    for (const f of faults) if (f.kind === kind && f.proven) m.set(f.detail ?? '', (m.get(f.detail ?? '') ?? 0) + 1);
    return [...m].map(([d, n]) => `${d || '-'}: ${n}`).join(', ');
  };
  for (const f of faults)
    if (NODE_KILLS.includes(f.kind) || (f.kind === 'server-sigkill' && !f.proven))
      notes.push(`${f.kind}${f.proven ? '' : ' (not proven)'}: ${f.detail ?? ''}`);
  for (const k of ['sigstop-past-cutoff', 'kill-connection', 'commit-reply-lost'] as const) {
    if (provenOf(k) > 0) notes.push(`${k} → holder saw ${byDetail(k)}`);
  }
  const errors: Record<string, number> = {};
  for (const e of events)
    if ((e.ev === 'fail' || e.ev === 'unknown') && e.err) errors[e.err] = (errors[e.err] ?? 0) + 1;
  notes.push(
    `failed or unknown operations ended with: ${
      Object.entries(errors)
        .sort((a, b) => b[1] - a[1])
        .map(([k, n]) => `${k} ${n}`)
        .join(', ') || '-'
    }`,
  );
  const mix = mixEvidence(o, state, events);
  notes.push(
    `leases: ${mix.leased} leased grants, ${mix.leasedStale} released as stale; kind changes after a stale grant: ${mix.kindChangesAfterStale}; limit changes: ${mix.limitChanges}`,
  );
  const summary: ScenarioResult['faults'] = {};
  for (const f of faults) {
    const e = summary[f.kind] ?? { injected: 0, proven: 0 };
    e.injected += 1;
    if (f.proven) e.proven += 1;
    summary[f.kind] = e;
  }
  return {
    name: o.name,
    check: result,
    faults: summary,
    notes,
    durationMs: now() - started,
    freeAfterMs: freeAt === null ? null : freeAt - holdersGoneAt,
    holdersGoneAfterMs: holdersGoneAt - faultsStoppedAt,
    livenessBoundMs,
    liveAgain,
    errors,
    reaped,
    mix,
  };
}

/** Cluster node kills, whose details (how long the rejoin took) go into the notes. */
const NODE_KILLS: FaultKind[] = [
  'galera-node-sigkill',
  'gr-primary-sigkill',
  'gr-node-sigkill',
  'async-primary-sigkill',
];

/**
 * - concurrent-reapers: a grant reaped by one reaper during a round that overlapped another
 *   reaper's round which began after the grant went stale (both were after it; one got it).
 * - reaper-vs-commit: the holder had finished its business work and was committing when the grant
 *   went stale and a reaper round ran: either the reaper won (grant reaped after work-done; the
 *   holder must then fail) or the holder's fenced commit won during that reaper round.
 */
export function reaperEvidence(
  state: DbState,
  runs: ReaperRun[],
  events: OpEvent[],
  staleAfterMs: number,
): FaultEvent[] {
  const out: FaultEvent[] = [];
  const reapedBy = new Map<number, ReaperRun>();
  for (const r of runs) for (const id of r.reaped) reapedBy.set(id, r);
  const workDone = new Map<number, number>();
  for (const e of events) if (e.ev === 'work-done' && e.grant !== undefined) workDone.set(e.grant, e.t);
  for (const g of state.grants) {
    const staleAt = g.createdMs + staleAfterMs;
    const run = reapedBy.get(g.id);
    if (run && g.releasedBy === 2) {
      const other = runs.find(
        (r) => r.reaper !== run.reaper && r.start >= staleAt && r.start < run.end && r.end > run.start,
      );
      if (other)
        out.push({
          t: run.end,
          kind: 'concurrent-reapers',
          proven: true,
          grant: g.id,
          detail: `${run.reaper} won over ${other.reaper}`,
        });
      const done = workDone.get(g.id);
      if (done !== undefined && g.releasedMs !== null && done < g.releasedMs) {
        out.push({ t: run.end, kind: 'reaper-vs-commit', proven: true, grant: g.id, detail: 'reaper won' });
      }
    } else if (g.releasedBy === 1 && g.releasedMs !== null && g.releasedMs > staleAt && workDone.has(g.id)) {
      const racing = runs.find((r) => r.start >= staleAt && r.start <= g.releasedMs! && r.end >= g.releasedMs!);
      if (racing)
        out.push({ t: g.releasedMs, kind: 'reaper-vs-commit', proven: true, grant: g.id, detail: 'holder won' });
    }
  }
  return out;
}
