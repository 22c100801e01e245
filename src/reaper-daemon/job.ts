import type { Knex } from 'knex';
import cron from 'node-cron';
import { InvalidOptionsError, PrivilegeError } from '../errors.js';
import {
  DEFAULTS,
  LIMITS,
  envNumber,
  integerOption,
  reapBatchOption,
  retentionOption,
  staleAfterOption,
} from '../options.js';
import { purgeReleasedGrants, reapStaleGrants } from '../admin/reap-and-purge.js';
import { checkLockCounts, repairLockCounts, type CountDisagreement } from '../admin/count-check.js';
import { parseConnectionUrl, type MysqlConnection } from '../sql/connection-url.js';

export interface ReaperJobConfig {
  /** MYSQL_URL, parsed and decoded (parseConnectionUrl): what knex connects with. */
  connection: MysqlConnection;
  /** Where the job connects, for log lines: `host:port/database`, no part of the user or password. */
  target: string;
  /** Cron expression (node-cron; 5 fields, or 6 with seconds). @defaultValue `JOB_DEFAULTS.cron` */
  cron: string;
  /** Run once as soon as the job starts, then on the schedule. @defaultValue `JOB_DEFAULTS.runAtStart` */
  runAtStart: boolean;
  staleAfterMs: number;
  batchSize: number;
  /** Released grants older than this are purged each run; 0 disables purging. @defaultValue `JOB_DEFAULTS.retentionMs` */
  retentionMs: number;
  /** Port of the /metrics and /healthz server; null: no server. 0 picks a free port. */
  metricsPort: number | null;
  /** Address that server binds. @defaultValue `JOB_DEFAULTS.metricsHost` */
  metricsHost: string;
  /** Cron expression of the count check (checkLockCounts); null: never. @defaultValue `JOB_DEFAULTS.countCheckCron` (daily) */
  countCheckCron: string | null;
  /** The count check also repairs what disagrees (repairLockCounts). @defaultValue false */
  countRepair: boolean;
}

export const JOB_DEFAULTS = Object.freeze({
  cron: '* * * * *',
  runAtStart: true,
  retentionMs: DEFAULTS.purge.retentionMs,
  metricsHost: '0.0.0.0',
  countCheckCron: '37 3 * * *',
});

/**
 * The job's environment variables, their defaults and meaning: the source of `--help` and of the
 * README's table. Ranges come from the library's own limits, so the job refuses at startup what
 * `reapStaleGrants`/`purgeReleasedGrants` would refuse on every run.
 */
export const JOB_ENV: ReadonlyArray<{ name: string; default: string; meaning: string }> = Object.freeze([
  {
    name: 'MYSQL_URL',
    default: 'required',
    meaning: 'mysql://user:password@host:3306/database holding the lock tables',
  },
  {
    name: 'REAPER_CRON',
    default: JOB_DEFAULTS.cron,
    meaning: 'node-cron schedule; 6 fields for seconds (*/5 * * * * *)',
  },
  {
    name: 'REAPER_RUN_AT_START',
    default: '1',
    meaning: '1: run once at start, then on the schedule; 0: wait for the first scheduled time',
  },
  {
    name: 'STALE_AFTER_MS',
    default: String(DEFAULTS.staleAfterMs),
    meaning: `live grants older than this are released (1 to ${LIMITS.maxRetentionMs})`,
  },
  {
    name: 'REAPER_BATCH_SIZE',
    default: String(DEFAULTS.reap.batchSize),
    meaning: `grants released per transaction (1 to ${LIMITS.maxReapBatch})`,
  },
  {
    name: 'RETENTION_MS',
    default: String(JOB_DEFAULTS.retentionMs),
    meaning: `released grants older than this are purged from t_lock_log, never one released less than ${LIMITS.purgeFloorMs} ms ago; 0 keeps all (at most ${LIMITS.maxRetentionMs})`,
  },
  {
    name: 'METRICS_PORT',
    default: 'off',
    meaning:
      'serve /metrics (Prometheus; needs prom-client installed) and /healthz on this port; 0 picks a free one (logged)',
  },
  { name: 'METRICS_HOST', default: JOB_DEFAULTS.metricsHost, meaning: 'address the metrics server binds' },
  {
    name: 'COUNT_CHECK_CRON',
    default: JOB_DEFAULTS.countCheckCron,
    meaning:
      'schedule of a check that the lock counts agree with the live grants (reads the whole resource table, a page at a time); off: never',
  },
  {
    name: 'COUNT_REPAIR',
    default: '0',
    meaning:
      '1: the count check also sets counts that disagree from the log (as mysql-rwlock check --repair); 0: it only reports them',
  },
]);

/**
 * Reads and checks the job's settings from the environment (see JOB_ENV). Throws
 * InvalidOptionsError whose message starts with the variable's name.
 */
