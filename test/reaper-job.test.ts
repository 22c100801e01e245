// The scheduled reaper process (jobs/reaper.ts, installed as mysql-rwlock-reaper): structured log
// lines per run and per reaped grant, a first run at start, exit codes a scheduler can act on,
// configuration refused at startup, and SIGTERM reaching it through the documented commands.
// covers: jobs/reaper.ts, src/reaper-daemon/job.ts, src/reaper-daemon/server.ts
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { createDatabase, databaseUrl, dropDatabase } from '../harness/database.js';
import { freePort } from '../harness/server.js';
import { createLockManager } from '../src/index.js';
import { HEALTH_SLACK_MS, JOB_ENV } from '../src/reaper-daemon/job.js';
import { useTestDatabase } from './support/db.js';
import { backdate, grantRow } from './support/state.js';

const db = useTestDatabase(import.meta.filename);
const REPO = join(import.meta.dirname, '..');
const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
const children: ChildProcess[] = [];

afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

type Line = Record<string, unknown>;

/** A running job: its parsed stdout lines, a way to await one, and its exit. */
function startJob(command: string, args: string[], env: Record<string, string>, cwd = REPO) {
  const child = spawn(command, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  const lines: Line[] = [];
  const waiters: Array<() => void> = [];
  let buffer = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => {
    buffer += d.toString();
    const parts = buffer.split('\n');
    buffer = parts.pop()!;
    for (const p of parts) lines.push(JSON.parse(p) as Line);
    for (const wake of waiters.splice(0)) wake();
  });
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  /** Resolves with the first line matching; rejects if the job exits first. */
  const lineWhere = (match: (l: Line) => boolean): Promise<Line> =>
    new Promise((resolve, reject) => {
      const look = (): void => {
        const found = lines.find(match);
        if (found) resolve(found);
        else waiters.push(look);
      };
      look();
      void exited.then(() => {
        const found = lines.find(match);
        if (found) resolve(found);
        else reject(new Error(`the job exited without that line; stdout ${JSON.stringify(lines)} stderr ${stderr}`));
      });
    });
  return { child, lines, exited, lineWhere, stderr: () => stderr };
}

const tsxJob = (args: string[], env: Record<string, string>) =>
  startJob(process.execPath, ['--import', 'tsx', 'jobs/reaper.ts', ...args], env);

/** One run of the job to its exit, with its stdout parsed as JSON lines. */
function runOnce(
  env: Record<string, string>,
  args: string[] = ['--once'],
): Promise<{ status: number | null; stdout: string; stderr: string; lines: Line[] }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'jobs/reaper.ts', ...args], {
      cwd: REPO,
      env: { ...process.env, MYSQL_URL: '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (status) => {
      const lines = args.includes('--help')
        ? []
        : stdout
            .trim()
            .split('\n')
            .filter(Boolean)
            .map((l) => JSON.parse(l) as Line);
      resolve({ status, stdout, stderr, lines });
    });
  });
}

/** One stop line; after it only the lines of the run that was in progress (it is finished, not cut). */
function expectStoppedBySigterm(lines: Line[]): void {
  const stops = lines.filter((l) => l.event === 'reaper.stop');
  expect(stops).toEqual([expect.objectContaining({ signal: 'SIGTERM' })]);
  const after = lines.slice(lines.indexOf(stops[0]!) + 1).map((l) => l.event);
  expect(
    after.every((e) => e === 'reaper.grant' || e === 'reaper.problem' || e === 'reaper.run' || e === 'reaper.counts'),
  ).toBe(true);
  expect(after.filter((e) => e === 'reaper.run').length).toBeLessThanOrEqual(1);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw err;
  }
}

