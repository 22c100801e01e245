// The `mysql-rwlock` CLI, spawned as a user runs it against the real server: every command, its
// table and --json output, exit codes, and no password printed. The usage and --help texts need no
// server: test/unit/cli-usage.test.ts. The bin's source is bundled once for this file (esbuild,
// packages left to node_modules), so each of the file's runs starts plain node: through tsx each
// start cost about a second of CPU, two to four on a busy machine, for every one of ~50 runs.
// covers: src/cli/bin.ts, src/cli/main.ts, src/cli/command.ts, src/cli/commands-read.ts, src/cli/commands-write.ts, src/cli/format.ts, src/sql/inspect.ts, src/cli/commands-jobs.ts
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Knex } from 'knex';
import { build } from 'esbuild';
import { beforeAll, describe, expect, it } from 'vitest';
import { createDatabase, databaseUrl, dropDatabase } from '../harness/database.js';
import { freePort } from '../harness/server.js';
import cron from 'node-cron';
import { createLockManager, LockLostError } from '../src/index.js';
import { createRunCoordinator } from '../src/cron/index.js';
import { MIGRATIONS } from '../migrations/index.js';
import { useTestDatabase } from './support/db.js';
import { backdate, snapshot } from './support/state.js';

const db = useTestDatabase(import.meta.filename);
const REPO = join(import.meta.dirname, '..');
// Each run starts node: a fraction of a second of CPU, more on a busy machine.
const SLOW = { timeout: 180_000 };
// Inside the checkout, so that the bundle's imports of packages resolve to its node_modules.
const BIN = join(REPO, '.tmp', `cli-bin-${process.pid}.mjs`);
const HINT_BIN = join(REPO, '.tmp', `hint-bin-${process.pid}`);

