// The operators' view of leader election against a real server: one name led through a term of each
// ending (resign, close, lease run out then reaped, healed by a successor, released by an operator)
// and a term leading, read back by `locks.terms()`, `locks.leader()` and `mysql-rwlock leaders`
// (spawned as a user runs it: tables, --json, exit codes). Negative controls: a name with no
// leader exits 1, and the view tells a heal from a reap only by the heal's note.
// covers: src/sql/terms.ts, src/cli/commands-leaders.ts
import { spawn } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';
import { beforeAll, describe, expect, it } from 'vitest';
import { createLockManager, type LockManager, type Term } from '../src/index.js';
import { reapStaleGrants } from '../src/admin/index.js';
import { databaseUrl } from '../harness/database.js';
import { useTestDatabase } from './support/db.js';
import { grantRow } from './support/state.js';

const db = useTestDatabase(import.meta.filename);
const REPO = join(import.meta.dirname, '..');
const BIN = join(REPO, '.tmp', `leaders-bin-${process.pid}.mjs`);

// The bin bundled once (as test/cli.test.ts does): each run then starts plain node, not tsx.
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
  return () => rmSync(BIN, { force: true });
});

function cli(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: REPO,
      env: { ...process.env, MYSQL_URL: databaseUrl(db.url, db.name) },
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

/** The terms one campaign's callback is handed, each awaitable in turn. */
function recorder(): { lead: (t: Term) => void; next: () => Promise<Term> } {
  const waiting: Array<(t: Term) => void> = [];
  const early: Term[] = [];
  return {
    lead: (t) => {
      const w = waiting.shift();
      if (w) w(t);
      else early.push(t);
    },
    next: () => new Promise((resolve) => (early.length > 0 ? resolve(early.shift()!) : waiting.push(resolve))),
  };
}

/** A paused leader: its term's lease an hour past on the database clock, nobody having released it. */
async function pauseLeader(term: Term): Promise<void> {
  await db.knex.raw('UPDATE t_lock_log SET lease_until = UTC_TIMESTAMP(6) - INTERVAL 1 HOUR WHERE id = ?', [term.id]);
}

function manager(owner: string, options: { selfHeal?: boolean } = {}): LockManager {
  return createLockManager({ knex: db.knex, owner, ...options });
}

const NAME = 'views:ticker';
// A paused leader's term renews no sooner than this: nothing in the test waits that long.
const PAUSED = { leaseMs: 60_000, renewEveryMs: 30_000 };

describe('a name led through a term of each ending', () => {
  it(
    'terms(), leader() and `mysql-rwlock leaders` tell each term, who ended it and how; exit 0 with a leader, 1 without',
    { timeout: 120_000 },
    async () => {
      const [a, b, c, d, e, op] = ['app-1', 'app-2', 'app-3', 'app-4', 'app-5', 'ops'].map((o) =>
        manager(`ticker@${o}`),
      );
      // 1. Resigned: A leads, B waits; A resigns and B leads at once. A then closes, so it does not come back.
      const ra = recorder();
      const ca = await a!.campaign(NAME, ra.lead, { leaseMs: 30_000 });
      const t1 = await ra.next();
      const rb = recorder();
      const cb = await b!.campaign(NAME, rb.lead, { leaseMs: 30_000 });
      // B waits: its acquire sets the name's writer-intent mark, which the view shows (not who waits).
      await expect.poll(async () => (await a!.inspect(NAME)).writerWaiting).toBe(true);
      const waiting = await cli(['leaders']);
      expect(waiting.stdout).toMatch(
        new RegExp(`^${NAME} +ticker@app-1 +${t1.id} +\\S+ \\S+ +leading \\(lease .+ left\\) +yes +-$`, 'm'),
      );
      const waitingNamed = await cli(['leaders', NAME, '--limit', '1']);
      expect(waitingNamed.stdout.split('\n')[1]).toBe(
        "a writer waits for it: a campaigner (who, each process's campaigns gauge says)",
      );
      await ca.resign();
      const t2 = await rb.next();
      await ca.close();
      // 2. Closed: released by its leader, as a resignation is (the log does not tell them apart).
      await cb.close();

      // 3. Lease ran out, then reaped: C leads and is paused past its lease.
      const rc = recorder();
      const cc = await c!.campaign(NAME, rc.lead, PAUSED);
      const t3 = await rc.next();
      await pauseLeader(t3);
      expect(await a!.leader(NAME)).toBeNull();
      const ranOut = await cli(['leaders', NAME]);
      expect(ranOut.status, ranOut.stderr).toBe(1);
      expect(ranOut.stdout.split('\n')[0]).toBe(
        `${NAME}: no term leads; the last, ${t3.id} (ticker@app-3): LEASE RAN OUT 1h 00m ago (the reaper, or a campaigner's next attempt, releases it)`,
      );
      const listed = await cli(['leaders']);
      expect(listed.status).toBe(0);
      expect(listed.stdout).toMatch(
        new RegExp(
          `^${NAME} +ticker@app-3 +${t3.id} +\\S+ \\S+ +LEASE RAN OUT 1h 00m ago .* +${t2.id}: resigned `,
          'm',
        ),
      );
      const reaped = await reapStaleGrants(db.knex, { staleAfterMs: 600_000 });
      expect(reaped.grants.map((g) => g.id)).toEqual([t3.id]);
      await cc.close();

      // 4. Healed: D leads and is paused; E's campaign finds the lease run out, releases it and leads.
      const rd = recorder();
      const cd = await d!.campaign(NAME, rd.lead, PAUSED);
      const t4 = await rd.next();
      await pauseLeader(t4);
      const re = recorder();
      const ce = await e!.campaign(NAME, re.lead, { leaseMs: 30_000, renewEveryMs: 200 });
      const t5 = await re.next();
      await cd.close();

      // 5. Released by an operator: E finds its term lost at its next renewal and leads again.
      expect(await op!.forceRelease(t5.id, { reason: 'moving ticker to the new cluster' })).toBe(true);
      const t6 = await re.next();
      expect(await grantRow(db.knex, t6.id)).toMatchObject({ status: 0 });

      const { terms, next } = await op!.terms(NAME, { limit: 10 });
      expect(next).toBeNull();
      expect(terms.map((t) => [t.term, t.owner, t.how, t.releaser, t.reason])).toEqual([
        [t6.id, 'ticker@app-5', 'leading', null, null],
        [t5.id, 'ticker@app-5', 'operator', 'ticker@ops', 'moving ticker to the new cluster'],
        [t4.id, 'ticker@app-4', 'healed', 'ticker@app-5', expect.stringMatching(/^self-healed by an acquire/)],
        [t3.id, 'ticker@app-3', 'reaped', null, null],
        [t2.id, 'ticker@app-2', 'resigned', null, null],
        [t1.id, 'ticker@app-1', 'resigned', null, null],
      ]);
      // Each ended term has its end; a leased one keeps its last lease after it.
      for (const t of terms.slice(1)) expect(t.endedAt!.getTime()).toBeGreaterThanOrEqual(t.since.getTime());
      expect(terms[0]!.endedAt).toBeNull();
      expect(terms.every((t) => t.leaseUntil !== null)).toBe(true);
      // leader() is the newest term when it leads: the same row, from the same query.
      expect(await op!.leader(NAME)).toEqual({
        owner: 'ticker@app-5',
        term: t6.id,
        since: terms[0]!.since,
        leaseUntil: terms[0]!.leaseUntil,
      });
      // Pages, as history() pages: the next page starts below the last term of this one.
      const page1 = await op!.terms(NAME, { limit: 4 });
      expect(page1.terms.map((t) => t.term)).toEqual([t6.id, t5.id, t4.id, t3.id]);
      expect(page1.next).toBe(t3.id);
      const page2 = await op!.terms(NAME, { limit: 4, before: page1.next! });
      expect(page2).toEqual({ terms: terms.slice(4), next: null });

      // The shell: a headline, then a row per term with how it ended.
      const shown = await cli(['leaders', NAME]);
      expect(shown.status, shown.stderr).toBe(0);
      const lines = shown.stdout.trimEnd().split('\n');
      expect(lines[0]).toMatch(
        new RegExp(`^${NAME}: led by ticker@app-5 in term ${t6.id} since \\S+ \\S+ \\(.+\\), lease until \\S+ \\S+$`),
      );
      expect(lines[2]).toMatch(/^TERM +OWNER +SINCE +ENDED +LED +HOW$/);
      const how = lines.slice(3).map((l) => l.replace(/^(\d+) +(\S+) +\S+ \S+ +(?:-|\S+ \S+) +\S+ \S+ +/, '$1 $2 '));
      expect(how).toEqual([
        expect.stringMatching(new RegExp(`^${t6.id} ticker@app-5 leading \\(lease .+ left\\)$`)),
        `${t5.id} ticker@app-5 released by operator ticker@ops: moving ticker to the new cluster`,
        `${t4.id} ticker@app-4 healed by ticker@app-5 (its lease ran out)`,
        `${t3.id} ticker@app-3 REAPED (its lease ran out; released by the reaper)`,
        `${t2.id} ticker@app-2 resigned (released by its leader: resign, close, a failed callback or a late renewal)`,
        `${t1.id} ticker@app-1 resigned (released by its leader: resign, close, a failed callback or a late renewal)`,
      ]);
      const asJson = await cli(['leaders', NAME, '--json', '--limit', '2']);
      expect(asJson.status).toBe(0);
      const parsed = JSON.parse(asJson.stdout) as { name: string; leading: { term: number }; terms: unknown[] };
      expect(parsed).toMatchObject({ name: NAME, leading: { term: t6.id } });
      expect(parsed.terms).toEqual([
        expect.objectContaining({ term: t6.id, how: 'leading', endedAt: null }),
        expect.objectContaining({ term: t5.id, how: 'operator', releaser: 'ticker@ops' }),
      ]);

      // The list: the name with its leader and the term before it.
      const list = await cli(['leaders']);
      expect(list.status).toBe(0);
      expect(list.stdout).toMatch(/^NAME +LEADER +TERM +SINCE +STATE +WAITING +BEFORE IT$/m);
      expect(list.stdout).toMatch(
        new RegExp(
          `^${NAME} +ticker@app-5 +${t6.id} +\\S+ \\S+ +leading \\(lease .+ left\\) +- +${t5.id}: released by operator ticker@ops`,
          'm',
        ),
      );

      // Kept beside the page's screenshots: docs/cli.md shows such a run.
      mkdirSync(join(REPO, '.tmp', 'screens'), { recursive: true });
      writeFileSync(
        join(REPO, '.tmp', 'screens', 'leaders.txt'),
        `$ mysql-rwlock leaders\n${list.stdout}$ mysql-rwlock leaders ${NAME}\n${shown.stdout}`,
      );

      // Negative controls: a name that no term leads exits 1 (the check is not vacuous), and one
      // that was never campaigned for says the log holds nothing of it.
      await ce.close();
      const after = await cli(['leaders', NAME, '--limit', '1']);
      expect(after.status).toBe(1);
      expect(after.stdout.split('\n')[0]).toBe(
        `${NAME}: no term leads; the last, ${t6.id} (ticker@app-5): resigned (released by its leader: resign, close, a failed callback or a late renewal)`,
      );
      const never = await cli(['leaders', 'views:never']);
      expect([never.status, never.stdout.trim()]).toEqual([
        1,
        'views:never: no term leads; the log holds no write grant of it',
      ]);
      const none = await cli(['leaders']);
      expect([none.status, none.stdout.trim()]).toEqual([0, 'no leader names: no live write grant holds a lease']);
      for (const m of [a, b, c, d, e, op]) await m!.close();
    },
  );

  it('a heal and a reap differ only in the note: without the heal note, a healed term reads as reaped', async () => {
    // The negative control of the `healed` reading: the same release with its note's releaser
    // blanked (as the reaper writes it) is told as a reap.
    const locks = manager('control@app');
    const g = (await locks.tryAcquireWrite('views:control'))!;
    expect(await g.extend(60_000)).toBe(true);
    await db.knex.raw('UPDATE t_lock_log SET lease_until = UTC_TIMESTAMP(6) - INTERVAL 1 HOUR WHERE id = ?', [g.id]);
    const healer = manager('healer@app');
    const next = (await healer.tryAcquireWrite('views:control'))!;
    expect(next).not.toBeNull();
    expect((await locks.terms('views:control')).terms.map((t) => t.how)).toEqual(['unleased', 'healed']);
    await db.knex.raw("UPDATE t_lock_release_note SET releaser = '' WHERE grant_id = ?", [g.id]);
    expect((await locks.terms('views:control')).terms.map((t) => t.how)).toEqual(['unleased', 'reaped']);
    await next.release();
    await locks.close();
    await healer.close();
  });
});
