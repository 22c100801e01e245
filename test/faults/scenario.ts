// Runs one fault scenario: worker and reaper processes against a database, faults injected until
// each kind is proven often enough, then the faults stop and the run is checked.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import mysql from 'mysql2/promise';
import { connectKnex, parseMysqlUrl } from '../../harness/database.js';
import type { FaultProxy } from '../../harness/proxy.js';
import { createLockManager } from '../../src/index.js';
import { RELEASED_BY } from '../../src/types.js';
import { check, type CheckResult, type DbState, type Sample } from './checker.js';
import { appendJsonl, now, readJsonl, type FaultEvent, type FaultKind, type OpEvent, type ReaperRun } from './history.js';
import type { FromWorker, Phase, ToWorker, WorkerConfig, WorkerVariant } from './worker.js';
import type { ReaperConfig } from './reaper.js';

const HERE = import.meta.dirname;
const ROOT = join(HERE, '..', '..');

/** Where a process connects (serverUrl, maybe through the proxy) and where the orchestrator checks it (adminUrl, direct). */
export interface Target {
  serverUrl: string;
  adminUrl: string;
}

export type ProcessFault = 'sigkill-before' | 'sigkill-during' | 'sigkill-after' | 'sigstop-past-cutoff' | 'kill-connection' | 'commit-reply-lost';

const PHASE: Record<ProcessFault, Phase> = {
  'sigkill-before': 'before',
  'sigkill-during': 'during',
  'sigkill-after': 'after',
  'sigstop-past-cutoff': 'during',
  'kill-connection': 'during',
  'commit-reply-lost': 'during',
};

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
  /** Where samples, the final state and liveness are read. */
  main: Target;
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
}

interface Slot {
  index: number;
  gen: number;
  id: string;
  child: ChildProcess;
  busy: boolean;
  target: Target;
  listeners: Set<(m: FromWorker) => boolean>;
  exited: Promise<void>;
}

type Pool = mysql.Pool;
const pools = new Map<string, Pool>();
function adminPool(url: string, database: string): Pool {
  const key = `${url}|${database}`;
  let p = pools.get(key);
  if (!p) {
    p = mysql.createPool({ ...parseMysqlUrl(url), database, connectionLimit: 4, connectTimeout: 3000 });
    pools.set(key, p);
  }
  return p;
}

export async function closeAdminPools(): Promise<void> {
  await Promise.all([...pools.values()].map((p) => p.end().catch(() => undefined)));
  pools.clear();
}

async function retrying<T>(what: () => Promise<T>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await what();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(100);
    }
  }
}