beforeAll(async () => {
  await build({
    entryPoints: [join(REPO, 'src/cli/bin.ts')],
    bundle: true,
    platform: 'node',
    format: 'esm',
    packages: 'external',
    outfile: BIN,
    logLevel: 'warning',
  });
  return () => {
    rmSync(BIN, { force: true });
    rmSync(HINT_BIN, { recursive: true, force: true });
  };
});

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the CLI to its exit. `env` is added to a copy of this process's environment without MYSQL_URL. */
function cli(args: string[], env: Record<string, string> = { MYSQL_URL: url() }): Promise<Run> {
  return new Promise((resolve, reject) => {
    const { MYSQL_URL: _drop, ...base } = process.env;
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: REPO,
      env: { ...base, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

function url(): string {
  return databaseUrl(db.url, db.name);
}

async function releaseAll(k: Knex): Promise<void> {
  const locks = createLockManager({ knex: k });
  for (const g of (await locks.list({ limit: 10_000 })).grants) await locks.forceRelease(g.id);
}

/** JSON as the CLI prints it: Dates become ISO strings. */
const viaJson = (value: unknown): unknown => JSON.parse(JSON.stringify(value));

describe('reading commands', () => {
  it('status prints the stats() object with --json and a readable summary without', async () => {
    await releaseAll(db.knex);
    const locks = createLockManager({ knex: db.knex });
    const w = (await locks.tryAcquireWrite('cli-status-1'))!;
    await locks.tryAcquireRead('cli-status-2');
    await backdate(db.knex, w.id, 700_000);
    const [asJson, asTable] = await Promise.all([cli(['status', '--json']), cli(['status'])]);
    expect(asJson.status).toBe(0);
    const printed = JSON.parse(asJson.stdout) as Record<string, unknown>;
    const expected = await locks.stats();
    expect(printed).toMatchObject({
      live: { write: 1, read: 1 },
      stale: 1,
      leased: 0,
      waitingWriters: 0,
      staleAfterMs: 600_000,
    });
    expect(Object.keys(printed).sort()).toEqual(Object.keys(expected).sort());
    expect(asTable.status).toBe(0);
    expect(asTable.stdout).toMatch(/^live grants +2 \(write 1, read 1, permit 0\)$/m);
    expect(asTable.stdout).toMatch(/^stale +1 /m);
    expect(asTable.stdout).toMatch(/^oldest grant +11m \d\ds$/m);
    // --stale-after moves the cutoff, as the reaper's STALE_AFTER_MS would.
    expect(JSON.parse((await cli(['status', '--json', '--stale-after', '800000'])).stdout)).toMatchObject({
      stale: 0,
      staleAfterMs: 800_000,
    });
    await releaseAll(db.knex);
  });

  it(
    'status and ls take the cutoff from STALE_AFTER_MS as the reaper does; --stale-after wins; a bad value is bad usage',
    SLOW,
    async () => {
      await releaseAll(db.knex);
      const locks = createLockManager({ knex: db.knex });
      const old = (await locks.tryAcquireWrite('cli-stale-env'))!;
      await backdate(db.knex, old.id, 300_000);
      const env = (value: string) => ({ MYSQL_URL: url(), STALE_AFTER_MS: value });
      const [status, ls, lsStale, flag, fallback, bad] = await Promise.all([
        cli(['status', '--json'], env('120000')),
        cli(['ls', '--json'], env('120000')),
        cli(['ls', '--stale', '--json'], env('120000')),
        cli(['status', '--json', '--stale-after', '600000'], env('120000')),
        cli(['status', '--json'], env('')),
        cli(['status'], env('2m')),
      ]);
      // 5 minutes old: stale to a reaper with a 2-minute cutoff, not to the default 10 minutes.
      expect(JSON.parse(status.stdout)).toMatchObject({ stale: 1, staleAfterMs: 120_000 });
      expect(JSON.parse(ls.stdout)).toEqual([expect.objectContaining({ id: old.id, stale: true })]);
      expect(JSON.parse(lsStale.stdout)).toEqual([expect.objectContaining({ id: old.id })]);
      expect(JSON.parse(flag.stdout)).toMatchObject({ stale: 0, staleAfterMs: 600_000 });
      expect(JSON.parse(fallback.stdout)).toMatchObject({ stale: 0, staleAfterMs: 600_000 });
      expect(bad.status).toBe(2);
      expect(bad.stderr).toMatch(/STALE_AFTER_MS/);
      expect((await locks.list()).grants.map((g) => g.id)).toEqual([old.id]);
      await releaseAll(db.knex);
    },
  );

  it(
    'ls prints live grants as a table, --json as an array of list() rows, filters and pages, and exits 0 when none matched',
    SLOW,
    async () => {
      await releaseAll(db.knex);
      const locks = createLockManager({ knex: db.knex, owner: 'svc-ls' });
      const grants = [
        (await locks.tryAcquireWrite('cli-ls:a'))!,
        (await locks.tryAcquireRead('cli-ls:b'))!,
        (await locks.tryAcquireRead('cli-ls:b'))!,
      ];
      await backdate(db.knex, grants[0]!.id, 900_000);
      const [table, asJson, reads, stale, page1, none] = await Promise.all([
        cli(['ls']),
        cli(['ls', '--json']),
        cli(['ls', '--mode', 'read', '--json']),
        cli(['ls', '--stale', '--json']),
        cli(['ls', '--limit', '2']),
        cli(['ls', '--prefix', 'nothing-here:']),
      ]);
      expect(table.status).toBe(0);
      const lines = table.stdout.trim().split('\n');
      expect(lines[0]).toMatch(/^GRANT +RESOURCE +MODE +OWNER +AGE +LEASE UNTIL +STALE +WRITER WAITING$/);
      expect(lines.slice(1).map((l) => l.split(/\s+/).slice(0, 4))).toEqual(
        grants.map((g) => [String(g.id), g.resourceId, g.mode, 'svc-ls']),
      );
      expect(lines[1]).toMatch(/STALE/);
      expect(asJson.status).toBe(0);
      const rows = JSON.parse(asJson.stdout) as Array<Record<string, unknown>>;
      const listed = viaJson((await locks.list()).grants) as Array<Record<string, unknown>>;
      expect(rows.map(({ ageMs: _a, ...rest }) => rest)).toEqual(listed.map(({ ageMs: _a, ...rest }) => rest));
      expect(Object.keys(rows[0]!)).toEqual([
        'id',
        'resourceId',
        'mode',
        'owner',
        'createTime',
        'ageMs',
        'leaseUntil',
        'stale',
        'writerWaiting',
        'section',
      ]);
      expect((JSON.parse(reads.stdout) as Array<{ id: number }>).map((r) => r.id)).toEqual([
        grants[1]!.id,
        grants[2]!.id,
      ]);
      expect((JSON.parse(stale.stdout) as Array<{ id: number }>).map((r) => r.id)).toEqual([grants[0]!.id]);
      expect(page1.stdout).toContain(`more: mysql-rwlock ls --limit 2 --after ${grants[1]!.id}`);
      const page2 = await cli(['ls', '--limit', '2', '--after', String(grants[1]!.id), '--json']);
      expect((JSON.parse(page2.stdout) as Array<{ id: number }>).map((r) => r.id)).toEqual([grants[2]!.id]);
      expect(none).toMatchObject({ status: 0, stdout: 'no live grants matched\n' });
      const emptyJson = await cli(['ls', '--owner', 'nobody', '--json']);
      expect(emptyJson.status).toBe(0);
      expect(JSON.parse(emptyJson.stdout)).toEqual([]);
      await releaseAll(db.knex);
    },
  );

  it("inspect shows a resource's holders (exit 0), or that it is free (exit 1)", async () => {
    const locks = createLockManager({ knex: db.knex });
    const g = (await locks.tryAcquireWrite('cli-inspect'))!;
    const [held, free, asJson] = await Promise.all([
      cli(['inspect', 'cli-inspect']),
      cli(['inspect', 'cli-inspect-free']),
      cli(['inspect', 'cli-inspect', '--json']),
    ]);
    expect(held.status).toBe(0);
    expect(held.stdout).toMatch(/^held +write$/m);
    expect(held.stdout).toMatch(new RegExp(`^${g.id} +write `, 'm'));
    expect(free.status).toBe(1);
    expect(free.stdout).toMatch(/^held +free$/m);
    expect(JSON.parse(asJson.stdout)).toMatchObject({
      resourceId: 'cli-inspect',
      live: { write: 1, read: 0 },
      holders: [{ id: g.id, mode: 'write' }],
    });
    await g.release();
  });
});

describe('permits and jobs', () => {
  it(
    'status counts permit grants, ls --mode permit lists them with their count and limit, inspect shows the limit',
    SLOW,
    async () => {
      await releaseAll(db.knex);
      const locks = createLockManager({ knex: db.knex, owner: 'svc-permits' });
      await locks.tryAcquireWrite('cli-perm:w');
      await locks.tryAcquireRead('cli-perm:r');
      const p1 = (await locks.tryAcquirePermit('cli-perm:exports', { permits: 5, count: 2 }))!;
      const p2 = (await locks.tryAcquirePermit('cli-perm:exports', { permits: 5 }))!;
      const [status, statusJson, ls, lsPermit, inspect, inspectJson] = await Promise.all([
        cli(['status']),
        cli(['status', '--json']),
        cli(['ls']),
        cli(['ls', '--mode', 'permit', '--json']),
        cli(['inspect', 'cli-perm:exports']),
        cli(['inspect', 'cli-perm:exports', '--json']),
      ]);
      // The count status prints is the count ls lists: every live grant, permits included.
      expect(status.status).toBe(0);
      expect(status.stdout).toMatch(/^live grants +4 \(write 1, read 1, permit 2\)$/m);
      expect(JSON.parse(statusJson.stdout)).toMatchObject({ live: { write: 1, read: 1, permit: 2 } });
      expect(ls.stdout.trim().split('\n')).toHaveLength(1 + 4);
      expect(ls.stdout).toMatch(new RegExp(`^${p1.id} +cli-perm:exports +permit × 2 of 5 +svc-permits `, 'm'));
      expect(ls.stdout).toMatch(new RegExp(`^${p2.id} +cli-perm:exports +permit × 1 of 5 +svc-permits `, 'm'));
      expect(lsPermit.status).toBe(0);
      expect(JSON.parse(lsPermit.stdout)).toEqual([
        expect.objectContaining({ id: p1.id, mode: 'permit', permits: 2, permitLimit: 5 }),
        expect.objectContaining({ id: p2.id, mode: 'permit', permits: 1, permitLimit: 5 }),
      ]);
      expect(inspect.status).toBe(0);
      expect(inspect.stdout).toMatch(/^held +3 permits of 5 \(2 holders\)$/m);
      expect(inspect.stdout).toMatch(/^permit limit +5 /m);
      expect(inspect.stdout).toMatch(new RegExp(`^${p1.id} +permit × 2 +svc-permits `, 'm'));
      expect(JSON.parse(inspectJson.stdout)).toMatchObject({
        permitLimit: 5,
        live: { write: 0, read: 3 },
        holders: [
          { id: p1.id, mode: 'permit', permits: 2 },
          { id: p2.id, mode: 'permit', permits: 1 },
        ],
      });
      // A read lock's row says nothing of permits.
      const read = JSON.parse((await cli(['inspect', 'cli-perm:r', '--json'])).stdout) as { holders: object[] };
      expect(read).toMatchObject({ permitLimit: null });
      expect(read.holders[0]).not.toHaveProperty('permits');
      await releaseAll(db.knex);
    },
  );

  it(
    'jobs lists node-cron tasks (one row per task) and exclusive jobs with last run, outcome, holder and next fire',
    SLOW,
    async () => {
      await releaseAll(db.knex);
      const locks = createLockManager({ knex: db.knex, owner: 'cron-host-1' });
      // Real node-cron, every second, through the run coordinator: fires of one task.
      const keys: string[] = [];
      const coordinator = createRunCoordinator(locks);
      const task = cron.schedule('* * * * * *', () => undefined, {
        name: 'cli-jobs-report',
        distributed: true,
        runCoordinator: {
          shouldRun: (key, ttl) => (keys.push(key), coordinator.shouldRun(key, ttl)),
          onComplete: (key) => coordinator.onComplete!(key),
        },
      });
      try {
        await expect.poll(() => keys.length, { timeout: 30_000 }).toBeGreaterThanOrEqual(4);
      } finally {
        await task.destroy();
      }
      await expect
        .poll(async () => (await locks.list({ resourcePrefix: 'cron:cli-jobs-report:' })).grants, { timeout: 30_000 })
        .toEqual([]);
      // Exclusive jobs, named with --job (the log tells a job's grant from a lock's only by its name): one
      // with lockAtLeastFor, one without whose run an operator released: its commit is refused.
      const other = createLockManager({ knex: db.knex, owner: 'billing-host-2' });
      expect(
        await other.runExclusive('cli-jobs:nightly', async () => 'sent', { lockAtMostFor: 60_000, lockAtLeastFor: 1 }),
      ).toEqual({ ran: true, value: 'sent' });
      await expect.poll(async () => (await other.list({ resourcePrefix: 'cli-jobs:nightly' })).grants).toEqual([]);
      const lost = await other
        .runExclusive(
          'cli-jobs:hourly',
          async (_trx, grant) => {
            await other.forceRelease(grant.id, { reason: 'stuck' });
          },
          { lockAtMostFor: 60_000 },
        )
        .catch((e: unknown) => e);
      expect(lost).toBeInstanceOf(LockLostError);
      await locks.tryAcquireWrite('cli-jobs:plain-lock'); // a lock, not a job: not listed

      const [table, asJson, named] = await Promise.all([
        cli(['jobs', '--job', 'cli-jobs:nightly']),
        cli(['jobs', '--job', 'cli-jobs:nightly', '--json']),
        cli(['jobs', '--job', 'cli-jobs:hourly', '--json']),
      ]);
      expect(table.status, table.stderr).toBe(0);
      const lines = table.stdout.trim().split('\n');
      expect(lines[0]).toMatch(/^KIND +JOB +LAST RUN +OUTCOME +HOLDER +HELD +NEXT FIRE +RUNS +REAPED$/);
      expect(lines).toHaveLength(3);
      expect(lines[1]).toMatch(
        /^node-cron +cron:cli-jobs-report +\S+ \S+ +finished +cron-host-1 +.* \(every 1\.0 s\) /,
      );
      expect(lines[2]).toMatch(/^exclusive +cli-jobs:nightly +\S+ \S+ +finished +billing-host-2 /);
      type Job = {
        name: string;
        nextFire: string;
        last: { fireTime: string } & Record<string, unknown>;
      } & Record<string, unknown>;
      const view = JSON.parse(asJson.stdout) as { now: string; jobs: Job[] };
      const report = view.jobs.find((j) => j.name === 'cron:cli-jobs-report')!;
      const lastKey = keys.at(-1)!;
      const claimed = (await locks.history(`cron:${lastKey}`)).grants;
      // The last fire in the log is the last key node-cron asked for, run by its first grant.
      expect(report).toMatchObject({
        kind: 'node-cron',
        runs: new Set(keys).size,
        reaped: 0,
        periodMs: 1000,
        last: {
          grantId: claimed.at(-1)!.id,
          resourceId: `cron:${lastKey}`,
          fireTime: lastKey.slice('cli-jobs-report:'.length),
          holder: 'cron-host-1',
          outcome: 'finished',
        },
      });
      expect(Date.parse(report.nextFire)).toBeGreaterThan(Date.parse(report.last.fireTime));
      expect(Date.parse(report.nextFire) % 1000).toBe(0);
      expect(view.jobs.map((j) => j.name)).toEqual(['cron:cli-jobs-report', 'cli-jobs:nightly']);
      const hourly = (JSON.parse(named.stdout) as typeof view).jobs.find((j) => j.name === 'cli-jobs:hourly');
      expect(hourly).toMatchObject({
        kind: 'exclusive',
        runs: 1,
        nextFire: null,
        last: { holder: 'billing-host-2', outcome: 'operator', reason: 'stuck' },
      });
      await releaseAll(db.knex);
    },
  );
});

/** Runs `hint` (a "more:" line's command) with `sh -c`, `mysql-rwlock` on PATH being this checkout's CLI. */
function paste(hint: string): Promise<Run> {
  const bin = HINT_BIN;
  if (!existsSync(join(bin, 'mysql-rwlock'))) {
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, 'mysql-rwlock'), `#!/bin/sh\nexec "$RWLOCK_NODE" "${BIN}" "$@"\n`, { mode: 0o755 });
  }
  return new Promise((resolve, reject) => {
    const env = {
      ...process.env,
      MYSQL_URL: url(),
      RWLOCK_NODE: process.execPath,
      PATH: `${bin}:${process.env.PATH ?? ''}`,
    };
    const child = spawn('sh', ['-c', hint], { cwd: REPO, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

/** The command of a page's "more:" hint (the output's last line, or lines when an id ends in newlines), or null. */
function hintOf(stdout: string): string | null {
  const at = stdout.startsWith('more: ') ? 0 : stdout.lastIndexOf('\nmore: ') + 1;
  return at === 0 && !stdout.startsWith('more: ') ? null : stdout.slice(at + 'more: '.length).replace(/\n$/, '');
}

/** Grant ids of a table's rows (each row one line: its cells escape newlines). */
const rowIds = (stdout: string): number[] => [...stdout.matchAll(/^(\d+) /gm)].map((m) => Number(m[1]));

/** Characters a terminal acts on (format.ts escapes them): C0, DEL, C1, U+2028/9, bidi controls. */
const TERMINAL_CONTROLS =
  // eslint-disable-next-line no-control-regex -- matching control characters is this pattern's purpose
  /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

describe('"more:" hints, pasted into a shell', () => {
  it(
    'ls: the hint repeats every filter and --limit, quoted, and pages through exactly the same query',
    SLOW,
    async () => {
      await releaseAll(db.knex);
      const dir = mkdtempSync(join(tmpdir(), 'rwlock-hint-'));
      const pwned = join(dir, 'pwned');
      try {
        const owner = `o'$(touch ${pwned})\`touch ${pwned}\`;"x`;
        const mine = createLockManager({ knex: db.knex, owner });
        const ids = [
          `hint:$(touch ${pwned})`,
          `hint:\`touch ${pwned}\``,
          'hint:it\'s "q"',
          `hint:a;touch ${pwned}`,
          'hint:l1\nl2',
          'hint:\u001b[2J\u202e',
        ];
        const wanted: number[] = [];
        for (const id of ids) wanted.push((await mine.tryAcquireWrite(id))!.id);
        // Outside the filters: a reader, another owner, one with a trailing space, another prefix.
        await mine.tryAcquireRead('hint:read');
        await createLockManager({ knex: db.knex, owner: 'other' }).tryAcquireWrite('hint:other');
        await createLockManager({ knex: db.knex, owner: `${owner} ` }).tryAcquireWrite('hint:padded');
        await mine.tryAcquireWrite('elsewhere:x');

        let page = await cli([
          'ls',
          '--prefix',
          'hint:',
          '--mode',
          'write',
          '--owner',
          owner,
          '--stale-after',
          '600000',
          '--limit',
          '2',
        ]);
        const seen = [...rowIds(page.stdout)];
        const hints: string[] = [];
        for (let hint = hintOf(page.stdout); hint !== null; hint = hintOf(page.stdout)) {
          hints.push(hint);
          expect(hint).not.toMatch(TERMINAL_CONTROLS);
          page = await paste(hint);
          expect(page.status, page.stderr).toBe(0);
          seen.push(...rowIds(page.stdout));
        }
        expect(hints).toHaveLength(2);
        expect(hints[0]).toMatch(
          /^mysql-rwlock ls --mode=write '--owner=o'\\''.*' --prefix=hint: --stale-after=600000 --limit 2 --after \d+$/,
        );
        expect(seen).toEqual(wanted);
        expect(existsSync(pwned)).toBe(false);
      } finally {
        rmSync(dir, { recursive: true, force: true });
        await releaseAll(db.knex);
      }
    },
  );

  it(
    'history: the hint repeats --limit and the id, quoted, and reads the next page of the same resource',
    SLOW,
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'rwlock-hint-'));
      const pwned = join(dir, 'pwned');
      try {
        const locks = createLockManager({ knex: db.knex });
        const ids = [
          `hist:$(touch ${pwned})`,
          `hist:\`touch ${pwned}\`;touch ${pwned}`,
          '-hist:\'"',
          'hist:l1\nl2\u009b',
          'hist:end\n\n',
        ];
        await Promise.all(
          ids.map(async (id) => {
            const granted: number[] = [];
            for (let i = 0; i < 3; i++) {
              const g = (await locks.tryAcquireWrite(id))!;
              granted.push(g.id);
              await g.release();
            }
            await locks.tryAcquireWrite(`${id}x`); // a resource whose id starts with this one: not on its pages
            const first = await cli(['history', '--limit', '2', '--', id]);
            expect(first.status, first.stderr).toBe(0);
            const hint = hintOf(first.stdout);
            expect(hint, JSON.stringify(id)).toMatch(/^mysql-rwlock history --limit 2 --before \d+ -- /);
            const next = await paste(hint!);
            expect(next.status, next.stderr).toBe(0);
            expect(hintOf(next.stdout)).toBeNull();
            expect([...rowIds(first.stdout), ...rowIds(next.stdout)], JSON.stringify(id)).toEqual(granted.reverse());
          }),
        );
        expect(existsSync(pwned)).toBe(false);
      } finally {
        rmSync(dir, { recursive: true, force: true });
        await releaseAll(db.knex);
      }
    },
  );
});

describe('terminal safety', () => {
  it(
    'ls, history and status escape every control, separator and bidi character; --json keeps them exact',
    SLOW,
    async () => {
      await releaseAll(db.knex);
      const owner = 'own\u009b31m\u202e';
      const locks = createLockManager({ knex: db.knex, owner });
      const ids = [
        'term:\u009b2J',
        'term:\u0085nel',
        'term:\u2028ls\u2029ps',
        'term:\u202eabc\u2067x\u2069',
        'term:\u061c\u200e\u200f\u202a\u2066',
        'term:\u001b]0;t\u0007\u007f\r',
      ];
      for (const id of ids) {
        const g = (await locks.tryAcquireWrite(id))!;
        await g.release();
        await locks.tryAcquireWrite(id);
      }
      const [ls, lsJson, status, ...histories] = await Promise.all([
        cli(['ls', '--prefix', 'term:']),
        cli(['ls', '--prefix', 'term:', '--json']),
        cli(['status']),
        ...ids.map((id) => cli(['history', '--limit', '1', '--', id])),
      ]);
      for (const [what, run] of [
        ['ls', ls],
        ['status', status],
        ...histories.map((h, i) => [`history ${JSON.stringify(ids[i])}`, h] as const),
      ] as const) {
        expect(run.status, what).toBe(0);
        expect(run.stdout, what).not.toMatch(TERMINAL_CONTROLS);
      }
      expect(ls.stdout).toContain('term:\\u009b2J');
      expect(ls.stdout).toContain('term:\\u202eabc\\u2067x\\u2069');
      expect(ls.stdout).toContain('own\\u009b31m\\u202e');
      expect(ls.stdout.trim().split('\n')).toHaveLength(1 + ids.length);
      expect(
        (JSON.parse(lsJson.stdout) as Array<{ resourceId: string; owner: string }>).map((g) => [g.resourceId, g.owner]),
      ).toEqual(ids.map((id) => [id, owner]));
      await releaseAll(db.knex);
    },
  );
});

describe('changing commands', () => {
  it(
    "release needs --reason; it releases as an operator, the holder's commit is refused, history shows who and why",
    SLOW,
    async () => {
      const locks = createLockManager({ knex: db.knex });
      let released: Run | undefined;
      const before = await snapshot(db.knex);
      const noReason = await cli(['release', '1']);
      expect(noReason.status).toBe(2);
      expect(noReason.stderr).toMatch(/--reason TEXT is required/);
      expect(await snapshot(db.knex)).toBe(before);
      const err = await locks
        .withWriteLock('cli-release', async (_trx, grant) => {
          released = await cli(['release', String(grant.id), '--reason', 'stuck since the 14:00 deploy']);
        })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(LockLostError);
      expect(released!.status).toBe(0);
      const grantId = (err as LockLostError).grantId;
      expect(released!.stdout).toMatch(
        new RegExp(`^released grant ${grantId} as cli:\\S+@\\S+: stuck since the 14:00 deploy\\n$`),
      );
      const again = await cli(['release', String(grantId), '--reason', 'again', '--json']);
      expect(again.status).toBe(1);
      expect(JSON.parse(again.stdout)).toMatchObject({ grantId, released: false });

      const history = await cli(['history', 'cli-release']);
      expect(history.status).toBe(0);
      expect(history.stdout.split('\n')[0]).toMatch(
        /^GRANT +MODE +OWNER +GRANTED AT +HELD +ENDED BY +ENDED AT +RELEASER +REASON$/,
      );
      expect(history.stdout).toMatch(
        new RegExp(`^${grantId} +write .* operator .* cli:\\S+ +stuck since the 14:00 deploy$`, 'm'),
      );
      const asJson = JSON.parse((await cli(['history', 'cli-release', '--json'])).stdout) as {
        grants: Array<Record<string, unknown>>;
        next: null;
      };
      expect(asJson).toEqual(viaJson(await locks.history('cli-release')));
      expect((await cli(['history', 'cli-never-used'])).status).toBe(1);
    },
  );

  it('reap releases stale grants (exit 0) and then finds none (exit 0 too: a scheduled reap fails only when it fails)', async () => {
    await releaseAll(db.knex);
    const locks = createLockManager({ knex: db.knex });
    const g = (await locks.tryAcquireWrite('cli-reap'))!;
    await backdate(db.knex, g.id, 120_000);
    const first = await cli(['reap', '--stale-after', '60000']);
    expect(first.status).toBe(0);
    expect(first.stdout).toMatch(/^reaped 1 grant in /);
    expect(first.stdout).toMatch(new RegExp(`^${g.id} +cli-reap +write `, 'm'));
    const second = await cli(['reap', '--stale-after', '60000', '--json']);
    expect(second.status).toBe(0);
    expect(JSON.parse(second.stdout)).toMatchObject({ reaped: 0, skipped: 0, failed: 0 });
    expect((await locks.history('cli-reap')).grants[0]).toMatchObject({ id: g.id, releasedBy: 'reaper' });
  });

  it('purge deletes old released grants (exit 0), then has nothing to do (exit 0)', async () => {
    const locks = createLockManager({ knex: db.knex });
    await (await locks.tryAcquireWrite('cli-purge'))!.release();
    await db.knex.raw(
      "UPDATE t_lock_log SET create_time = create_time - INTERVAL 2 DAY, released_at = released_at - INTERVAL 2 DAY WHERE resource_id = 'cli-purge'",
    );
    const first = await cli(['purge', '--retention', '3600000', '--json']);
    expect(first.status).toBe(0);
    expect((JSON.parse(first.stdout) as { purged: number }).purged).toBeGreaterThanOrEqual(1);
    expect((await locks.history('cli-purge')).grants).toEqual([]);
    expect(await cli(['purge', '--retention', '3600000'])).toMatchObject({
      status: 0,
      stdout: 'purged 0 released grants\n',
    });
  });

  it(
    'check finds counts that disagree with the log (exit 1), --repair sets them (exit 0), then all agree (exit 0)',
    SLOW,
    async () => {
      await releaseAll(db.knex);
      const locks = createLockManager({ knex: db.knex });
      await (await locks.tryAcquireWrite('cli-check'))!.release();
      await db.knex.raw("UPDATE t_read_write_lock SET w_count = 1 WHERE resource_id = 'cli-check'");
      const found = await cli(['check']);
      expect(found.status).toBe(1);
      expect(found.stdout).toMatch(
        /^RESOURCE +W_COUNT +R_COUNT +LIVE WRITE +LIVE READ +NOTE\ncli-check +1 +0 +0 +0 *\n1 resource disagrees: run check --repair\n$/,
      );
      const asJson = await cli(['check', '--json']);
      expect(asJson.status).toBe(1);
      expect(JSON.parse(asJson.stdout)).toEqual({
        disagreements: [
          { resourceId: 'cli-check', wCount: 1, rCount: 0, liveWrites: 0, liveReads: 0, rowMissing: false },
        ],
        more: false,
      });
      const repaired = await cli(['check', '--repair']);
      expect(repaired.status).toBe(0);
      expect(repaired.stdout).toMatch(/^repaired 1 resource in [^\n]*\nRESOURCE [^\n]*\ncli-check +1 +0 +0 +0 *\n$/);
      const again = await cli(['check']);
      expect(again).toMatchObject({ status: 0, stdout: 'every count agrees with the live grants\n' });
      expect(await locks.tryAcquireWrite('cli-check')).not.toBeNull();
    },
  );

  it('migrate creates the schema on an empty database, then has nothing to do: both exit 0 (`migrate && start`)', async () => {
    const name = `rwl_cli_migrate_${process.pid}`;
    await createDatabase(db.url, name);
    try {
      const env = { MYSQL_URL: databaseUrl(db.url, name) };
      const first = await cli(['migrate'], env);
      expect(first.status).toBe(0);
      expect(first.stdout).toBe(MIGRATIONS.map((m) => `applied ${m.name}\n`).join(''));
      const second = await cli(['migrate', '--json'], env);
      expect(second.status).toBe(0);
      expect(JSON.parse(second.stdout)).toEqual({ applied: [], repaired: [] });
      const third = await cli(['migrate'], env);
      expect(third).toMatchObject({ status: 0, stdout: 'schema up to date: nothing to do\n' });
    } finally {
      await dropDatabase(db.url, name);
    }
  });
});

describe('bad usage and failures', () => {
  it('exit 2 for an unknown command or flag, a bad id or number, a bad URL; nothing changed', SLOW, async () => {
    const locks = createLockManager({ knex: db.knex });
    const g = (await locks.tryAcquireWrite('cli-usage'))!;
    const before = await snapshot(db.knex);
    const cases: Array<[string[], Record<string, string> | undefined, RegExp]> = [
      [['frobnicate'], undefined, /^mysql-rwlock: unknown command "frobnicate"; commands: status, ls/],
      [['ls', '--bogus'], undefined, /^mysql-rwlock ls: Unknown option '--bogus'/],
      [['ls', '--limit', 'ten'], undefined, /^mysql-rwlock ls: --limit must be a whole number, got "ten"/],
      [['ls', '--limit', '0'], undefined, /^mysql-rwlock ls: limit must be an integer from 1 to 10000, got 0/],
      [['ls', '--mode', 'exclusive'], undefined, /--mode must be write, read or permit/],
      [['jobs', '--window', '1d'], undefined, /--window must be a whole number/],
      [['ls', '--after', '999999999'], undefined, /after: there is no grant 999999999/],
      [['ls', 'extra'], undefined, /takes no arguments/],
      [['release', 'abc', '--reason', 'x'], undefined, /<grantId> must be a whole number, got "abc"/],
      [['release', String(g.id), '--reason', ''], undefined, /reason must be well-formed text of 1 to 500 characters/],
      [['release', String(g.id), '--reason', 'x'.repeat(501)], undefined, /reason must be/],
      [['inspect'], undefined, /needs <resourceId>/],
      [['inspect', ''], undefined, /resource id must not be empty/],
      [
        ['history', 'x', '--before', '-3'],
        undefined,
        /Option '--before' argument is ambiguous|--before must be a whole number/,
      ],
      [['reap', '--batch-size', '20000'], undefined, /batchSize must be an integer from 1 to 10000/],
      [['status'], {}, /^mysql-rwlock status: MYSQL_URL is required.*\(or pass --url\)/],
      [['status', '--url', 'postgres://u:pw@db/app'], {}, /^mysql-rwlock status: --url must start with mysql:\/\//],
    ];
    const runs = await Promise.all(cases.map(([args, env]) => cli(args, env)));
    for (const [i, [args, , message]] of cases.entries()) {
      expect(runs[i]!.status, args.join(' ')).toBe(2);
      expect(runs[i]!.stderr, args.join(' ')).toMatch(message);
      expect(runs[i]!.stdout, args.join(' ')).toBe('');
    }
    expect(await snapshot(db.knex)).toBe(before);
    await g.release();
  });

  it('never prints the password: not for a bad URL, a refused login or an unreachable server (exit 2, 3, 3)', async () => {
    const u = new URL(db.url);
    const secret = 'S3cr3t-pw_x';
    const denied = new URL(databaseUrl(db.url, db.name));
    denied.username = 'rwlock_no_such_user';
    denied.password = secret;
    const port = await freePort();
    const runs = await Promise.all([
      cli(['status'], { MYSQL_URL: `mysql://u:${secret}@${u.hostname}:99999/db` }),
      cli(['status'], { MYSQL_URL: denied.toString() }),
      cli(['ls', '--url', `mysql://u:${secret}@127.0.0.1:${port}/app`], {}),
    ]);
    expect(runs.map((r) => r.status)).toEqual([2, 3, 3]);
    expect(runs[1]!.stderr).toMatch(/^mysql-rwlock status: Access denied for user 'rwlock_no_such_user'/);
    expect(runs[2]!.stderr).toMatch(/ECONNREFUSED/);
    for (const r of runs) expect(r.stdout + r.stderr).not.toContain(secret);
  });

  it("exit 3 when the schema is missing, with the fix in the CLI's own words", async () => {
    const name = `rwl_cli_bare_${process.pid}`;
    await createDatabase(db.url, name);
    try {
      const r = await cli(['status'], { MYSQL_URL: databaseUrl(db.url, name) });
      expect(r.status).toBe(3);
      expect(r.stderr).toMatch(
        /^mysql-rwlock status: mysql-rwlock tables or procedures not found: run `mysql-rwlock migrate` or apply sql\/schema.sql/,
      );
      expect(r.stderr).not.toContain('migrate(db)');
      // What the CLI tells them to run does fix it.
      expect((await cli(['migrate'], { MYSQL_URL: databaseUrl(db.url, name) })).status).toBe(0);
      expect((await cli(['status'], { MYSQL_URL: databaseUrl(db.url, name) })).status).toBe(0);
    } finally {
      await dropDatabase(db.url, name);
    }
  });
});
