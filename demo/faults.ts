// Fault injection on a schedule. Each fault arms one worker so that its next repayment stops inside
// the bank call and says so (with its grant id); the signal then lands mid-repayment for sure.
//  - kill:  SIGKILL. The connection drops, the open transaction rolls back, the grant stays live
//           until the reaper takes it back; the pool respawns the worker.
//  - pause: SIGSTOP until the reaper has reaped the grant, then SIGCONT. The worker finishes its
//           repayment and tries to commit; the fence must refuse it (LockLostError).
// Outcomes go to demo_faults, where the verifier reads them.
import type { ChildProcess } from 'node:child_process';
import type { Knex } from 'knex';
import type { FaultPlan } from './config.js';
import type { FaultKind, FromWorker } from './messages.js';
import type { ReaperProcess } from './reaper-process.js';
import type { WorkerPool } from './worker-pool.js';

export interface FaultRecord {
  kind: FaultKind;
  worker: string;
  grantId: number | null;
  loanId: string | null;
  outcome: string;
  detail: string;
  /** How long the grant stayed live after the fault, until the reaper took it. */
  reapedAfterMs: number | null;
}

interface FaultPoint {
  grantId: number;
  loanId: string;
}

export interface FaultContext {
  db: Knex;
  pool: WorkerPool;
  reaper: ReaperProcess;
  cutoffMs: number;
  periodSec: number;
  log: (line: string) => void;
}

/** How long to wait for an armed worker to start a repayment (a quarter of operations are). */
const FAULT_POINT_TIMEOUT_MS = 15_000;
const LATE_COMMIT_TIMEOUT_MS = 15_000;

export class FaultInjector {
  readonly records: FaultRecord[] = [];
  readonly #pointWaiters = new Map<string, (p: FaultPoint) => void>();
  readonly #lostWaiters = new Map<number, () => void>();
  readonly #lost = new Set<number>();
  #chain: Promise<void> = Promise.resolve();
  #timers: NodeJS.Timeout[] = [];
  #next = 0;

  constructor(private readonly ctx: FaultContext) {}

  /** Feed every worker message here. */
  observe(worker: string, msg: FromWorker): void {
    if (msg.type === 'fault-point') this.#pointWaiters.get(worker)?.({ grantId: msg.grantId, loanId: msg.loanId });
    if (msg.type === 'lost') {
      this.#lost.add(msg.grantId);
      this.#lostWaiters.get(msg.grantId)?.();
    }
  }

  /** Starts the timers; faults run one after another even when their times come close. */
  schedule(plan: FaultPlan[]): void {
    for (const f of plan) {
      this.#timers.push(
        setTimeout(() => {
          this.#chain = this.#chain.then(() => this.#inject(f.kind));
        }, f.atSec * 1000),
      );
    }
  }

  /** Cancels faults not yet due and waits for the one in progress. */
  async settle(): Promise<void> {
    for (const t of this.#timers) clearTimeout(t);
    await this.#chain;
  }

  #reapBudgetMs(): number {
    return this.ctx.cutoffMs + 2 * this.ctx.periodSec * 1000 + 5_000;
  }

  async #inject(kind: FaultKind): Promise<void> {
    // Round robin over the slots, so kill and pause hit different workers.
    const slot = (this.#next++ % this.ctx.pool.size) + 1;
    const worker = this.ctx.pool.worker(slot);
    if (!worker) return;
    const record: FaultRecord = {
      kind,
      worker: worker.name,
      grantId: null,
      loanId: null,
      outcome: 'pending',
      detail: '',
      reapedAfterMs: null,
    };
    this.records.push(record);
    const point = await new Promise<FaultPoint | null>((resolve) => {
      const timer = setTimeout(() => resolve(null), FAULT_POINT_TIMEOUT_MS);
      this.#pointWaiters.set(worker.name, (p) => {
        clearTimeout(timer);
        resolve(p);
      });
      this.ctx.pool.send(slot, { type: 'arm', fault: kind });
    });
    this.#pointWaiters.delete(worker.name);
    if (!point) {
      record.outcome = 'not-landed';
      record.detail = `${worker.name} started no repayment within ${FAULT_POINT_TIMEOUT_MS} ms`;
    } else {
      record.grantId = point.grantId;
      record.loanId = point.loanId;
      if (kind === 'kill') await this.#kill(record, worker.child, worker.exited);
      else await this.#pause(record, worker.child, slot);
    }
    this.ctx.log(
      `fault: ${kind} ${record.worker} grant ${record.grantId ?? '-'} ${record.loanId ?? ''} -> ${record.outcome}${record.detail ? ` (${record.detail})` : ''}`,
    );
    await this.ctx.db('demo_faults').insert({
      kind,
      worker: record.worker,
      grant_id: record.grantId,
      loan_id: record.loanId,
      outcome: record.outcome,
      detail: record.detail.slice(0, 255),
    });
  }

  async #kill(record: FaultRecord, child: ChildProcess, exited: Promise<unknown>): Promise<void> {
    const started = performance.now();
    child.kill('SIGKILL');
    await exited;
    const reaped = await this.ctx.reaper.waitForReap(record.grantId!, this.#reapBudgetMs());
    record.reapedAfterMs = reaped ? Math.round(performance.now() - started) : null;
    record.outcome = reaped ? 'reaped' : 'not-reaped';
    record.detail = reaped
      ? `SIGKILL in the bank call; grant reaped after ${record.reapedAfterMs} ms; worker respawned`
      : `grant not reaped within ${this.#reapBudgetMs()} ms`;
  }

  async #pause(record: FaultRecord, child: ChildProcess, slot: number): Promise<void> {
    const grantId = record.grantId!;
    const started = performance.now();
    child.kill('SIGSTOP');
    const reaped = await this.ctx.reaper.waitForReap(grantId, this.#reapBudgetMs());
    record.reapedAfterMs = reaped ? Math.round(performance.now() - started) : null;
    const refused = new Promise<boolean>((resolve) => {
      if (this.#lost.has(grantId)) return resolve(true);
      const timer = setTimeout(() => resolve(false), LATE_COMMIT_TIMEOUT_MS);
      this.#lostWaiters.set(grantId, () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
    child.kill('SIGCONT');
    this.ctx.pool.send(slot, { type: 'bank-answer' });
    const lost = await refused;
    this.#lostWaiters.delete(grantId);
    const stoppedMs = Math.round(performance.now() - started);
    record.outcome = !reaped ? 'not-reaped' : lost ? 'lock-lost' : 'no-lock-lost';
    record.detail =
      `SIGSTOP in the bank call for ${stoppedMs} ms; ` +
      (reaped ? `reaped after ${record.reapedAfterMs} ms; ` : 'not reaped; ') +
      (lost ? 'late commit refused with LockLostError' : 'no LockLostError reported');
  }
}
