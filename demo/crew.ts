// What both scenarios run: the reaper process, the worker processes and the progress display,
// wired together, and the orderly shutdown that leaves no live grant behind.
import type { Knex } from 'knex';
import type { DemoConfig } from './config.js';
import { FaultInjector } from './faults.js';
import type { WorkerSettings } from './messages.js';
import { Progress } from './progress.js';
import { ReaperProcess, type ReaperStats } from './reaper-process.js';
import { WorkerPool } from './worker-pool.js';

export interface CrewSummary {
  workersSpawned: number;
  workerExits: string[];
  errors: string[];
  reaper: ReaperStats & { exitCode: number | null };
  /** Grants still live once the workers were gone (orphans of killed workers) and how long the reaper took for them. */
  orphansAtStop: number;
  orphansReapedMs: number;
}

export class Crew {
  readonly pool: WorkerPool;
  readonly reaper: ReaperProcess;
  readonly faults: FaultInjector;
  readonly progress: Progress;
  readonly errors: string[] = [];
  readonly exits: string[] = [];
  #startedAt = 0;

  constructor(
    private readonly config: DemoConfig,
    private readonly db: Knex,
    dbUrl: string,
  ) {
    this.progress = new Progress(() => this.#sample());
    this.reaper = new ReaperProcess(dbUrl, config.reaperCutoffMs, config.reaperPeriodSec, (line) => {
      if (line.event === 'reaper.grant')
        this.progress.event(
          `reaper: reaped ${line.mode} grant ${line.id} on ${line.resourceId} (${line.owner}, ${line.ageMs} ms old)`,
        );
      if (line.event === 'reaper.run' && line.ok !== true) this.progress.event(`reaper: run failed: ${line.error}`);
    });
    const settings = (slot: number, name: string, incarnation: number): WorkerSettings => ({
      scenario: config.scenario,
      dbUrl,
      name,
      concurrency: config.concurrency,
      loans: config.loans,
      investors: config.investors,
      unsafe: config.unsafe,
      seed: config.seed * 1000 + slot * 31 + incarnation,
    });
    this.pool = new WorkerPool(settings, (e) => {
      if (e.type === 'exit') {
        const how = e.signal ?? `code ${e.code}`;
        if (e.signal !== null || e.code !== 0) {
          this.exits.push(`${e.worker.name} exited (${how})${e.respawned ? ', respawned' : ''}`);
          this.progress.event(`worker ${e.worker.name} exited (${how})${e.respawned ? ', respawning' : ''}`);
        }
        return;
      }
      this.faults.observe(e.worker.name, e.msg);
      if (e.msg.type === 'error') {
        if (this.errors.length < 50) this.errors.push(`${e.worker.name}: ${e.msg.message}`);
        this.progress.event(`error in ${e.worker.name}: ${e.msg.message.split('\n')[0]}`);
      }
      if (e.msg.type === 'lost')
        this.progress.event(
          `${e.worker.name}: ${e.msg.what} under grant ${e.msg.grantId} refused at commit: LockLostError`,
        );
    });
    this.faults = new FaultInjector({
      db,
      pool: this.pool,
      reaper: this.reaper,
      cutoffMs: config.reaperCutoffMs,
      periodSec: config.reaperPeriodSec,
      log: (text) => this.progress.event(text),
    });
  }

  get elapsedSec(): number {
    return this.#startedAt === 0 ? 0 : (performance.now() - this.#startedAt) / 1000;
  }

  async start(): Promise<void> {
    await this.reaper.started;
    await this.pool.start(this.config.workers);
    this.#startedAt = performance.now();
    this.faults.schedule(this.config.faults);
    this.progress.start();
  }

  async #sample() {
    const [[row]] = (await this.db.raw('SELECT COALESCE(MAX(id), 0) AS grants FROM t_lock_log')) as [
      Array<{ grants: number }>,
      unknown,
    ];
    const faults = this.faults.records
      .map((f) => `${f.kind} ${f.worker} ${f.outcome === 'pending' ? '…' : f.outcome}`)
      .join(', ');
    return {
      elapsedSec: this.elapsedSec,
      totalSec: this.config.scenario === 'lending' ? this.config.durationSec : null,
      counts: this.pool.totals,
      grants: Number(row?.grants ?? 0),
      reaped: this.reaper.stats.reaped,
      faults,
      workers: this.pool.size,
    };
  }

  /**
   * Stops the workers (faults in progress finish first), then waits until the reaper has taken back
   * every grant left live by a killed worker, then stops the reaper with SIGTERM.
   */
  async stop(): Promise<CrewSummary> {
    await this.faults.settle();
    await this.pool.stopAll();
    const orphansStarted = performance.now();
    const orphansAtStop = await this.#liveGrants();
    const deadline = Date.now() + this.config.reaperCutoffMs + 2 * this.config.reaperPeriodSec * 1000 + 5_000;
    while ((await this.#liveGrants()) > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 200)); // polling the database for the condition
    }
    const orphansReapedMs = Math.round(performance.now() - orphansStarted);
    this.progress.stop();
    const exitCode = await this.reaper.stop();
    return {
      workersSpawned: this.pool.spawned,
      workerExits: this.exits,
      errors: this.errors,
      reaper: { ...this.reaper.stats, exitCode },
      orphansAtStop,
      orphansReapedMs,
    };
  }

  async #liveGrants(): Promise<number> {
    const [[row]] = (await this.db.raw('SELECT COUNT(*) AS n FROM t_lock_log WHERE status IN (0, 1)')) as [
      Array<{ n: number }>,
      unknown,
    ];
    return Number(row?.n ?? 0);
  }
}
