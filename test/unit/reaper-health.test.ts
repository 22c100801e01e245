// The reaper job's health window and the cron period it is computed from: pure functions of
// time, no server (the job serving them on /healthz is in test/reaper-job.test.ts).
// covers: src/reaper-daemon/job.ts
import { describe, expect, it } from 'vitest';
import { HEALTH_SLACK_MS, ReaperHealth, cronPeriodMs } from '../../src/reaper-daemon/job.js';

describe("the reaper job's health", () => {
  it('health turns late when no run finished within two periods plus the slack, and counts from the start before the first run', () => {
    expect(cronPeriodMs('*/5 * * * * *')).toBe(5_000);
    expect(cronPeriodMs('* * * * *')).toBe(60_000);
    expect(cronPeriodMs('0 9 * * 1-5')).toBe(3 * 24 * 3_600_000); // Friday to Monday
    const h = new ReaperHealth(5_000, 0);
    const window = 10_000 + HEALTH_SLACK_MS;
    expect(h.report(window)).toMatchObject({ healthy: true, status: 'starting' });
    expect(h.report(window + 1)).toMatchObject({ healthy: false, status: 'late' });
    h.observe({ event: 'reaper.run', ok: true }, 50_000);
    h.observe({ event: 'reaper.grant', id: 1 }, 60_000); // not a run: changes nothing
    expect(h.report(50_000 + window)).toMatchObject({ healthy: true, status: 'ok', sinceMs: window });
    expect(h.report(50_001 + window)).toMatchObject({ healthy: false, status: 'late' });
    h.observe({ event: 'reaper.run', ok: false }, 100_000);
    expect(h.report(100_000)).toMatchObject({ healthy: false, status: 'failed' });
  });
});