describe('jobs/reaper.ts', () => {
  it('reaps at start and on schedule, logs one line per grant and per run, and exits 0 on SIGTERM', async () => {
    const locks = createLockManager({ knex: db.knex });
    const stale = await locks.tryAcquireWrite('job-stale');
    const fresh = await locks.tryAcquireRead('job-fresh');
    await backdate(db.knex, stale!.id, 120_000);
    const job = tsxJob([], {
      MYSQL_URL: databaseUrl(db.url, db.name),
      REAPER_CRON: '* * * * * *',
      STALE_AFTER_MS: '60000',
    });
    await expect
      .poll(() => job.lines.filter((l) => l.event === 'reaper.run').length, { timeout: 30_000 })
      .toBeGreaterThanOrEqual(2);
    job.child.kill('SIGTERM');
    expect(await job.exited).toBe(0);
    const lines = job.lines;
    expect(lines[0]).toMatchObject({
      event: 'reaper.start',
      runAtStart: true,
      batchSize: 500,
      target: expect.stringContaining(`/${db.name}`),
    });
    const grantLines = lines.filter((l) => l.event === 'reaper.grant');
    expect(grantLines).toEqual([expect.objectContaining({ id: stale!.id, resourceId: 'job-stale', mode: 'write' })]);
    const runs = lines.filter((l) => l.event === 'reaper.run');
    expect(runs[0]).toMatchObject({ ok: true, reaped: 1, skipped: 0 });
    expect(runs.slice(1).every((r) => r.reaped === 0 && r.ok === true)).toBe(true);
    expectStoppedBySigterm(lines);
    expect(lines.every((l) => typeof l.ts === 'string')).toBe(true);
    expect(await grantRow(db.knex, stale!.id)).toMatchObject({ status: 2, released_by: 2 });
    expect(await grantRow(db.knex, fresh!.id)).toMatchObject({ status: 0 });
    await fresh!.release();
  });

  it('runs once at start without waiting for the schedule, unless REAPER_RUN_AT_START=0', async () => {
    const locks = createLockManager({ knex: db.knex });
    const stale = await locks.tryAcquireWrite('job-at-start');
    await backdate(db.knex, stale!.id, 120_000);
    const url = databaseUrl(db.url, db.name);
    const yearly = '0 0 1 1 *'; // next run months away at most: any run seen here is the one at start
    const job = tsxJob([], { MYSQL_URL: url, REAPER_CRON: yearly, STALE_AFTER_MS: '60000' });
    expect(await job.lineWhere((l) => l.event === 'reaper.run')).toMatchObject({ ok: true, reaped: 1 });
    job.child.kill('SIGTERM');
    expect(await job.exited).toBe(0);

    const waiting = tsxJob([], { MYSQL_URL: url, REAPER_CRON: yearly, REAPER_RUN_AT_START: '0' });
    expect(await waiting.lineWhere((l) => l.event === 'reaper.start')).toMatchObject({ runAtStart: false });
    waiting.child.kill('SIGTERM');
    expect(await waiting.exited).toBe(0);
    expect(waiting.lines.map((l) => l.event)).toEqual(['reaper.start', 'reaper.stop']);
  });

  it('--once exits 0 after a good run and 1 when the run failed', async () => {
    const ok = await runOnce({ MYSQL_URL: databaseUrl(db.url, db.name) });
    expect(ok.status).toBe(0);
    expect(ok.lines).toEqual([expect.objectContaining({ event: 'reaper.run', ok: true })]);

    const bare = `rwl_reaper_job_bare_${process.pid}`;
    await createDatabase(db.url, bare);
    try {
      const noSchema = await runOnce({ MYSQL_URL: databaseUrl(db.url, bare) });
      expect(noSchema.status).toBe(1);
      expect(noSchema.lines.at(-1)).toMatchObject({
        event: 'reaper.run',
        ok: false,
        code: 'ERR_RWLOCK_SCHEMA_MISSING',
      });
    } finally {
      await dropDatabase(db.url, bare);
    }

    const closedPort = await freePort(); // free a moment ago: nothing listens there
    const refused = await runOnce({ MYSQL_URL: `mysql://nobody:pw@127.0.0.1:${closedPort}/app` });
    expect(refused.status).toBe(1);
    expect(refused.lines.at(-1)).toMatchObject({ event: 'reaper.run', ok: false, code: 'ERR_RWLOCK_UNREACHABLE' });
  });

  it('--help prints usage with every variable, its default and the exit codes, and starts nothing', async () => {
    const help = await runOnce({}, ['--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^Usage: mysql-rwlock-reaper/);
    for (const v of JOB_ENV) {
      expect(help.stdout).toContain(v.name);
      expect(help.stdout).toContain(v.default === 'required' ? 'required' : `default ${v.default}`);
    }
    expect(help.stdout).toMatch(/Exit codes:\n {2}0 .*\n {2}1 .*\n {2}2 /);
  });

  it('the docs/reaper.md table lists every variable with the default --help gives', () => {
    const readme = readFileSync(join(REPO, 'docs', 'reaper.md'), 'utf8');
    const section = readme.split(/^## Deploying the reaper\n/m)[1]!.split(/^## /m)[0]!;
    const rows = [...section.matchAll(/^\| `([A-Z_]+)` *\| `?([^`|]+?)`? *\|/gm)].map((m) => ({
      name: m[1],
      default: m[2],
    }));
    expect(rows).toEqual(JOB_ENV.map((v) => ({ name: v.name, default: v.default })));
  });

  it('refuses bad configuration and usage at startup: exit 2, one line naming the variable, no password', async () => {
    const url = databaseUrl(db.url, db.name);
    const cases: Array<[Record<string, string>, string[], RegExp]> = [
      [{}, ['--once'], /^MYSQL_URL is required/],
      [
        { MYSQL_URL: 'mysql://u:s3cr3t@127.0.0.1:99999/db' },
        ['--once'],
        /^MYSQL_URL has a port that is not a number from 1 to 65535/,
      ],
      [{ MYSQL_URL: 'mysql://u:s3cr3t@:3306/db' }, ['--once'], /^MYSQL_URL/],
      [{ MYSQL_URL: 'postgres://u:s3cr3t@db:5432/app' }, ['--once'], /^MYSQL_URL must start with mysql:\/\//],
      [{ MYSQL_URL: 'mysql://u:s3cr3t@db:3306/' }, ['--once'], /^MYSQL_URL names no database/],
      [{ MYSQL_URL: 'u:s3cr3t@db:3306/app' }, ['--once'], /^MYSQL_URL must start with/],
      [
        { MYSQL_URL: 'mysql://u:s3cr3t%@db/app' },
        ['--once'],
        /^MYSQL_URL has a user or password that is not valid percent-encoding/,
      ],
      [{ MYSQL_URL: url, REAPER_CRON: 'every minute' }, ['--once'], /^REAPER_CRON/],
      [{ MYSQL_URL: url, STALE_AFTER_MS: '-5' }, ['--once'], /^STALE_AFTER_MS/],
      [
        { MYSQL_URL: url, REAPER_BATCH_SIZE: '20000' },
        [],
        /^REAPER_BATCH_SIZE must be an integer from 1 to 10000, got 20000/,
      ],
      [{ MYSQL_URL: url, REAPER_BATCH_SIZE: '0' }, ['--once'], /^REAPER_BATCH_SIZE/],
      [{ MYSQL_URL: url, RETENTION_MS: 'a week' }, ['--once'], /^RETENTION_MS/],
      [{ MYSQL_URL: url, REAPER_RUN_AT_START: 'yes' }, [], /^REAPER_RUN_AT_START must be 0 or 1/],
      [{ MYSQL_URL: url }, ['--bogus'], /^Unknown option '--bogus'/],
      [{ MYSQL_URL: url, METRICS_PORT: '70000' }, [], /^METRICS_PORT must be an integer from 0 to 65535, got 70000/],
      [{ MYSQL_URL: url, METRICS_PORT: 'http' }, [], /^METRICS_PORT/],
      [{ MYSQL_URL: url, METRICS_PORT: '0', METRICS_HOST: 'http://x/' }, [], /^METRICS_HOST/],
      [{ MYSQL_URL: url, COUNT_CHECK_CRON: 'daily' }, [], /^COUNT_CHECK_CRON is not a valid cron expression or off/],
      [{ MYSQL_URL: url, COUNT_REPAIR: 'yes' }, ['--once'], /^COUNT_REPAIR must be 0 or 1/],
    ];
    const runs = await Promise.all(cases.map(([env, args]) => runOnce(env, args)));
    for (const [i, [env, args, error]] of cases.entries()) {
      const run = runs[i]!;
      const what = `${JSON.stringify(env)} ${args.join(' ')}`;
      expect(run.status, what).toBe(2);
      expect(run.lines, what).toEqual([
        expect.objectContaining({ event: 'reaper.config', ok: false, error: expect.stringMatching(error) }),
      ]);
      expect(run.stdout + run.stderr, what).not.toContain('s3cr3t');
    }
  });

  // The documented commands, as a scheduler runs them: `node node_modules/.bin/mysql-rwlock-reaper`
  // (systemd ExecStart, a container's exec-form CMD) and a shell wrapper that `exec`s the bin. An
  // app directory whose .bin entry links to this checkout's job stands in for an install; tsx is
  // loaded through NODE_OPTIONS, as dist/ would not need. The reaper must be the process that
  // receives the signal: its logged pid is the spawned pid, and that pid is gone after SIGTERM.
  it('SIGTERM through the documented commands ends the reaper itself, leaving no orphan', async () => {
    mkdirSync(join(REPO, '.tmp'), { recursive: true });
    const app = mkdtempSync(join(REPO, '.tmp', 'reaper-app-'));
    try {
      mkdirSync(join(app, 'node_modules', '.bin'), { recursive: true });
      symlinkSync(join(REPO, 'jobs', 'reaper.ts'), join(app, 'node_modules', '.bin', 'mysql-rwlock-reaper'));
      const env = { MYSQL_URL: databaseUrl(db.url, db.name), NODE_OPTIONS: `--import=${TSX}` };
      const forms: Array<[string, string[]]> = [
        ['node', ['node_modules/.bin/mysql-rwlock-reaper']],
        ['sh', ['-c', 'exec node_modules/.bin/mysql-rwlock-reaper']],
      ];
      for (const [command, args] of forms) {
        const job = startJob(command, args, env, app);
        const start = await job.lineWhere((l) => l.event === 'reaper.start');
        expect(start.pid, `${command} ${args.join(' ')}`).toBe(job.child.pid);
        job.child.kill('SIGTERM');
        expect(await job.exited, job.stderr()).toBe(0);
        expectStoppedBySigterm(job.lines);
        expect(isAlive(start.pid as number)).toBe(false);
      }
    } finally {
      rmSync(app, { recursive: true, force: true });
    }
  });

  describe('METRICS_PORT', () => {
    const get = async (port: number, path: string) => {
      const res = await fetch(`http://127.0.0.1:${port}${path}`);
      return { status: res.status, type: res.headers.get('content-type'), body: await res.text() };
    };
    /** `name{labels} value` from an exposition, or undefined. */
    const sample = (text: string, series: string): number | undefined => {
      const line = text.split('\n').find((l) => l.startsWith(`${series} `));
      return line === undefined ? undefined : Number(line.slice(series.length + 1));
    };

    it("serves the job's metrics and gauges on /metrics and 200 on /healthz after a good run", async () => {
      const locks = createLockManager({ knex: db.knex });
      const stale = await locks.tryAcquireWrite('job-metrics-stale');
      const live = await locks.tryAcquireRead('job-metrics-live');
      await backdate(db.knex, stale!.id, 120_000);
      const job = tsxJob([], {
        MYSQL_URL: databaseUrl(db.url, db.name),
        REAPER_CRON: '* * * * * *',
        STALE_AFTER_MS: '60000',
        METRICS_PORT: '0',
        METRICS_HOST: '127.0.0.1',
      });
      const start = await job.lineWhere((l) => l.event === 'reaper.start');
      const port = start.metricsPort as number;
      expect(port).toBeGreaterThan(0);
      await job.lineWhere((l) => l.event === 'reaper.run' && l.reaped === 1);

      const health = await get(port, '/healthz');
      expect(health.status).toBe(200);
      expect(JSON.parse(health.body)).toMatchObject({
        healthy: true,
        status: 'ok',
        windowMs: 2 * 1000 + HEALTH_SLACK_MS,
        lastRun: { event: 'reaper.run', ok: true },
      });

      const metrics = await get(port, '/metrics');
      expect(metrics.status).toBe(200);
      expect(metrics.type).toMatch(/^text\/plain; version=0\.0\.4/);
      expect(sample(metrics.body, 'mysql_rwlock_reaped_grants_total{mode="write"}')).toBe(1);
      expect(sample(metrics.body, 'mysql_rwlock_reaper_runs_total{outcome="ok"}')).toBeGreaterThanOrEqual(1);
      expect(sample(metrics.body, 'mysql_rwlock_reaper_runs_total{outcome="failed"}')).toBe(0);
      expect(sample(metrics.body, 'mysql_rwlock_reaper_healthy')).toBe(1);
      expect(sample(metrics.body, 'mysql_rwlock_live_grants{mode="read"}')).toBe(1);
      expect(sample(metrics.body, 'mysql_rwlock_live_grants{mode="write"}')).toBe(0);
      expect(sample(metrics.body, 'mysql_rwlock_gauges_up')).toBe(1);
      expect(sample(metrics.body, 'mysql_rwlock_reaper_last_run_timestamp_seconds')).toBeGreaterThan(0);
      // No count check has run yet (daily by default): absent, not an all-clear 0.
      expect(sample(metrics.body, 'mysql_rwlock_count_disagreements')).toBeUndefined();
      expect(sample(metrics.body, 'mysql_rwlock_reaper_last_count_check_timestamp_seconds')).toBeUndefined();
      expect(metrics.body).toContain('process_cpu_seconds_total');
      expect(metrics.body).not.toContain('job-metrics');
      expect((await get(port, '/elsewhere')).status).toBe(404);
      expect((await fetch(`http://127.0.0.1:${port}/metrics`, { method: 'POST' })).status).toBe(405);

      job.child.kill('SIGTERM');
      expect(await job.exited).toBe(0);
      await live!.release();
    });

    it('checks lock counts on COUNT_CHECK_CRON, logs and exports what disagrees, and with COUNT_REPAIR=1 sets it', async () => {
      const locks = createLockManager({ knex: db.knex });
      await (await locks.tryAcquireWrite('job-counts'))!.release();
      await db.knex.raw("UPDATE t_read_write_lock SET w_count = 1 WHERE resource_id = 'job-counts'");
      expect(await locks.tryAcquireWrite('job-counts')).toBeNull(); // blocked for good: no grant for the reaper
      const env = {
        MYSQL_URL: databaseUrl(db.url, db.name),
        REAPER_RUN_AT_START: '0',
        COUNT_CHECK_CRON: '* * * * * *',
        METRICS_PORT: '0',
        METRICS_HOST: '127.0.0.1',
      };

      const checking = tsxJob([], env);
      const port = (await checking.lineWhere((l) => l.event === 'reaper.start')).metricsPort as number;
      expect(await checking.lineWhere((l) => l.event === 'reaper.counts')).toMatchObject({
        ok: true,
        found: 1,
        more: false,
        remaining: 1,
        resources: ['job-counts'],
      });
      const checked = (await get(port, '/metrics')).body;
      expect(sample(checked, 'mysql_rwlock_count_disagreements')).toBe(1);
      expect(sample(checked, 'mysql_rwlock_reaper_last_count_check_timestamp_seconds')).toBeGreaterThan(0);
      checking.child.kill('SIGTERM');
      expect(await checking.exited).toBe(0);
      expect(await locks.tryAcquireWrite('job-counts')).toBeNull(); // reported, not changed

      const repairing = tsxJob([], { ...env, COUNT_REPAIR: '1' });
      const port2 = (await repairing.lineWhere((l) => l.event === 'reaper.start')).metricsPort as number;
      expect(await repairing.lineWhere((l) => l.event === 'reaper.counts')).toMatchObject({
        ok: true,
        repaired: 1,
        conflicting: 0,
        skipped: 0,
        remaining: 0,
        resources: ['job-counts'],
      });
      await repairing.lineWhere((l) => l.event === 'reaper.counts' && l.repaired === 0);
      expect(sample((await get(port2, '/metrics')).body, 'mysql_rwlock_count_disagreements')).toBe(0);
      repairing.child.kill('SIGTERM');
      expect(await repairing.exited).toBe(0);
      const g = await locks.tryAcquireWrite('job-counts');
      expect(g).not.toBeNull();
      await g!.release();
    });

    it('/healthz answers 503 while the runs fail (negative control: the same job, a database without the schema)', async () => {
      const bare = `rwl_reaper_job_health_${process.pid}`;
      await createDatabase(db.url, bare);
      try {
        const job = tsxJob([], {
          MYSQL_URL: databaseUrl(db.url, bare),
          REAPER_CRON: '* * * * * *',
          METRICS_PORT: '0',
          METRICS_HOST: '127.0.0.1',
        });
        const port = (await job.lineWhere((l) => l.event === 'reaper.start')).metricsPort as number;
        await job.lineWhere((l) => l.event === 'reaper.run' && l.ok === false);
        const health = await fetch(`http://127.0.0.1:${port}/healthz`);
        expect(health.status).toBe(503);
        expect(await health.json()).toMatchObject({
          healthy: false,
          status: 'failed',
          lastRun: { ok: false, code: 'ERR_RWLOCK_SCHEMA_MISSING' },
        });
        const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
        expect(sample(metrics, 'mysql_rwlock_reaper_runs_total{outcome="failed"}')).toBeGreaterThanOrEqual(1);
        expect(sample(metrics, 'mysql_rwlock_reaper_healthy')).toBe(0);
        expect(sample(metrics, 'mysql_rwlock_gauges_up')).toBe(0);
        job.child.kill('SIGTERM');
        expect(await job.exited).toBe(0);
      } finally {
        await dropDatabase(db.url, bare);
      }
    });
  });
});
