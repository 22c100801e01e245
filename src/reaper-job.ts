import type { Knex } from 'knex';
import cron from 'node-cron';
import { InvalidOptionsError } from './errors.js';
import { DEFAULTS, LIMITS, REAP_DEFAULTS, integerOption } from './options.js';
import { purgeReleasedGrants, reapStaleGrants } from './reaper.js';

export interface ReaperJobConfig {
  /** MYSQL_URL, checked: mysql:// or mariadb://, a host, a port in range if given, a database. */
  url: string;
  /** Where the job connects, for log lines: `user@host:port/database`, never the password. */
  target: string;
  /** Cron expression (node-cron; 5 fields, or 6 with seconds). @defaultValue '* * * * *' */
  cron: string;
  /** Run once as soon as the job starts, then on the schedule. @defaultValue true */
  runAtStart: boolean;
  staleAfterMs: number;
  batchSize: number;
  /** Released grants older than this are purged each run; 0 disables purging. @defaultValue 604800000 */
  retentionMs: number;
}

export const JOB_DEFAULTS = Object.freeze({ cron: '* * * * *', runAtStart: true, retentionMs: REAP_DEFAULTS.retentionMs });

/**
 * The job's environment variables, their defaults and meaning: the source of `--help` and of the
 * README's table. Ranges come from the library's own limits, so the job refuses at startup what
 * `reapStaleGrants`/`purgeReleasedGrants` would refuse on every run.
 */
export const JOB_ENV: ReadonlyArray<{ name: string; default: string; meaning: string }> = Object.freeze([
  { name: 'MYSQL_URL', default: 'required', meaning: 'mysql://user:password@host:3306/database holding the lock tables' },
  { name: 'REAPER_CRON', default: JOB_DEFAULTS.cron, meaning: 'node-cron schedule; 6 fields for seconds (*/5 * * * * *)' },
  { name: 'REAPER_RUN_AT_START', default: '1', meaning: '1: run once at start, then on the schedule; 0: wait for the first scheduled time' },
  { name: 'STALE_AFTER_MS', default: String(DEFAULTS.staleAfterMs), meaning: `live grants older than this are released (1 to ${LIMITS.maxRetentionMs})` },
  { name: 'REAPER_BATCH_SIZE', default: String(REAP_DEFAULTS.batchSize), meaning: `grants released per transaction (1 to ${LIMITS.maxReapBatch})` },
  { name: 'RETENTION_MS', default: String(JOB_DEFAULTS.retentionMs), meaning: `released grants older than this are purged from t_lock_log; 0 keeps all (at most ${LIMITS.maxRetentionMs})` },
]);

const URL_EXAMPLE = 'mysql://user:password@host:3306/database';

/**
 * Checks MYSQL_URL before anything connects. knex reads a string it cannot parse as a sqlite file
 * name, which mysql2 then ignores: a typo would become an anonymous connection to localhost:3306.
 * Messages start with MYSQL_URL and never contain the password.
 */