export async function runScenario(o: ScenarioOptions): Promise<ScenarioResult> {
  const log = o.log ?? (() => undefined);
  const dir = join(o.dir, o.name);
  mkdirSync(dir, { recursive: true });
  const started = now();
  const faults: FaultEvent[] = [];
  const notes: string[] = [];
  const faultsFile = join(dir, 'faults.jsonl');
  const admin = (t: Target): Pool => adminPool(t.adminUrl, o.database);
  const q = async <T>(t: Target, sql: string, values: unknown[] = []): Promise<T[]> => (await admin(t).query(sql, values))[0] as T[];
  const ts = (v: unknown): number => Number(v) * 1000;
  const loadGrants = async (): Promise<DbState['grants']> => {
    const rows = await q<{ id: number; resource: string; t: number; status: number; c: string; r: string | null; by: number | null; owner: string }>(
      o.main,
      `SELECT id, CAST(resource_id AS CHAR) AS resource, lock_type AS t, status, UNIX_TIMESTAMP(create_time) AS c,
              UNIX_TIMESTAMP(released_at) AS r, released_by AS \`by\`, owner FROM t_lock_log
        WHERE released_by IS NULL OR released_by <> ${RELEASED_BY.withdrawn}`, // a withdrawn acquire's row was never a grant
    );
    return rows.map((g) => ({
      id: Number(g.id), resource: g.resource, type: Number(g.t) as 0 | 1, status: Number(g.status), createdMs: ts(g.c),
      releasedMs: g.r === null ? null : ts(g.r), releasedBy: g.by === null ? null : Number(g.by), owner: g.owner,
    }));
  };

  // --- processes -----------------------------------------------------------------------------
  const histories: string[] = [];
  const spawnWorker = (index: number, gen: number): Slot => {
    const id = `w${index}.${gen}`;
    const target = o.workerTargets[index % o.workerTargets.length]!;
    const history = join(dir, `${id}.jsonl`);
    histories.push(history);
    const cfg: WorkerConfig = {
      id, serverUrl: target.serverUrl, database: o.database, history, resources: o.resources, slowResources: o.slowResources,
      slowFraction: o.slowFraction, readFraction: o.readFraction, staleAfterMs: o.staleAfterMs, reaperPeriodMs: o.reaperPeriodMs,
      resolveTimeoutMs: 15_000, waitMs: 1000, variant: o.workerVariant ?? 'correct',
    };
    // Driver noise while the server restarts goes to a file beside the history.
    const errFile = openSync(join(dir, `${id}.stderr`), 'a');
    const child = spawn(process.execPath, ['--import', 'tsx', join(HERE, 'worker.ts'), JSON.stringify(cfg)], {
      cwd: ROOT, stdio: ['ignore', errFile, errFile, 'ipc'],
    });
    closeSync(errFile);
    const slot: Slot = {
      index, gen, id, child, busy: false, target, listeners: new Set(),
      exited: new Promise((resolve) => child.once('exit', () => resolve())),
    };
    child.on('message', (m: FromWorker) => {
      let taken = false;
      for (const l of [...slot.listeners]) if (l(m)) taken = true;
      // A checkpoint nobody waits for any more (its fault timed out): let the worker go on.
      if (!taken && m.type === 'at') send(slot, { type: 'go', token: m.token });
    });
    return slot;
  };
  const send = (slot: Slot, m: ToWorker): void => {
    if (slot.child.connected) slot.child.send(m, () => undefined);
  };
  const waitMessage = <M extends FromWorker>(slot: Slot, pred: (m: FromWorker) => m is M, timeoutMs: number): Promise<M | undefined> =>
    new Promise((resolve) => {
      const finish = (m: M | undefined): void => {
        clearTimeout(timer);
        slot.listeners.delete(listener);
        resolve(m);
      };
      const listener = (m: FromWorker): boolean => {
        if (!pred(m)) return false;
        finish(m);
        return true;
      };
      const timer = setTimeout(() => finish(undefined), timeoutMs);
      slot.listeners.add(listener);
      void slot.exited.then(() => finish(undefined));
    });

  const slots: Slot[] = [];
  for (let i = 0; i < o.workers; i++) slots.push(spawnWorker(i, 0));
  const reapers: ChildProcess[] = [];
  const reaperLogs: string[] = [];
  for (let k = 0; k < o.reapers; k++) {
    const t = o.reaperTargets[k % o.reaperTargets.length]!;
    const file = join(dir, `reaper${k}.jsonl`);
    reaperLogs.push(file);
    const cfg: ReaperConfig = {
      id: `reaper${k}`, serverUrl: t.serverUrl, database: o.database, log: file, periodMs: o.reaperPeriodMs, staleAfterMs: o.staleAfterMs,
      variant: o.reaperVariant ?? 'library', referenceDelayMs: o.referenceDelayMs ?? 0,
    };
    const errFile = openSync(join(dir, `reaper${k}.stderr`), 'a');
    reapers.push(spawn(process.execPath, ['--import', 'tsx', join(HERE, 'reaper.ts'), JSON.stringify(cfg)], { cwd: ROOT, stdio: ['ignore', errFile, errFile] }));
    closeSync(errFile);
  }

  // --- sampling ------------------------------------------------------------------------------
  const samples: Sample[] = [];
  let sampling = true;
  const sampler = (async () => {
    let conn: mysql.Connection | undefined;
    while (sampling) {
      try {
        conn ??= await mysql.createConnection({ ...parseMysqlUrl(o.main.adminUrl), database: o.database, connectTimeout: 3000 });
        await conn.query('START TRANSACTION WITH CONSISTENT SNAPSHOT');
        const [locks] = await conn.query('SELECT CAST(resource_id AS CHAR) AS resource, w_count AS w, r_count AS r FROM t_read_write_lock');
        const [live] = await conn.query(
          'SELECT CAST(resource_id AS CHAR) AS resource, lock_type AS type, COUNT(*) AS n FROM t_lock_log WHERE status IN (0, 1) GROUP BY resource_id, lock_type',
        );
        await conn.query('COMMIT');
        samples.push({
          t: now(),
          locks: (locks as Array<{ resource: string; w: number; r: number }>).map((l) => ({ resource: l.resource, w: Number(l.w), r: Number(l.r) })),
          live: (live as Array<{ resource: string; type: number; n: number }>).map((l) => ({ resource: l.resource, type: Number(l.type) as 0 | 1, n: Number(l.n) })),
        });
      } catch {
        await conn?.destroy();
        conn = undefined;
      }
      await sleep(250);
    }
    await conn?.end().catch(() => undefined);
  })();

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
    liveGrants: async (i) => {
      try {
        const rows = await q<{ n: number }>(o.workerTargets[i % o.workerTargets.length]!, 'SELECT COUNT(*) AS n FROM t_lock_log WHERE status IN (0, 1)');
        return Number(rows[0]?.n ?? 0);
      } catch {
        return -1;
      }
    },
    log,
  };
  const grantStatus = async (t: Target, grant: number): Promise<{ status: number; by: number | null } | undefined> => {
    try {
      const rows = await q<{ status: number; released_by: number | null }>(t, 'SELECT status, released_by FROM t_lock_log WHERE id = ?', [grant]);
      return rows[0] ? { status: Number(rows[0].status), by: rows[0].released_by } : undefined;
    } catch {
      return undefined;
    }
  };
  const isLive = async (t: Target, grant: number): Promise<boolean> => {
    const s = await grantStatus(t, grant);
    return s !== undefined && s.status !== 2;
  };
  let tokens = 0;

  const injectOne = async (kind: ProcessFault): Promise<void> => {
    const idle = slots.filter((s) => !s.busy && s.child.exitCode === null && s.child.signalCode === null);
    if (idle.length === 0) {
      await sleep(50);
      return;
    }
    const slot = idle[Math.floor(Math.random() * idle.length)]!;
    slot.busy = true;
    try {
      const token = ++tokens;
      const at = waitMessage(slot, (m): m is Extract<FromWorker, { type: 'at' }> => m.type === 'at' && m.token === token, 8000);
      send(slot, { type: 'arm', token, phase: PHASE[kind] });
      const reached = await at;
      if (!reached) {
        send(slot, { type: 'disarm' });
        return;
      }
      const grant = reached.grant;
      const live = await isLive(slot.target, grant);
      const done = (timeoutMs: number): Promise<Extract<FromWorker, { type: 'done' }> | undefined> =>
        waitMessage(slot, (m): m is Extract<FromWorker, { type: 'done' }> => m.type === 'done' && m.token === token, timeoutMs);
      if (kind.startsWith('sigkill')) {
        slot.child.kill('SIGKILL');
        await slot.exited;
        record({ t: now(), kind, proven: live, grant, worker: slot.id });
        const i = slots.indexOf(slot);
        if (!stopping) slots[i] = spawnWorker(slot.index, slot.gen + 1);
        return;
      }
      if (kind === 'sigstop-past-cutoff') {
        slot.child.kill('SIGSTOP');
        const ended = done(o.staleAfterMs * 3 + 30_000);
        send(slot, { type: 'go', token });
        // Keep it stopped until the reaper has released its grant (past the cutoff by construction).
        const deadline = Date.now() + o.staleAfterMs + o.reaperPeriodMs * 4 + 10_000;
        let reaped = false;
        while (Date.now() < deadline) {
          const s = await grantStatus(slot.target, grant);
          if (s?.status === 2) {
            reaped = s.by === 2;
            break;
          }
          await sleep(100);
        }
        slot.child.kill('SIGCONT');
        const end = await ended;
        record({ t: now(), kind, proven: live && reaped, grant, worker: slot.id, detail: end ? `${end.outcome}${end.err ? ` ${end.err}` : ''}` : 'no end' });
        return;
      }
      if (kind === 'kill-connection') {
        let killed = false;
        try {
          await admin(slot.target).query('KILL CONNECTION ?', [reached.connectionId]);
          killed = true;
        } catch {
          killed = false;
        }
        const ended = done(30_000);
        send(slot, { type: 'go', token });
        const end = await ended;
        record({ t: now(), kind, proven: live && killed, grant, worker: slot.id, detail: end ? `${end.outcome}${end.err ? ` ${end.err}` : ''}` : 'no end' });
        return;
      }
      // commit-reply-lost: the proxy forwards this connection's COMMIT and drops the reply.
      if (!o.proxy) throw new Error('commit-reply-lost needs a proxy');
      const arm = o.proxy.armThread(reached.connectionId, /^COMMIT/i, 'before-reply');
      let fired = false;
      void arm.fired.then(() => {
        fired = true;
      });
      const ended = done(30_000);
      send(slot, { type: 'go', token });
      const end = await ended;
      arm.cancel();
      record({ t: now(), kind, proven: live && fired, grant, worker: slot.id, detail: end ? `${end.outcome}${end.err ? ` ${end.err}` : ''}` : 'no end' });
    } finally {
      slot.busy = false;
    }
  };

  const faultLoop = async (): Promise<void> => {
    while (!stopping) {
      if (o.processFaults.length === 0) return;
      // The kind proven least so far goes next.
      const counts = o.processFaults.map((k) => provenOf(k) + Math.random() * 0.5);
      const kind = o.processFaults[counts.indexOf(Math.min(...counts))]!;
      try {
        await injectOne(kind);
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
    const processSatisfied = Object.entries(o.required).every(([k, n]) => fromRecord.includes(k as FaultKind) || provenOf(k as FaultKind) >= n);
    if (processSatisfied && elapsed >= o.minDurationMs && now() - lastRecordRead > 5000) {
      lastRecordRead = now();
      const grants = await loadGrants().catch(() => undefined);
      if (grants) {
        recordCounts = {};
        const evidence = reaperEvidence({ grants, locks: [], effects: [], reads: [], counters: [] },
          reaperLogs.flatMap((f) => readJsonl<ReaperRun>(f)), histories.flatMap((h) => readJsonl<OpEvent>(h)), o.staleAfterMs);
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
  for (const s of slots) send(s, { type: 'stop' });
  await Promise.race([Promise.all(slots.map((s) => s.exited)), sleep(30_000)]);
  for (const s of slots) if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGKILL');
  await Promise.all(slots.map((s) => s.exited));
  // Workers finish the operation in hand when told to stop, so grants are still made after the
  // faults stop; from here on no holder is left, and the reaper's promise applies to what remains.
  const holdersGoneAt = now();
  const livenessBoundMs = o.staleAfterMs + o.reaperPeriodMs + o.livenessSlackMs;
  let freeAt: number | null = null;
  const freeDeadline = holdersGoneAt + livenessBoundMs + 30_000;
  while (now() < freeDeadline) {
    try {
      const rows = await q<{ busy: number }>(
        o.main,
        `SELECT (SELECT COUNT(*) FROM t_read_write_lock WHERE w_count <> 0 OR r_count <> 0)
              + (SELECT COUNT(*) FROM t_lock_log WHERE status IN (0, 1)) AS busy`,
      );
      if (Number(rows[0]?.busy) === 0) {
        freeAt = now();
        break;
      }
    } catch {
      // server still coming back
    }
    await sleep(50);
  }
  // The lock is live again: every resource can be write-locked.
  const knex = connectKnex(o.main.adminUrl, o.database, { poolMax: 2 });
  let liveAgain = true;
  try {
    const locks = createLockManager({ knex, staleAfterMs: o.staleAfterMs, owner: 'liveness-probe' });
    for (const r of [...o.resources, ...o.slowResources]) {
      const g = await retrying(() => locks.acquireWrite(r, { waitMs: o.staleAfterMs + o.reaperPeriodMs * 2 }), 10_000).catch(() => null);
      if (!g || !(await g.release())) liveAgain = false;
    }
  } finally {
    await knex.destroy();
  }
  for (const r of reapers) r.kill('SIGTERM');
  await Promise.all(reapers.map((r) => (r.exitCode === null ? new Promise((res) => r.once('exit', res)) : undefined)));
  sampling = false;
  await sampler;

  // --- the final state -----------------------------------------------------------------------
  const state: DbState = await retrying(async () => {
    const grants = await loadGrants();
    const locks = await q<{ resource: string; w: number; r: number }>(o.main, 'SELECT CAST(resource_id AS CHAR) AS resource, w_count AS w, r_count AS r FROM t_read_write_lock');
    const effects = await q<{ op: string; resource: string; grant_id: number; prev: number; next: number; at: string }>(
      o.main, 'SELECT op_id AS op, resource_id AS resource, grant_id, prev, next, UNIX_TIMESTAMP(at) AS at FROM f_effect',
    );
    const reads = await q<{ op: string; resource: string; grant_id: number; seen: number; seen_again: number; fenced: number; at: string }>(
      o.main, 'SELECT op_id AS op, resource_id AS resource, grant_id, seen, seen_again, fenced, UNIX_TIMESTAMP(at) AS at FROM f_read',
    );
    const counters = await q<{ resource: string; value: number }>(o.main, 'SELECT resource_id AS resource, value FROM f_counter');
    return {
      grants: grants.filter((g) => g.owner !== 'liveness-probe'),
      locks: locks.map((l) => ({ resource: l.resource, w: Number(l.w), r: Number(l.r) })),
      effects: effects.map((e) => ({ op: e.op, resource: e.resource, grant: Number(e.grant_id), prev: Number(e.prev), next: Number(e.next), atMs: ts(e.at) })),
      reads: reads.map((e) => ({ op: e.op, resource: e.resource, grant: Number(e.grant_id), seen: Number(e.seen), seenAgain: Number(e.seen_again), fenced: Number(e.fenced) === 1, atMs: ts(e.at) })),
      counters: counters.map((c) => ({ resource: c.resource, value: Number(c.value) })),
    };
  }, 30_000);
  const events = histories.flatMap((h) => readJsonl<OpEvent>(h));
  const runs = reaperLogs.flatMap((f) => readJsonl<ReaperRun>(f));
  const result = check({ events, db: state, samples, liveness: { holdersGoneAt, freeAt, boundMs: livenessBoundMs } });
  if (!liveAgain) result.violations.push({ check: 'liveness', detail: 'a resource could not be write-locked after the faults stopped' });

  // --- evidence from the record: reapers contending, and reapers racing a holder's final commit ---
  for (const f of reaperEvidence(state, runs, events, o.staleAfterMs)) record(f);
  const reaperErrors = runs.filter((r) => r.error).length;
  notes.push(`reaper rounds: ${runs.length} (${reaperErrors} failed, e.g. while the server was down), skipped rows: ${runs.reduce((n, r) => n + r.skipped, 0)}`);
  const byDetail = (kind: FaultKind): string => {
    const m = new Map<string, number>();
    for (const f of faults) if (f.kind === kind && f.proven) m.set(f.detail ?? '', (m.get(f.detail ?? '') ?? 0) + 1);
    return [...m].map(([d, n]) => `${d || '-'}: ${n}`).join(', ');
  };
  for (const f of faults) if (f.kind === 'galera-node-sigkill' || (f.kind === 'server-sigkill' && !f.proven)) notes.push(`${f.kind}${f.proven ? '' : ' (not proven)'}: ${f.detail ?? ''}`);
  for (const k of ['sigstop-past-cutoff', 'kill-connection', 'commit-reply-lost'] as const) {
    if (provenOf(k) > 0) notes.push(`${k} → holder saw ${byDetail(k)}`);
  }
  const summary: ScenarioResult['faults'] = {};
  for (const f of faults) {
    const e = summary[f.kind] ?? { injected: 0, proven: 0 };
    e.injected += 1;
    if (f.proven) e.proven += 1;
    summary[f.kind] = e;
  }
  return {
    name: o.name, check: result, faults: summary, notes, durationMs: now() - started,
    freeAfterMs: freeAt === null ? null : freeAt - holdersGoneAt, holdersGoneAfterMs: holdersGoneAt - faultsStoppedAt, livenessBoundMs, liveAgain,
  };
}

/**
 * - concurrent-reapers: a grant reaped by one reaper during a round that overlapped another
 *   reaper's round which began after the grant went stale (both were after it; one got it).
 * - reaper-vs-commit: the holder had finished its business work and was committing when the grant
 *   went stale and a reaper round ran: either the reaper won (grant reaped after work-done; the
 *   holder must then fail) or the holder's fenced commit won during that reaper round.
 */
export function reaperEvidence(state: DbState, runs: ReaperRun[], events: OpEvent[], staleAfterMs: number): FaultEvent[] {
  const out: FaultEvent[] = [];
  const reapedBy = new Map<number, ReaperRun>();
  for (const r of runs) for (const id of r.reaped) reapedBy.set(id, r);
  const workDone = new Map<number, number>();
  for (const e of events) if (e.ev === 'work-done' && e.grant !== undefined) workDone.set(e.grant, e.t);
  for (const g of state.grants) {
    const staleAt = g.createdMs + staleAfterMs;
    const run = reapedBy.get(g.id);
    if (run && g.releasedBy === 2) {
      const other = runs.find((r) => r.reaper !== run.reaper && r.start >= staleAt && r.start < run.end && r.end > run.start);
      if (other) out.push({ t: run.end, kind: 'concurrent-reapers', proven: true, grant: g.id, detail: `${run.reaper} won over ${other.reaper}` });
      const done = workDone.get(g.id);
      if (done !== undefined && g.releasedMs !== null && done < g.releasedMs) {
        out.push({ t: run.end, kind: 'reaper-vs-commit', proven: true, grant: g.id, detail: 'reaper won' });
      }
    } else if (g.releasedBy === 1 && g.releasedMs !== null && g.releasedMs > staleAt && workDone.has(g.id)) {
      const racing = runs.find((r) => r.start >= staleAt && r.start <= g.releasedMs! && r.end >= g.releasedMs!);
      if (racing) out.push({ t: g.releasedMs, kind: 'reaper-vs-commit', proven: true, grant: g.id, detail: 'holder won' });
    }
  }
  return out;
}
