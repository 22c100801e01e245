// Property 1 (docs/guarantees.md): readers share; a writer excludes readers and writers — across 4 OS processes with
// 16 concurrent workers on a few hot resources, judged by an effect check and by the grant log.
// covers: src/lock/durable/durable-acquire.ts, src/lock/durable/grant.ts, src/sql/acquire.ts, src/sql/release.ts
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { databaseUrl } from '../harness/database.js';
import { CURRENT_PROCEDURES } from '../migrations/index.js';
import { useTestDatabase, type TestDatabase } from './support/db.js';
import { createEffectTables, judgeEffects } from './support/effects.js';
import { invariantViolations } from './support/state.js';

const good = useTestDatabase(`${import.meta.filename}-good`);
// The broken variant is a procedure: this database has them whatever the lane.
const broken = useTestDatabase(`${import.meta.filename}-broken`, { procedures: true });
const RESOURCES = ['hot-a', 'hot-b', 'hot-c'];

interface Tally {
  writes: number;
  reads: number;
  readChanged: number;
  errors: string[];
}

function runWorker(db: TestDatabase): Promise<Tally> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/effect-worker.ts'], {
      env: {
        ...process.env,
        MYSQL_URL: databaseUrl(db.url, db.name),
        RESOURCES: RESOURCES.join(','),
        OPS: '40',
        CONCURRENCY: '4',
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.on('exit', (code) =>
      code === 0 ? resolve(JSON.parse(out) as Tally) : reject(new Error(`worker exited ${code}`)),
    );
  });
}

async function runWorkload(db: TestDatabase): Promise<Tally[]> {
  await createEffectTables(db.knex, RESOURCES);
  return Promise.all(Array.from({ length: 4 }, () => runWorker(db)));
}

describe('mutual exclusion across processes', () => {
  it('4 processes x 4 workers: no lost update, no overlapping write interval, no write during a read', async () => {
    const tallies = await runWorkload(good);
    const writes = tallies.reduce((s, t) => s + t.writes, 0);
    expect(tallies.flatMap((t) => t.errors)).toEqual([]);
    expect(tallies.reduce((s, t) => s + t.readChanged, 0)).toBe(0);
    const verdict = await judgeEffects(good.knex, RESOURCES);
    expect(verdict).toMatchObject({ effects: writes, lostUpdates: 0, overlaps: 0 });
    expect(verdict.writeGrants).toBe(writes);
    expect(await invariantViolations(good.knex)).toEqual([]);
  }, 180_000);

  it('negative control: with the reference acquire (no w_count/r_count guard) the same check finds lost updates and overlaps', async () => {
    // Defect 1 of the reference design: the writer's UPDATE does not check the counts.
    const acquire = CURRENT_PROCEDURES.rwlock_acquire!.replaceAll(
      'WHERE resource_id = p_resource AND w_count = 0 AND r_count = 0;',
      'WHERE resource_id = p_resource;',
    );
    expect(acquire).not.toBe(CURRENT_PROCEDURES.rwlock_acquire);
    await broken.knex.raw('DROP PROCEDURE rwlock_acquire');
    await broken.knex.raw(acquire);
    await runWorkload(broken);
    const verdict = await judgeEffects(broken.knex, RESOURCES);
    expect(verdict.lostUpdates).toBeGreaterThan(0);
    expect(verdict.overlaps).toBeGreaterThan(0);
  }, 180_000);
});
