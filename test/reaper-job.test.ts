// The scheduled reaper process: structured log lines per run and per reaped grant, clean exit on SIGTERM.
import { spawn, spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { databaseUrl } from '../harness/database.js';
import { createLockManager } from '../src/index.js';
import { useTestDatabase } from './support/db.js';
import { backdate, grantRow } from './support/state.js';

const db = useTestDatabase(import.meta.filename);

describe('jobs/reaper.ts', () => {
  it('reaps on schedule, logs one line per grant and per run, and exits 0 on SIGTERM', async () => {
    const locks = createLockManager({ knex: db.knex });
    const stale = await locks.tryAcquireWrite('job-stale');
    const fresh = await locks.tryAcquireRead('job-fresh');
    await backdate(db.knex, stale!.id, 120_000);
    const child = spawn(process.execPath, ['--import', 'tsx', 'jobs/reaper.ts'], {
      env: { ...process.env, MYSQL_URL: databaseUrl(db.url, db.name), REAPER_CRON: '* * * * * *', STALE_AFTER_MS: '60000' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines: Array<Record<string, unknown>> = [];
    let buffer = '';
    child.stdout.on('data', (d: Buffer) => {
      buffer += d.toString();
      const parts = buffer.split('\n');
      buffer = parts.pop()!;
      for (const p of parts) lines.push(JSON.parse(p) as Record<string, unknown>);
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    await expect.poll(() => lines.filter((l) => l.event === 'reaper.run').length, { timeout: 15_000 }).toBeGreaterThanOrEqual(2);
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    const grantLines = lines.filter((l) => l.event === 'reaper.grant');
    expect(grantLines).toEqual([expect.objectContaining({ id: stale!.id, resourceId: 'job-stale', mode: 'write' })]);
    const runs = lines.filter((l) => l.event === 'reaper.run');
    expect(runs[0]).toMatchObject({ ok: true, reaped: 1, skipped: 0 });
    expect(runs.slice(1).every((r) => r.reaped === 0 && r.ok === true)).toBe(true);
    expect(lines.at(-1)).toMatchObject({ event: 'reaper.stop', signal: 'SIGTERM' });
    expect(lines.every((l) => typeof l.ts === 'string')).toBe(true);
    expect(await grantRow(db.knex, stale!.id)).toMatchObject({ status: 2, released_by: 2 });
    expect(await grantRow(db.knex, fresh!.id)).toMatchObject({ status: 0 });
    await fresh!.release();
  });

  it('refuses bad configuration with a structured line and a non-zero exit', () => {
    const run = (env: Record<string, string>) =>
      spawnSync(process.execPath, ['--import', 'tsx', 'jobs/reaper.ts', '--once'], {
        env: { ...process.env, MYSQL_URL: '', ...env },
        encoding: 'utf8',
      });
    const noUrl = run({});
    expect(noUrl.status).toBe(2);
    expect(JSON.parse(noUrl.stdout)).toMatchObject({ event: 'reaper.config', ok: false, error: expect.stringMatching(/MYSQL_URL/) });
    const badCron = run({ MYSQL_URL: databaseUrl(db.url, db.name), REAPER_CRON: 'every minute' });
    expect(badCron.status).toBe(1);
    expect(JSON.parse(badCron.stdout)).toMatchObject({ event: 'reaper.fatal', error: expect.stringMatching(/^REAPER_CRON/) });
    const badStale = run({ MYSQL_URL: databaseUrl(db.url, db.name), STALE_AFTER_MS: '-5' });
    expect(JSON.parse(badStale.stdout)).toMatchObject({ event: 'reaper.fatal', error: expect.stringMatching(/^STALE_AFTER_MS/) });
  });
});