export function checkMysqlUrl(raw: string | undefined): { url: string; target: string } {
  if (raw === undefined || raw === '') throw new InvalidOptionsError(`MYSQL_URL is required, e.g. ${URL_EXAMPLE}`);
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(raw)?.[1]?.toLowerCase();
  if (scheme !== 'mysql' && scheme !== 'mariadb') {
    throw new InvalidOptionsError(`MYSQL_URL must start with mysql:// (or mariadb://), got ${scheme ? `${scheme}://` : 'no scheme'}; e.g. ${URL_EXAMPLE}`);
  }
  // The authority's port, read before URL() does: URL() rejects an out-of-range port as a whole.
  const port = /^[^:]+:\/\/(?:[^@/?#]*@)?(?:\[[^\]]*\]|[^:/?#]*)(?::([^/?#]*))?/.exec(raw)?.[1];
  if (port !== undefined && !(/^\d{1,5}$/.test(port) && Number(port) >= 1 && Number(port) <= 65535)) {
    throw new InvalidOptionsError(`MYSQL_URL has port ${JSON.stringify(port)}; a port is 1 to 65535`);
  }
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new InvalidOptionsError(`MYSQL_URL is not a valid URL; expected ${URL_EXAMPLE} (special characters in the password percent-encoded)`);
  }
  if (u.hostname === '') throw new InvalidOptionsError(`MYSQL_URL has no host; expected ${URL_EXAMPLE}`);
  const database = u.pathname.replace(/^\//, '');
  if (database === '' || database.includes('/')) {
    throw new InvalidOptionsError(`MYSQL_URL names no database (the path after the host); expected ${URL_EXAMPLE}`);
  }
  let user: string;
  try {
    user = decodeURIComponent(u.username);
    decodeURIComponent(u.password);
  } catch {
    throw new InvalidOptionsError('MYSQL_URL has a user or password that is not valid percent-encoding (write % as %25)');
  }
  if (user) user += '@';
  return { url: raw, target: `${user}${u.hostname}:${u.port || 3306}/${database}` };
}

/**
 * Reads and checks the job's settings from the environment (see JOB_ENV). Throws
 * InvalidOptionsError whose message starts with the variable's name.
 */
export function jobConfigFromEnv(env: NodeJS.ProcessEnv): ReaperJobConfig {
  const num = (name: string, fallback: number, min: number, max: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    return integerOption(name, /^\d+$/.test(raw) ? Number(raw) : raw, min, max);
  };
  const { url, target } = checkMysqlUrl(env.MYSQL_URL);
  const expression = env.REAPER_CRON || JOB_DEFAULTS.cron;
  if (!cron.validate(expression)) throw new InvalidOptionsError(`REAPER_CRON is not a valid cron expression: ${JSON.stringify(expression)}`);
  const atStart = env.REAPER_RUN_AT_START;
  if (atStart !== undefined && atStart !== '' && atStart !== '0' && atStart !== '1') {
    throw new InvalidOptionsError(`REAPER_RUN_AT_START must be 0 or 1, got ${JSON.stringify(atStart)}`);
  }
  return {
    url,
    target,
    cron: expression,
    runAtStart: atStart === undefined || atStart === '' ? JOB_DEFAULTS.runAtStart : atStart === '1',
    staleAfterMs: num('STALE_AFTER_MS', DEFAULTS.staleAfterMs, 1, LIMITS.maxRetentionMs),
    batchSize: num('REAPER_BATCH_SIZE', REAP_DEFAULTS.batchSize, 1, LIMITS.maxReapBatch),
    retentionMs: num('RETENTION_MS', JOB_DEFAULTS.retentionMs, 0, LIMITS.maxRetentionMs),
  };
}

export type LogLine = Record<string, unknown> & { event: string };

/**
 * One run: reap stale grants, then purge old released ones. Logs one line per reaped grant and one
 * per run. Resolves to the run line's `ok`: false when the run failed (the database refused or could
 * not be reached) or a grant could not be reaped for a reason other than being busy.
 */
export async function runReaperOnce(db: Knex, config: Pick<ReaperJobConfig, 'staleAfterMs' | 'batchSize' | 'retentionMs'>, log: (line: LogLine) => void): Promise<boolean> {
  const started = performance.now();
  try {
    const result = await reapStaleGrants(db, { staleAfterMs: config.staleAfterMs, batchSize: config.batchSize });
    for (const g of result.grants) {
      log({ event: 'reaper.grant', id: g.id, resourceId: g.resourceId, mode: g.mode, owner: g.owner, ageMs: Math.round(g.ageMs) });
    }
    const { purged } = config.retentionMs > 0 ? await purgeReleasedGrants(db, { retentionMs: config.retentionMs }) : { purged: 0 };
    for (const problem of result.problems) log({ event: 'reaper.problem', problem });
    const ok = result.failed === 0;
    log({ event: 'reaper.run', ok, reaped: result.reaped, skipped: result.skipped, failed: result.failed, purged, durationMs: Math.round(performance.now() - started) });
    return ok;
  } catch (err) {
    const e = err as Error & { code?: string };
    log({ event: 'reaper.run', ok: false, error: e.message, code: e.code, durationMs: Math.round(performance.now() - started) });
    return false;
  }
}

/**
 * Schedules runReaperOnce, and runs it at once first when `runAtStart`. A run never overlaps the
 * previous one; `stop()` waits for the run in progress, so SIGTERM handling can stop, then close the
 * pool, then exit.
 */
export function scheduleReaper(db: Knex, config: Pick<ReaperJobConfig, 'cron' | 'runAtStart' | 'staleAfterMs' | 'batchSize' | 'retentionMs'>, log: (line: LogLine) => void): { stop(): Promise<void> } {
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
  return {
    async stop() {
      await task.stop();
      await task.destroy();
      await running;
    },
  };
}
