// A paused or dead section holder. The section bounds, for its own transaction, how long the server
// keeps its idle connection (sectionIdleTimeoutMs): a SIGSTOPped holder loses its connection, its
// transaction rolls back and frees the row, and its late commit writes nothing. Negative control:
// without the bound the same pause blocks the next acquirer past it. A SIGKILLed holder leaves
// nothing for the reaper.
// covers: src/lock/sections/section-attempt.ts, src/lock/sections/section-commit.ts
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { databaseUrl } from '../harness/database.js';
import { createLockManager, LockTimeoutError } from '../src/index.js';
import { TEST_PROCEDURES, useTestDatabase } from './support/db.js';
import { invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);
const REPO = join(import.meta.dirname, '..');
/** The bound under test: the server counts it in whole seconds. */
const IDLE_MS = 1_000;
/** What the section promises: the next acquirer is granted within the bound plus this. */
const SLACK_MS = 1_000;

interface Child {
  proc: ChildProcess;
  /** Resolves with the first line of output ({"taken":true}). */
  taken: Promise<void>;
  /** Resolves with the last JSON line when the process exits. */
  exited: Promise<{ code: number | null; last: unknown; stderr: string }>;
}

function startChild(resource: string, bound: 'on' | 'off'): Child {
  const proc = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/section-pause-worker.ts'], {
    cwd: REPO,
    env: {
      ...process.env,
      MYSQL_URL: databaseUrl(db.url, db.name),
      RESOURCE: resource,
      IDLE_MS: String(IDLE_MS),
      BOUND: bound,
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let onTaken!: () => void;
  const taken = new Promise<void>((resolve) => (onTaken = resolve));
  proc.stdout!.on('data', (d: Buffer) => {
    stdout += d.toString();
    if (stdout.includes('"taken":true')) onTaken();
  });
  proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<{ code: number | null; last: unknown; stderr: string }>((resolve) =>
    proc.on('close', (code) => {
      const last = stdout.trim().split('\n').at(-1) ?? '';
      resolve({ code, last: last.startsWith('{') ? JSON.parse(last) : last, stderr });
    }),
  );
  return { proc, taken, exited };
}

async function effects(resource: string): Promise<string[]> {
  const [rows] = (await db.knex.raw('SELECT tag FROM pause_effects WHERE tag LIKE ? ORDER BY tag', [
    `${resource}:%`,
  ])) as unknown as [Array<{ tag: string }>];
  return rows.map((r) => r.tag);
}

async function logRows(resource: string): Promise<Array<{ owner: string; status: number; released_by: number }>> {
  const [rows] = (await db.knex.raw(
    'SELECT owner, status, released_by FROM t_lock_log WHERE resource_id = ? ORDER BY id',
    [Buffer.from(resource)],
  )) as unknown as [Array<{ owner: string; status: number; released_by: number }>];
  return rows.map((r) => ({ owner: r.owner, status: Number(r.status), released_by: Number(r.released_by) }));
}

/** The parent's section on the same resource: ms from the child's last statement to its grant. */
async function nextSection(resource: string, waitMs: number, since: number): Promise<number> {
  const locks = createLockManager({ knex: db.knex, owner: 'parent' });
  let grantedAt = 0;
  await locks.withWriteLock(
    resource,
    async (trx) => {
      grantedAt = performance.now();
      await trx.raw('INSERT INTO pause_effects (tag) VALUES (?)', [`${resource}:parent`]);
    },
    { section: true, waitMs },
  );
  return grantedAt - since;
}

describe('a paused section holder', () => {
  it('loses its row after sectionIdleTimeoutMs: the next section is granted within the bound + 1 s, the late commit writes nothing', async () => {
    await db.knex.raw('CREATE TABLE IF NOT EXISTS pause_effects (tag VARCHAR(64) PRIMARY KEY) ENGINE=InnoDB');
    const child = startChild('paused', 'on');
    await child.taken;
    const since = performance.now();
    child.proc.kill('SIGSTOP');
    const waited = await nextSection('paused', 10_000, since);
    console.log(`[section-pause] bound ${IDLE_MS} ms: next section granted ${Math.round(waited)} ms after the pause`);
    expect(waited).toBeLessThan(IDLE_MS + SLACK_MS);
    child.proc.kill('SIGCONT');
    child.proc.stdin!.write('go\n');
    const run = await child.exited;
    expect(run.code, run.stderr).toBe(0);
    expect(run.last).toMatchObject({ outcome: expect.stringMatching(/^error: /) });
    expect(await effects('paused')).toEqual(['paused:parent']);
    // With the section procedures the child's commit is its first statement after the pause: it
    // settled that lost commit by writing a withdrawn row under its token (never a grant). Without
    // them the release time goes first, as a statement of its own: it found the connection gone, so
    // no COMMIT was ever sent and there was nothing to settle.
    expect(await logRows('paused')).toEqual([
      { owner: 'parent', status: 2, released_by: 5 },
      ...(TEST_PROCEDURES ? [{ owner: '', status: 2, released_by: 4 }] : []),
    ]);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('negative control: without the bound, the same pause blocks the next section past it', async () => {
    await db.knex.raw('CREATE TABLE IF NOT EXISTS pause_effects (tag VARCHAR(64) PRIMARY KEY) ENGINE=InnoDB');
    const child = startChild('unbounded', 'off');
    await child.taken;
    const since = performance.now();
    child.proc.kill('SIGSTOP');
    const waitMs = IDLE_MS + SLACK_MS + 500;
    await expect(nextSection('unbounded', waitMs, since)).rejects.toBeInstanceOf(LockTimeoutError);
    const blocked = performance.now() - since;
    console.log(`[section-pause] no bound: next section still blocked after ${Math.round(blocked)} ms`);
    expect(blocked).toBeGreaterThan(IDLE_MS + SLACK_MS);
    child.proc.kill('SIGCONT');
    child.proc.stdin!.write('go\n');
    const run = await child.exited;
    expect(run.last).toEqual({ outcome: 'committed' });
    expect(await effects('unbounded')).toEqual(['unbounded:child']);
  });

  it('a SIGKILLed holder leaves no live grant and no write: the next section goes ahead', async () => {
    await db.knex.raw('CREATE TABLE IF NOT EXISTS pause_effects (tag VARCHAR(64) PRIMARY KEY) ENGINE=InnoDB');
    const child = startChild('killed', 'on');
    await child.taken;
    const since = performance.now();
    child.proc.kill('SIGKILL');
    await child.exited;
    const waited = await nextSection('killed', 10_000, since);
    console.log(`[section-pause] killed holder: next section granted ${Math.round(waited)} ms after the kill`);
    expect(waited).toBeLessThan(IDLE_MS + SLACK_MS);
    expect(await effects('killed')).toEqual(['killed:parent']);
    expect(await logRows('killed')).toEqual([{ owner: 'parent', status: 2, released_by: 5 }]);
    const [live] = (await db.knex.raw('SELECT COUNT(*) AS n FROM t_lock_log WHERE status = 0')) as unknown as [
      Array<{ n: number }>,
    ];
    expect(Number(live[0]!.n)).toBe(0);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });
});
