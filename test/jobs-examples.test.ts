// docs/jobs.md carries examples/jobs/*.ts verbatim, and each runs as written as processes of its own against
// a fresh database: run-exclusive.ts runs its job once, the second instance is refused while lockAtLeastFor
// keeps the grant, and close() waits for that hold (the grant ends released by its holder); node-cron.ts on two
// processes runs each fire on one of them, and stops on SIGTERM.
// covers: src/cron/index.ts, src/lock/scheduled/exclusive.ts
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { databaseUrl } from '../harness/database.js';
import { useTestDatabase } from './support/db.js';
import { invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename, { migrate: false });
const REPO = join(import.meta.dirname, '..');
const EXAMPLES = ['examples/jobs/node-cron.ts', 'examples/jobs/run-exclusive.ts'];

function start(file: string): {
  proc: ChildProcess;
  out: () => string;
  exited: Promise<{ code: number | null; stdout: string; stderr: string }>;
} {
  const proc = spawn(process.execPath, ['--import', 'tsx', file], {
    cwd: REPO,
    env: { ...process.env, MYSQL_URL: databaseUrl(db.url, db.name) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  proc.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    proc.on('close', (code) => resolve({ code, stdout, stderr })),
  );
  return { proc, out: () => stdout, exited };
}

describe('docs/jobs.md examples', () => {
  it.each(EXAMPLES)('docs/jobs.md carries %s verbatim', (file) => {
    const doc = readFileSync(join(REPO, 'docs/jobs.md'), 'utf8');
    expect(doc).toContain(`\`\`\`ts\n${readFileSync(join(REPO, file), 'utf8')}\`\`\``);
  });

  it('run-exclusive.ts: runs the job once, refuses the second instance, and close() waits for the hold', async () => {
    for (const round of [1, 2]) {
      const run = await start('examples/jobs/run-exclusive.ts').exited;
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
      expect(run.stdout).toBe(`sent ${round === 1 ? 2 : 0} invoices\nthe other instance did not run it\n`);
    }
    const [rows] = (await db.knex.raw(
      `SELECT resource_id, status, released_by, TIMESTAMPDIFF(MICROSECOND, create_time, released_at) AS held_us
         FROM t_lock_log WHERE resource_id = 'invoices:nightly' ORDER BY id`,
    )) as unknown as [Array<{ status: number; released_by: number; held_us: string }>];
    // Per round, the job's grant released by the run's commit and the successor it handed the hold to
    // (same grant time), released once lockAtLeastFor had passed.
    expect(rows.map((r) => [Number(r.status), Number(r.released_by)])).toEqual([
      [2, 1],
      [2, 1],
      [2, 1],
      [2, 1],
    ]);
    for (const r of [rows[1]!, rows[3]!]) expect(Number(r.held_us)).toBeGreaterThanOrEqual(2_000_000);
  });

  it('node-cron.ts on two processes: each fire runs on one of them; SIGTERM stops them', async () => {
    const instances = [start('examples/jobs/node-cron.ts'), start('examples/jobs/node-cron.ts')];
    const fires = (): string[] =>
      instances.flatMap((i) => [...i.out().matchAll(/^fire (\S+) ran here$/gm)].map((m) => m[1]!));
    try {
      // Three fires after both have printed one: each printed by exactly one process.
      await expect.poll(() => new Set(fires()).size, { timeout: 45_000 }).toBeGreaterThanOrEqual(4);
      // Stop just after a fire, once its release has landed (node-cron does not wait for onComplete): the
      // next fire is most of a second away.
      const seen = fires().length;
      await expect.poll(() => fires().length).toBeGreaterThan(seen);
      await expect
        .poll(async () => {
          const [[r]] = (await db.knex.raw('SELECT COUNT(*) AS n FROM t_lock_log WHERE status = 0')) as unknown as [
            [{ n: number }],
          ];
          return Number(r.n);
        })
        .toBe(0);
    } finally {
      for (const i of instances) i.proc.kill('SIGTERM');
    }
    const runs = await Promise.all(instances.map((i) => i.exited));
    for (const r of runs) expect(r, r.stderr).toMatchObject({ code: 0, stderr: '' });
    const all = fires();
    expect(all.length).toBe(new Set(all).size);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });
});
