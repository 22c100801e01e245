// The reaper job's settings from the environment, apart from MYSQL_URL (its checks are in
// test/reaper-job.test.ts): defaults when unset, and a typed error naming the variable when bad.
// The job's exit 2 and its one log line for such an error are spawned there as well.
// covers: src/reaper-daemon/job.ts
import { describe, expect, it } from 'vitest';
import { InvalidOptionsError } from '../../src/errors.js';
import { DEFAULTS, LIMITS } from '../../src/options.js';
import { JOB_DEFAULTS, jobConfigFromEnv } from '../../src/reaper-daemon/job.js';

const MYSQL_URL = 'mysql://reaper:pw@db.internal:3306/app';

describe('jobConfigFromEnv', () => {
  it('takes the documented default for every variable left unset or empty', () => {
    const expected = {
      cron: JOB_DEFAULTS.cron,
      runAtStart: true,
      staleAfterMs: DEFAULTS.staleAfterMs,
      batchSize: DEFAULTS.reap.batchSize,
      retentionMs: JOB_DEFAULTS.retentionMs,
      metricsPort: null,
      metricsHost: JOB_DEFAULTS.metricsHost,
      countCheckCron: JOB_DEFAULTS.countCheckCron,
      countRepair: false,
    };
    expect(jobConfigFromEnv({ MYSQL_URL })).toMatchObject(expected);
    const empty = [
      'REAPER_CRON',
      'REAPER_RUN_AT_START',
      'STALE_AFTER_MS',
      'REAPER_BATCH_SIZE',
      'RETENTION_MS',
      'METRICS_PORT',
      'METRICS_HOST',
      'COUNT_CHECK_CRON',
      'COUNT_REPAIR',
    ];
    expect(jobConfigFromEnv({ MYSQL_URL, ...Object.fromEntries(empty.map((name) => [name, ''])) })).toMatchObject(
      expected,
    );
  });

  it('reads every variable it is given', () => {
    const config = jobConfigFromEnv({
      MYSQL_URL,
      REAPER_CRON: '*/5 * * * * *',
      REAPER_RUN_AT_START: '0',
      STALE_AFTER_MS: '30000',
      REAPER_BATCH_SIZE: String(LIMITS.maxReapBatch),
      RETENTION_MS: '0',
      METRICS_PORT: '0',
      METRICS_HOST: '127.0.0.1',
      COUNT_CHECK_CRON: 'off',
      COUNT_REPAIR: '1',
    });
    expect(config).toMatchObject({
      cron: '*/5 * * * * *',
      runAtStart: false,
      staleAfterMs: 30_000,
      batchSize: LIMITS.maxReapBatch,
      retentionMs: 0,
      metricsPort: 0,
      metricsHost: '127.0.0.1',
      countCheckCron: null,
      countRepair: true,
    });
  });

  it('refuses a bad value with InvalidOptionsError whose message starts with the variable', () => {
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ REAPER_CRON: 'every minute' }, /^REAPER_CRON is not a valid cron expression/],
      [{ REAPER_RUN_AT_START: 'yes' }, /^REAPER_RUN_AT_START must be 0 or 1, got "yes"/],
      [{ STALE_AFTER_MS: '-5' }, /^STALE_AFTER_MS/],
      [{ STALE_AFTER_MS: '0' }, /^STALE_AFTER_MS must be an integer from 1/],
      [{ REAPER_BATCH_SIZE: '20000' }, /^REAPER_BATCH_SIZE must be an integer from 1 to 10000, got 20000/],
      [{ REAPER_BATCH_SIZE: '0' }, /^REAPER_BATCH_SIZE/],
      [{ RETENTION_MS: 'a week' }, /^RETENTION_MS/],
      [{ METRICS_PORT: '70000' }, /^METRICS_PORT must be an integer from 0 to 65535, got 70000/],
      [{ METRICS_PORT: 'http' }, /^METRICS_PORT/],
      [{ METRICS_HOST: 'http://x/' }, /^METRICS_HOST must be an address or host name/],
      [{ COUNT_CHECK_CRON: 'daily' }, /^COUNT_CHECK_CRON is not a valid cron expression or off/],
      [{ COUNT_REPAIR: 'yes' }, /^COUNT_REPAIR must be 0 or 1/],
    ];
    for (const [env, message] of cases) {
      const what = JSON.stringify(env);
      const err = (() => {
        try {
          jobConfigFromEnv({ MYSQL_URL, ...env });
          return undefined;
        } catch (e) {
          return e;
        }
      })();
      expect(err, what).toBeInstanceOf(InvalidOptionsError);
      expect((err as Error).message, what).toMatch(message);
    }
  });
});