export function jobConfigFromEnv(env: NodeJS.ProcessEnv): ReaperJobConfig {
  const num = (name: string, fallback: number, min: number, max: number): number =>
    integerOption(name, envNumber(env, name) ?? fallback, min, max);
  const { connection, target } = parseConnectionUrl(env.MYSQL_URL);
  const expression = env.REAPER_CRON || JOB_DEFAULTS.cron;
  if (!cron.validate(expression))
    throw new InvalidOptionsError(`REAPER_CRON is not a valid cron expression: ${JSON.stringify(expression)}`);
  const atStart = env.REAPER_RUN_AT_START;
  if (atStart !== undefined && atStart !== '' && atStart !== '0' && atStart !== '1') {
    throw new InvalidOptionsError(`REAPER_RUN_AT_START must be 0 or 1, got ${JSON.stringify(atStart)}`);
  }
  const countCheck = env.COUNT_CHECK_CRON || JOB_DEFAULTS.countCheckCron;
  if (countCheck !== 'off' && !cron.validate(countCheck))
    throw new InvalidOptionsError(
      `COUNT_CHECK_CRON is not a valid cron expression or off: ${JSON.stringify(countCheck)}`,
    );
  const repair = env.COUNT_REPAIR;
  if (repair !== undefined && repair !== '' && repair !== '0' && repair !== '1')
    throw new InvalidOptionsError(`COUNT_REPAIR must be 0 or 1, got ${JSON.stringify(repair)}`);
  const metricsHost = env.METRICS_HOST || JOB_DEFAULTS.metricsHost;
  if (/[\s/]/.test(metricsHost))
    throw new InvalidOptionsError(`METRICS_HOST must be an address or host name, got ${JSON.stringify(metricsHost)}`);
  return {
    connection,
    target,
    cron: expression,
    runAtStart: atStart === undefined || atStart === '' ? JOB_DEFAULTS.runAtStart : atStart === '1',
    staleAfterMs: staleAfterOption(envNumber(env, 'STALE_AFTER_MS'), 'STALE_AFTER_MS'),
    batchSize: reapBatchOption(envNumber(env, 'REAPER_BATCH_SIZE'), 'REAPER_BATCH_SIZE'),
    retentionMs: retentionOption(envNumber(env, 'RETENTION_MS'), 'RETENTION_MS', true),
    metricsPort: env.METRICS_PORT === undefined || env.METRICS_PORT === '' ? null : num('METRICS_PORT', 0, 0, 65535),
    metricsHost,
    countCheckCron: countCheck === 'off' ? null : countCheck,
    countRepair: repair === '1',
  };
}

/**
 * The longest gap between runs of a cron expression, over its next ten runs: for an irregular
 * schedule (weekdays only, say) the longest, so that health is judged against the worst case.
 */
export function cronPeriodMs(expression: string): number {
  const task = cron.createTask(expression, () => undefined);
  try {
    const runs = task.getNextRuns(10).map((d) => d.getTime());
    let period = 0;
    for (let i = 1; i < runs.length; i++) period = Math.max(period, runs[i]! - runs[i - 1]!);
    return period;
  } finally {
    void task.destroy();
  }
}

/** Added to two periods: room for a run's own duration (batches, lock waits, purging). */
export const HEALTH_SLACK_MS = 30_000;

export interface HealthReport {
  healthy: boolean;
  /** 'ok'; 'starting': no run finished yet, within the window of the start; 'failed': the last run failed; 'late': no run finished within the window. */
  status: 'ok' | 'starting' | 'failed' | 'late';
  /** How recent the last finished run must be: two periods of the schedule plus HEALTH_SLACK_MS. */
  windowMs: number;
  /** The last finished run's log line, if any. */
  lastRun: LogLine | null;
  /** Milliseconds since the last run finished (or since the start, before any). */
  sinceMs: number;
}

/**
 * The job's health, fed its own run lines: healthy while the last finished run succeeded and
 * finished within two schedule periods plus HEALTH_SLACK_MS (a run that hangs becomes late).
 * Before the first run finishes it counts from the start, so REAPER_RUN_AT_START=0 on a long
 * schedule is healthy until its first run is overdue.
 */
export class ReaperHealth {
  readonly windowMs: number;
  #since: number;
  #lastRun: LogLine | null = null;

  constructor(periodMs: number, now = Date.now()) {
    this.windowMs = 2 * periodMs + HEALTH_SLACK_MS;
    this.#since = now;
  }

  observe(line: LogLine, now = Date.now()): void {
    if (line.event !== 'reaper.run') return;
    this.#lastRun = line;
    this.#since = now;
  }

  report(now = Date.now()): HealthReport {
    const sinceMs = now - this.#since;
    const status =
      sinceMs > this.windowMs
        ? 'late'
        : this.#lastRun === null
          ? 'starting'
          : this.#lastRun.ok === true
            ? 'ok'
            : 'failed';
    return {
      healthy: status === 'ok' || status === 'starting',
      status,
      windowMs: this.windowMs,
      lastRun: this.#lastRun,
      sinceMs,
    };
  }
}

export type LogLine = Record<string, unknown> & { event: string };

/**
 * One run: reap stale grants, then purge old released ones. Logs one line per reaped grant and one
 * per run. Resolves to the run line's `ok`: false when the run failed (the database refused or could
 * not be reached) or a grant could not be reaped for a reason other than being busy.
 */
