// docs/leader.md carries examples/leader/cron.ts verbatim, and it runs as written on two processes:
// one leads and runs the node-cron task, its ticks fenced by its term; SIGTERM to it hands over to
// the other at once (measured: under a second), whose ticks carry a higher term.
// covers: src/lock/leader/campaign.ts
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { databaseUrl } from '../harness/database.js';
import { useTestDatabase } from './support/db.js';
import { invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename, { migrate: false });
const REPO = join(import.meta.dirname, '..');
const FILE = 'examples/leader/cron.ts';

interface Instance {
  proc: ChildProcess;
  /** Resolves with the term and when (performance.now()) the line "leading in term N" came. */
  leads: Promise<{ term: number; at: number }>;
  /** Resolves once the instance campaigns (its first attempt made). */
  campaigning: Promise<void>;
  exited: Promise<{ code: number | null; stdout: string; stderr: string }>;
}

function start(): Instance {
  const proc = spawn(process.execPath, ['--import', 'tsx', FILE], {
    cwd: REPO,
    env: { ...process.env, MYSQL_URL: databaseUrl(db.url, db.name) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let onLead!: (v: { term: number; at: number }) => void;
  const leads = new Promise<{ term: number; at: number }>((resolve) => (onLead = resolve));
  let onCampaign!: () => void;
  const campaigning = new Promise<void>((resolve) => (onCampaign = resolve));
  proc.stdout!.on('data', (d: Buffer) => {
    stdout += d.toString();
    if (process.env.DEBUG_LEADER) console.log(`[stdout] ${d.toString()}`);
    const m = /leading in term (\d+)/.exec(stdout);
    if (m) onLead({ term: Number(m[1]), at: performance.now() });
    if (stdout.includes('campaigning as')) onCampaign();
  });
  proc.stderr!.on('data', (d: Buffer) => {
    stderr += d.toString();
    if (process.env.DEBUG_LEADER) console.log(`[stderr] ${d.toString()}`);
  });
  const exited = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    proc.on('close', (code) => resolve({ code, stdout, stderr })),
  );
  return { proc, leads, campaigning, exited };
}

async function ticks(): Promise<Array<{ term: number; owner: string }>> {
  const rows = (await db.knex('leader_ticks').orderBy('id').select('term', 'owner')) as Array<{
    term: number | string;
    owner: string;
  }>;
  return rows.map((r) => ({ term: Number(r.term), owner: r.owner }));
}

it('docs/leader.md carries examples/leader/cron.ts verbatim', () => {
  const doc = readFileSync(join(REPO, 'docs/leader.md'), 'utf8');
  expect(doc).toContain(`\`\`\`ts\n${readFileSync(join(REPO, FILE), 'utf8')}\`\`\``);
});

it('cron.ts on two processes: the leader ticks, SIGTERM hands over at once, terms only go up', async () => {
  const a = start();
  const first = await a.leads;
  const b = start();
  await b.campaigning;
  await expect.poll(async () => (await ticks()).length, { timeout: 20_000, interval: 200 }).toBeGreaterThan(1);
  const stoppedAt = performance.now();
  a.proc.kill('SIGTERM');
  const second = await b.leads;
  const handOverMs = second.at - stoppedAt;
  console.log(`[leader-examples] SIGTERM to the leader: the other led after ${handOverMs.toFixed(0)} ms`);
  expect(second.term).toBeGreaterThan(first.term);
  expect(handOverMs).toBeLessThan(1_000);
  const ranA = await a.exited;
  expect(ranA).toMatchObject({ code: 0, stderr: '' });
  await expect
    .poll(async () => (await ticks()).filter((t) => t.term === second.term).length, { timeout: 20_000, interval: 200 })
    .toBeGreaterThan(1);
  b.proc.kill('SIGTERM');
  expect(await b.exited).toMatchObject({ code: 0, stderr: '' });
  const all = await ticks();
  expect(new Set(all.map((t) => t.term))).toEqual(new Set([first.term, second.term]));
  // Terms only go up, and each term's ticks are one instance's.
  expect(all.map((t) => t.term)).toEqual([...all.map((t) => t.term)].sort((x, y) => x - y));
  expect(new Set(all.filter((t) => t.term === first.term).map((t) => t.owner)).size).toBe(1);
  expect(await invariantViolations(db.knex)).toEqual([]);
  const [[live]] = (await db.knex.raw('SELECT COUNT(*) AS n FROM t_lock_log WHERE status = 0')) as unknown as [
    [{ n: number }],
  ];
  expect(Number(live.n)).toBe(0);
}, 180_000);
