// The real reaper job (jobs/reaper.ts) as a child process beside the workers, configured through
// its environment like in production. Its JSON log lines are parsed so the supervisor can wait for
// a particular grant to be reaped instead of guessing how long that takes.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { track } from './children.js';
import { REAPER_SCRIPT, REPO_ROOT, TSX_EXEC_ARGV } from './paths.js';

export interface ReaperStats {
  runs: number;
  failedRuns: number;
  reaped: number;
  reapedIds: number[];
  lastError: string | null;
}

export class ReaperProcess {
  readonly stats: ReaperStats = { runs: 0, failedRuns: 0, reaped: 0, reapedIds: [], lastError: null };
  readonly #child: ChildProcess;
  readonly #waiters = new Map<number, Array<() => void>>();
  readonly #reaped = new Set<number>();
  readonly #exited: Promise<number | null>;
  #started!: () => void;
  /** Resolves on the job's start line; rejects if it exits before. */
  started: Promise<void>;

  constructor(dbUrl: string, cutoffMs: number, periodSec: number, onLine: (line: Record<string, unknown>) => void) {
    this.started = new Promise((resolve) => (this.#started = resolve));
    this.#child = track(
      spawn(process.execPath, [...TSX_EXEC_ARGV, REAPER_SCRIPT], {
        cwd: REPO_ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: {
          ...process.env,
          MYSQL_URL: dbUrl,
          REAPER_CRON: periodSec === 1 ? '* * * * * *' : `*/${periodSec} * * * * *`,
          STALE_AFTER_MS: String(cutoffMs),
          RETENTION_MS: '0', // keep the whole grant log: the verifier reads it
        },
      }),
    );
    this.#exited = new Promise((resolve) => this.#child.once('exit', (code) => resolve(code)));
    let stderr = '';
    this.#child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-2000)));
    const started = this.started;
    this.started = Promise.race([
      started,
      this.#exited.then((code) => {
        throw new Error(`the reaper job exited with code ${code} before it started${stderr ? `:\n${stderr}` : ''}`);
      }),
    ]);
    this.started.catch(() => undefined);
    void this.#exited.then(() => {
      if (stderr) this.stats.lastError ??= stderr.trim();
    });
    createInterface({ input: this.#child.stdout! }).on('line', (text) => {
      let line: Record<string, unknown>;
      try {
        line = JSON.parse(text) as Record<string, unknown>;
      } catch {
        return;
      }
      this.#observe(line);
      onLine(line);
    });
  }

  #observe(line: Record<string, unknown>): void {
    if (line.event === 'reaper.start') this.#started();
    if (line.event === 'reaper.run') {
      this.stats.runs += 1;
      if (line.ok !== true) {
        this.stats.failedRuns += 1;
        this.stats.lastError = String(line.error);
      }
    }
    if (line.event === 'reaper.grant' && typeof line.id === 'number') {
      this.stats.reaped += 1;
      this.stats.reapedIds.push(line.id);
      this.#reaped.add(line.id);
      for (const wake of this.#waiters.get(line.id) ?? []) wake();
      this.#waiters.delete(line.id);
    }
  }

  /** Resolves true once the reaper logs that it reaped `grantId`, false after `timeoutMs`. */
  waitForReap(grantId: number, timeoutMs: number): Promise<boolean> {
    if (this.#reaped.has(grantId)) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      const list = this.#waiters.get(grantId) ?? [];
      list.push(() => {
        clearTimeout(timer);
        resolve(true);
      });
      this.#waiters.set(grantId, list);
    });
  }

  /** SIGTERM, as a scheduler would stop it; resolves with its exit code (0 expected). */
  async stop(): Promise<number | null> {
    if (this.#child.exitCode === null && this.#child.signalCode === null) this.#child.kill('SIGTERM');
    return this.#exited;
  }
}
