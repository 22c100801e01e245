import type { Knex } from 'knex';
import cron from 'node-cron';
import { InvalidOptionsError } from './errors.js';
import { DEFAULTS, integerOption } from './options.js';
import { purgeReleasedGrants, reapStaleGrants, REAP_DEFAULTS } from './reaper.js';

export interface ReaperJobConfig {
  /** Cron expression (node-cron; 5 fields, or 6 with seconds). @defaultValue '* * * * *' */
  cron: string;
  staleAfterMs: number;
  batchSize: number;
  /** Released grants older than this are purged each run; 0 disables purging. @defaultValue 604800000 */
  retentionMs: number;
}

export const JOB_DEFAULTS = Object.freeze({ cron: '* * * * *', retentionMs: 604_800_000 });

/** Reads the job's settings from the environment (REAPER_CRON, STALE_AFTER_MS, REAPER_BATCH_SIZE, RETENTION_MS). */
export function jobConfigFromEnv(env: NodeJS.ProcessEnv): ReaperJobConfig {
  const num = (name: string, fallback: number, min: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    return integerOption(name, /^\d+$/.test(raw) ? Number(raw) : raw, min);
  };
  const expression = env.REAPER_CRON || JOB_DEFAULTS.cron;
  if (!cron.validate(expression)) throw new InvalidOptionsError(`REAPER_CRON: not a valid cron expression: ${JSON.stringify(expression)}`);
  return {
    cron: expression,
    staleAfterMs: num('STALE_AFTER_MS', DEFAULTS.staleAfterMs, 1),
    batchSize: num('REAPER_BATCH_SIZE', REAP_DEFAULTS.batchSize, 1),
    retentionMs: num('RETENTION_MS', JOB_DEFAULTS.retentionMs, 0),
  };
}

export type LogLine = Record<string, unknown> & { event: string };

/** One run: reap stale grants, then purge old released ones. Logs one line per reaped grant and one per run. */
export async function runReaperOnce(db: Knex, config: ReaperJobConfig, log: (line: LogLine) => void): Promise<void> {
  const started = performance.now();
  try {
    const result = await reapStaleGrants(db, { staleAfterMs: config.staleAfterMs, batchSize: config.batchSize });
    for (const g of result.grants) {
      log({ event: 'reaper.grant', id: g.id, resourceId: g.resourceId, mode: g.mode, owner: g.owner, ageMs: Math.round(g.ageMs) });
    }
    const { purged } = config.retentionMs > 0 ? await purgeReleasedGrants(db, { retentionMs: config.retentionMs }) : { purged: 0 };
    for (const problem of result.problems) log({ event: 'reaper.problem', problem });
    log({ event: 'reaper.run', ok: result.failed === 0, reaped: result.reaped, skipped: result.skipped, failed: result.failed, purged, durationMs: Math.round(performance.now() - started) });
  } catch (err) {
    const e = err as Error & { code?: string };
    log({ event: 'reaper.run', ok: false, error: e.message, code: e.code, durationMs: Math.round(performance.now() - started) });
  }
}

/**
 * Schedules runReaperOnce. A run never overlaps the previous one; `stop()` waits for the run in
 * progress, so SIGTERM handling can stop, then close the pool, then exit.
 */
export function scheduleReaper(db: Knex, config: ReaperJobConfig, log: (line: LogLine) => void): { stop(): Promise<void> } {
  let running: Promise<void> | null = null;
  const task = cron.schedule(
    config.cron,
    () => {
      if (running) {
        log({ event: 'reaper.overlap', skipped: true });
        return;
      }
      running = runReaperOnce(db, config, log).finally(() => {
        running = null;
      });
      return running;
    },
    { name: 'mysql-rwlock-reaper', noOverlap: true },
  );
  return {
    async stop() {
      await task.stop();
      await task.destroy();
      await running;
    },
  };
}