export async function runReaperOnce(
  db: Knex,
  config: Pick<ReaperJobConfig, 'staleAfterMs' | 'batchSize' | 'retentionMs'>,
  log: (line: LogLine) => void,
): Promise<boolean> {
  const started = performance.now();
  try {
    const result = await reapStaleGrants(db, { staleAfterMs: config.staleAfterMs, batchSize: config.batchSize });
    for (const g of result.grants) {
      log({
        event: 'reaper.grant',
        id: g.id,
        resourceId: g.resourceId,
        mode: g.mode,
        owner: g.owner,
        ageMs: Math.round(g.ageMs),
      });
    }
    const { purged } =
      config.retentionMs > 0 ? await purgeReleasedGrants(db, { retentionMs: config.retentionMs }) : { purged: 0 };
    for (const problem of result.problems) log({ event: 'reaper.problem', problem });
    const ok = result.failed === 0;
    log({
      event: 'reaper.run',
      ok,
      reaped: result.reaped,
      skipped: result.skipped,
      failed: result.failed,
      purged,
      durationMs: Math.round(performance.now() - started),
    });
    return ok;
  } catch (err) {
    const e = err as Error & { code?: string };
    log({
      event: 'reaper.run',
      ok: false,
      error: e.message,
      code: e.code,
      // A missing privilege stops the run at its first refusal: the role whose grants it lacks.
      ...(err instanceof PrivilegeError && err.role !== undefined ? { role: err.role } : {}),
      durationMs: Math.round(performance.now() - started),
    });
    return false;
  }
}

/** Resource ids a count-check line names at most; the rest are counted. */
const LOGGED_RESOURCES = 20;

/**
 * One count check: finds counts that disagree with the live grants, and with `repair` sets them
 * from the log. Logs one `reaper.counts` line; `remaining` is what still disagrees after it (all it
 * found, or with `repair` the conflicting, skipped and refused ones). Resolves to the line's `ok`:
 * false when the database refused (a resource's repair, or the check) or could not be reached.
 */
export async function runCountCheck(db: Knex, repair: boolean, log: (line: LogLine) => void): Promise<boolean> {
  const started = performance.now();
  const ids = (found: CountDisagreement[]): string[] => found.slice(0, LOGGED_RESOURCES).map((d) => d.resourceId);
  try {
    if (repair) {
      const r = await repairLockCounts(db);
      log({
        event: 'reaper.counts',
        ok: r.problems.length === 0,
        problems: r.problems,
        repaired: r.repaired.length,
        conflicting: r.conflicting.length,
        skipped: r.skipped.length,
        more: r.more,
        remaining: r.conflicting.length + r.skipped.length + r.problems.length,
        resources: [...ids(r.repaired), ...ids(r.conflicting)].slice(0, LOGGED_RESOURCES),
        durationMs: Math.round(performance.now() - started),
      });
    } else {
      const r = await checkLockCounts(db);
      log({
        event: 'reaper.counts',
        ok: true,
        found: r.disagreements.length,
        more: r.more,
        remaining: r.disagreements.length,
        resources: ids(r.disagreements),
        durationMs: Math.round(performance.now() - started),
      });
    }
    return true;
  } catch (err) {
    const e = err as Error & { code?: string };
    log({
      event: 'reaper.counts',
      ok: false,
      error: e.message,
      code: e.code,
      durationMs: Math.round(performance.now() - started),
    });
    return false;
  }
}

/**
 * Schedules runReaperOnce, and runs it at once first when `runAtStart`. A run never overlaps the
 * previous one; `stop()` waits for the run in progress, so SIGTERM handling can stop, then close the
 * pool, then exit.
 */
export function scheduleReaper(
  db: Knex,
  config: Pick<
    ReaperJobConfig,
    'cron' | 'runAtStart' | 'staleAfterMs' | 'batchSize' | 'retentionMs' | 'countCheckCron' | 'countRepair'
  >,
  log: (line: LogLine) => void,
): { stop(): Promise<void> } {
  let running: Promise<boolean> | null = null;
  const tick = (): Promise<boolean> | undefined => {
    if (running) {
      log({ event: 'reaper.overlap', skipped: true });
      return undefined;
    }
    running = runReaperOnce(db, config, log).finally(() => {
      running = null;
    });
    return running;
  };
  const task = cron.schedule(config.cron, () => tick(), { name: 'mysql-rwlock-reaper', noOverlap: true });
  if (config.runAtStart) void tick();
  // A check skips its turn while the previous one still reads (a large table on a short schedule).
  let checking: Promise<boolean> | null = null;
  const countTask =
    config.countCheckCron === null
      ? null
      : cron.schedule(
          config.countCheckCron,
          () => {
            if (checking) return;
            checking = runCountCheck(db, config.countRepair, log).finally(() => {
              checking = null;
            });
          },
          { name: 'mysql-rwlock-count-check', noOverlap: true },
        );
  return {
    async stop() {
      for (const t of [task, countTask]) {
        await t?.stop();
        await t?.destroy();
      }
      await Promise.all([running, checking]);
    },
  };
}
