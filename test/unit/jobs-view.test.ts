// The jobs view (src/sql/jobs.ts) finds jobs by the resource ids their helpers take: node-cron's fire
// key, which it restates (src/sql sits below the coordinator).
// covers: src/sql/jobs.ts
import { describe, expect, it } from 'vitest';
import { CRON_FIRE_CHARS, CRON_FIRE_LIKE } from '../../src/sql/jobs.js';

/** SQL LIKE over ASCII: `%` any run, `_` one character. */
function like(pattern: string, text: string): boolean {
  const re = pattern
    .replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
    .replace(/%/g, '.*')
    .replace(/_/g, '.');
  return new RegExp(`^${re}$`, 's').test(text);
}

describe('the ids the jobs view recognises', () => {
  it("matches node-cron's fire key (the task's name, ':' and Date.toISOString()), and its length", () => {
    const fire = new Date(Date.UTC(2026, 11, 3, 3, 0, 0));
    const key = `cron:daily:report:${fire.toISOString()}`;
    expect(like(CRON_FIRE_LIKE, key)).toBe(true);
    expect(key.slice(0, key.length - CRON_FIRE_CHARS)).toBe('cron:daily:report');
    // Not a fire key: no time, a date without milliseconds, a local time.
    for (const other of ['cron:daily', 'cron:daily:2026-12-03T03:00:00Z', 'x:2026-12-03T03:00:00.000+01:00'])
      expect(like(CRON_FIRE_LIKE, other), other).toBe(false);
  });
});
