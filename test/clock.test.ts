// Property 6 (docs/guarantees.md): every time comparison uses the database clock. A reaper process whose own clock runs
// an hour ahead (libfaketime) reaps nothing early.
// covers: src/sql/clock.ts, src/sql/reap.ts, jobs/reaper.ts
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { findBinary } from '../harness/server.js';
import { databaseUrl } from '../harness/database.js';
import { createLockManager } from '../src/index.js';
import { useTestDatabase } from './support/db.js';
import { backdate, grantRow } from './support/state.js';

const db = useTestDatabase(import.meta.filename);

function runAnHourAhead(script: string, extraArgs: string[] = []): Array<Record<string, unknown>> {
  const faketime = findBinary(['faketime']);
  if (!faketime) throw new Error('this test needs libfaketime: apt-get install faketime');
  const result = spawnSync(faketime, ['-f', '+1h', process.execPath, '--import', 'tsx', script, ...extraArgs], {
    env: {
      ...process.env,
      MYSQL_URL: databaseUrl(db.url, db.name),
      STALE_AFTER_MS: '600000',
      RETENTION_MS: '0',
      FAKETIME_DONT_FAKE_MONOTONIC: '1',
    },
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (result.status !== 0) throw new Error(`${script} failed (${result.status}): ${result.stderr}`);
  return result.stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe('database clock', () => {
  it('the reaper job an hour ahead reaps a two-minute-old grant not at all', async () => {
    const locks = createLockManager({ knex: db.knex });
    const g = await locks.tryAcquireWrite('clock-1');
    await backdate(db.knex, g!.id, 120_000);
    const lines = runAnHourAhead('jobs/reaper.ts', ['--once']);
    const run = lines.find((l) => l.event === 'reaper.run');
    // The process really ran an hour ahead: its own log timestamp says so.
    expect(Date.parse(String(run!.ts)) - Date.now()).toBeGreaterThan(3_500_000);
    expect(run).toMatchObject({ ok: true, reaped: 0 });
    expect(await grantRow(db.knex, g!.id)).toMatchObject({ status: 0 });
    await g!.release();
  });

  it('negative control: a reaper that uses its own clock reaps the same grant early', async () => {
    const locks = createLockManager({ knex: db.knex });
    const g = await locks.tryAcquireWrite('clock-2');
    await backdate(db.knex, g!.id, 120_000);
    const [line] = runAnHourAhead('test/fixtures/client-clock-reaper.ts');
    expect(line).toMatchObject({ reaped: 1 });
    expect(await grantRow(db.knex, g!.id)).toMatchObject({ status: 2 });
  });
});
