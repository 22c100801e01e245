// Each role's grants (src/admin/privileges.ts), proven: a user with exactly the GRANT statements
// `grantStatements` renders, and nothing else, runs every operation of its role; with one of them
// revoked the operation fails with PrivilegeError. And a user who could acquire but not release
// (only EXECUTE, issue 24's failure 10) is refused before any grant is written.
// covers: src/admin/privileges.ts, src/lock/durable/privilege-probe.ts, src/sql/release-probe.ts, src/errors.ts
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectKnex, createDatabase, databaseUrl, dropDatabase } from '../harness/database.js';
import { grantStatements, ROLES, type RoleName } from '../src/admin/privileges.js';
import { migrate } from '../src/admin/migrate.js';
import { purgeReleasedGrants, reapStaleGrants } from '../src/admin/reap-and-purge.js';
import { checkLockCounts, repairLockCounts } from '../src/admin/count-check.js';
import { serveDashboard } from '../src/dashboard/serve.js';
import { PrivilegeError } from '../src/errors.js';
import { createLockManager } from '../src/lock/manager/manager.js';
import { testSwitches } from '../src/test-switches.js';
import { MIGRATIONS } from '../migrations/index.js';
import { useTestDatabase } from './support/db.js';
import { backdate, backdateRelease, grantRow, invariantViolations } from './support/state.js';

// The role `app` calls the procedure, so this database has it whatever the lane.
const db = useTestDatabase(import.meta.filename, { procedures: true });
const REPO = join(import.meta.dirname, '..');
const DAY_MS = 86_400_000;
/** Tests that start the CLI or the reaper job as child processes (tsx compiles each): slow on a busy machine. */
const SPAWNS = { timeout: 180_000 };
const users: string[] = [];
const knexes: Knex[] = [];

afterAll(async () => {
  await Promise.all(knexes.map((k) => k.destroy()));
  for (const u of users) await db.knex.raw(`DROP USER IF EXISTS ${u}`);
});

interface RoleUser {
  account: string;
  /** mysql://user:password@host:port/database */
  url: string;
  knex: Knex;
}

/**
 * A new user with exactly `role`'s rendered grants on `database` (the test's own by default),
 * then `revoke` (a REVOKE's privilege and object, e.g. `UPDATE ON t_lock_log`) taken away.
 */
async function userFor(
  role: RoleName | null,
  options: { database?: string; revoke?: string; extra?: string[] } = {},
): Promise<RoleUser> {
  const database = options.database ?? db.name;
  const name = `rwl_${randomBytes(5).toString('hex')}`;
  const password = randomBytes(9).toString('hex');
  const account = `'${name}'@'%'`;
  await db.knex.raw(`CREATE USER ${account} IDENTIFIED BY '${password}'`);
  users.push(account);
  for (const sql of role === null ? [] : grantStatements(role, account, database)) await db.knex.raw(sql);
  for (const sql of options.extra ?? []) await db.knex.raw(`${sql} TO ${account}`);
  if (options.revoke !== undefined) {
    const [privilege, table] = options.revoke.split(' ON ') as [string, string];
    const on = table === '*' ? `\`${database.replace(/_/g, '\\_')}\`.*` : `\`${database}\`.\`${table}\``;
    await db.knex.raw(`REVOKE ${privilege} ON ${on} FROM ${account}`);
  }
  const u = new URL(databaseUrl(db.url, database));
  u.username = name;
  u.password = password;
  const knex = connectKnex(u.toString(), database, { poolMax: 4 });
  knexes.push(knex);
  return { account, url: u.toString(), knex };
}

async function rows<T>(sql: string, bindings: Knex.RawBinding[] = []): Promise<T[]> {
  return ((await db.knex.raw(sql, bindings)) as unknown as [T[]])[0];
}

async function grantsOfOwner(owner: string): Promise<Array<{ id: number; status: number }>> {
  return rows('SELECT id, status FROM t_lock_log WHERE owner = ? ORDER BY id', [owner]);
}

/** A command run to its exit: `cli` (src/cli/bin.ts) or the reaper job (jobs/reaper.ts). */
function run(
  script: string,
  args: string[],
  env: Record<string, string>,
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], {
      cwd: REPO,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

const privilegeRefusal = (role: string | undefined, denied: RegExp) =>
  expect.objectContaining({
    name: 'PrivilegeError',
    code: 'ERR_RWLOCK_PRIVILEGE',
    role,
    denied: expect.stringMatching(denied),
    message: expect.stringContaining('mysql-rwlock privileges --role'),
  });

/** Every operation of the application, as that user; leaves nothing held. */
async function appOperations(knex: Knex, procedures: boolean, prefix: string): Promise<void> {
  const owner = `app-${prefix}-${randomBytes(3).toString('hex')}`;
  const locks = createLockManager({ knex, owner, procedures, staleAfterMs: 60_000 });
  const w = (await locks.tryAcquireWrite(`${prefix}:w`))!; // first use: inserts the resource row
  expect(w).not.toBeNull();
  expect(await w.isLive()).toBe(true);
  expect(await w.extend(30_000)).toBe(true);
  expect((await locks.inspect(`${prefix}:w`)).holders.map((h) => h.id)).toEqual([w.id]);
  await w.downgrade();
  expect(await w.tryUpgrade()).toBe(w);
  expect(await w.release()).toBe(true);
  const r = await locks.acquireRead(`${prefix}:w`, { waitMs: 5_000 });
  expect(await r.release()).toBe(true);
  expect(await locks.withWriteLock(`${prefix}:fenced`, async (_trx, g) => g.id)).toBeGreaterThan(0);
  expect(await locks.withReadLock(`${prefix}:fenced`, async () => 'read')).toBe('read');
  const fenced = (await locks.tryAcquireWrite(`${prefix}:fence`))!;
  await knex.transaction(async (trx) => {
    await fenced.fence(
      async (sql, params) => ((await trx.raw(sql, params)) as unknown as [{ affectedRows: number }])[0].affectedRows,
    );
  });
  fenced.committed();
  const ended = await grantsOfOwner(owner);
  expect(ended).toHaveLength(5);
  expect(ended.every((g) => g.status === 2)).toBe(true);
  // Self-healing: a grant past the cutoff is reaped by the next acquire, its note written.
  const crashed = (await locks.tryAcquireWrite(`${prefix}:crashed`))!;
  await backdate(db.knex, crashed.id, 120_000);
  const healed = await locks.tryAcquireWrite(`${prefix}:crashed`);
  expect(healed).not.toBeNull();
  expect(await grantRow(db.knex, crashed.id)).toMatchObject({ status: 2, released_by: 2 });
  expect(await healed!.release()).toBe(true);
}

describe('the roles, each as a user with exactly its rendered grants', () => {
  it('app (stored procedures): acquire, wait, with*Lock, fence, extend, downgrade, upgrade, isLive, inspect, release', async () => {
    const { knex } = await userFor('app');
    await appOperations(knex, true, 'app');
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('app-no-procedures: the same with plain statements, and no EXECUTE', async () => {
    const { knex } = await userFor('app-no-procedures');
    await appOperations(knex, false, 'plain');
    // It really has no EXECUTE: the procedure is refused, typed.
    await expect(createLockManager({ knex, procedures: true }).tryAcquireRead('plain:call')).rejects.toEqual(
      privilegeRefusal(undefined, /rwlock_acquire|EXECUTE/i),
    );
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('negative control, app: without UPDATE on t_lock_log the acquire is refused before anything is written', async () => {
    // The role on the error says the probe refused it: a statement's own refusal names no role.
    const { knex } = await userFor('app', { revoke: 'UPDATE ON t_lock_log' });
    const locks = createLockManager({ knex, owner: 'app-no-update' });
    await expect(locks.tryAcquireWrite('app-neg')).rejects.toEqual(
      privilegeRefusal('app', /UPDATE command denied.*t_lock_log/),
    );
    await expect(
      createLockManager({ knex, owner: 'app-no-update', procedures: false }).acquireRead('app-neg'),
    ).rejects.toEqual(privilegeRefusal('app-no-procedures', /UPDATE command denied/));
    expect(await grantsOfOwner('app-no-update')).toEqual([]);
  });

  it(
    "reaper: the job's --once run reaps (noting each release) and purges; reapStaleGrants and purgeReleasedGrants too",
    SPAWNS,
    async () => {
      const reaper = await userFor('reaper');
      const locks = createLockManager({ knex: db.knex, owner: 'crashed-holder' });
      const stale = [(await locks.tryAcquireWrite('reap:a'))!, (await locks.tryAcquireRead('reap:b'))!];
      const old = (await locks.tryAcquireWrite('reap:old'))!;
      await old.release();
      // Stale after a minute; purged after a day: the reaped ones stay in the log, `old` goes.
      for (const g of stale) await backdate(db.knex, g.id, 120_000);
      await backdate(db.knex, old.id, 2 * DAY_MS);
      await backdateRelease(db.knex, old.id, 2 * DAY_MS);
      const job = await run('jobs/reaper.ts', ['--once'], {
        MYSQL_URL: reaper.url,
        STALE_AFTER_MS: '60000',
        RETENTION_MS: String(DAY_MS),
      });
      expect(job.status, job.stdout + job.stderr).toBe(0);
      const runLine = job.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((l) => l.event === 'reaper.run');
      expect(runLine).toMatchObject({ ok: true, reaped: 2, failed: 0 });
      expect(runLine!.purged).toBe(1);
      for (const g of stale) expect(await grantRow(db.knex, g.id)).toMatchObject({ status: 2, released_by: 2 });
      expect(
        await rows(
          'SELECT grant_id FROM t_lock_release_note WHERE grant_id IN (?, ?) ORDER BY grant_id',
          stale.map((g) => g.id),
        ),
      ).toHaveLength(2);
      expect(await rows('SELECT id FROM t_lock_log WHERE id = ?', [old.id])).toEqual([]);
      // With its last grant its resource row and gate row went: the role may delete both.
      expect(await rows('SELECT resource_id FROM t_read_write_lock WHERE resource_id = ?', ['reap:old'])).toEqual([]);
      expect(await rows('SELECT resource_id FROM t_lock_gate WHERE resource_id = ?', ['reap:old'])).toEqual([]);

      // The library's functions, as the same user: a stale grant reaped, its row and note purged.
      const again = (await locks.tryAcquireWrite('reap:c'))!;
      await backdate(db.knex, again.id, 2 * DAY_MS);
      expect(await reapStaleGrants(reaper.knex, { staleAfterMs: 60_000 })).toMatchObject({ reaped: 1, failed: 0 });
      await backdateRelease(db.knex, again.id, 2 * DAY_MS);
      await db.knex.raw(
        'UPDATE t_lock_release_note SET released_at = released_at - INTERVAL 2 DAY WHERE grant_id = ?',
        [again.id],
      );
      expect((await purgeReleasedGrants(reaper.knex, { retentionMs: DAY_MS })).purged).toBe(1);
      expect(await rows('SELECT grant_id FROM t_lock_release_note WHERE grant_id = ?', [again.id])).toEqual([]);

      // The CLI's reap and purge, as the same user.
      const last = (await locks.tryAcquireWrite('reap:d'))!;
      await backdate(db.knex, last.id, 2 * DAY_MS);
      const cliReap = await run('src/cli/bin.ts', ['reap', '--stale-after', '60000'], { MYSQL_URL: reaper.url });
      expect(cliReap.status, cliReap.stderr).toBe(0);
      expect(await grantRow(db.knex, last.id)).toMatchObject({ status: 2, released_by: 2 });
      await backdateRelease(db.knex, last.id, 2 * DAY_MS);
      const cliPurge = await run('src/cli/bin.ts', ['purge', '--retention', String(DAY_MS)], { MYSQL_URL: reaper.url });
      expect(cliPurge.status, cliPurge.stderr).toBe(0);
      expect(await rows('SELECT id FROM t_lock_log WHERE id = ?', [last.id])).toEqual([]);
      expect(await invariantViolations(db.knex)).toEqual([]);
    },
  );

  it(
    'negative control, reaper: without INSERT on t_lock_release_note a run stops at the first refusal with one message naming the role; without DELETE on it, purge fails',
    SPAWNS,
    async () => {
      const noNote = await userFor('reaper', { revoke: 'INSERT ON t_lock_release_note' });
      const locks = createLockManager({ knex: db.knex, owner: 'crashed-holder-2' });
      const stale = [];
      for (const id of ['reap:neg:1', 'reap:neg:2', 'reap:neg:3']) {
        const g = (await locks.tryAcquireWrite(id))!;
        await backdate(db.knex, g.id, 120_000);
        stale.push(g);
      }
      await expect(reapStaleGrants(noNote.knex, { staleAfterMs: 60_000, batchSize: 2 })).rejects.toEqual(
        privilegeRefusal('reaper', /INSERT command denied.*t_lock_release_note/),
      );
      const job = await run('jobs/reaper.ts', ['--once'], {
        MYSQL_URL: noNote.url,
        STALE_AFTER_MS: '60000',
        RETENTION_MS: '0',
      });
      expect(job.status).toBe(1);
      const lines = job.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      // One message for the run, not one per grant.
      expect(lines.filter((l) => l.event === 'reaper.problem')).toEqual([]);
      const failed = lines.filter((l) => l.event === 'reaper.run');
      expect(failed).toEqual([expect.objectContaining({ ok: false, code: 'ERR_RWLOCK_PRIVILEGE', role: 'reaper' })]);
      expect(failed[0]!.error).toMatch(
        /INSERT command denied.*t_lock_release_note.*mysql-rwlock privileges --role reaper .*the reaper role needs/,
      );
      // Not reaped: the release and its note are one transaction.
      for (const g of stale) expect(await grantRow(db.knex, g.id)).toMatchObject({ status: 0 });
      for (const g of stale) await g.release();
      const noDelete = await userFor('reaper', { revoke: 'DELETE ON t_lock_release_note' });
      // A note older than the retention, so that the purge has one to delete: it deletes only what it
      // has taken (SKIP LOCKED), and with nothing to delete it sends no DELETE to be refused.
      await db.knex.raw(
        'INSERT INTO t_lock_release_note (grant_id, released_at, released_by) VALUES (?, UTC_TIMESTAMP(6) - INTERVAL 3 DAY, 2)',
        [2 ** 40],
      );
      await expect(purgeReleasedGrants(noDelete.knex, { retentionMs: DAY_MS })).rejects.toEqual(
        // MySQL refuses the locking read that takes the rows first (its FOR UPDATE needs DELETE or UPDATE).
        privilegeRefusal(undefined, /(DELETE|SELECT with locking clause) command denied.*t_lock_release_note/),
      );
    },
  );

  it(
    "operator: list, history, stats, inspect, forceRelease; the CLI's status, ls, history, release; the page's state and release",
    SPAWNS,
    async () => {
      const operator = await userFor('operator');
      const holder = createLockManager({ knex: db.knex, owner: 'op-holder' });
      const [a, b, c] = [
        (await holder.tryAcquireWrite('op:a'))!,
        (await holder.tryAcquireWrite('op:b'))!,
        (await holder.tryAcquireWrite('op:c'))!,
      ];
      const ops = createLockManager({ knex: operator.knex, owner: 'op-api' });
      expect((await ops.list({ owner: 'op-holder' })).grants.map((g) => g.id)).toEqual([a.id, b.id, c.id]);
      expect((await ops.inspect('op:a')).holders.map((h) => h.id)).toEqual([a.id]);
      expect((await ops.stats()).live.write).toBeGreaterThanOrEqual(3);
      expect(await ops.forceRelease(a.id, { reason: 'api' })).toBe(true);
      expect((await ops.history('op:a')).grants[0]).toMatchObject({
        id: a.id,
        releasedBy: 'operator',
        releaser: 'op-api',
        reason: 'api',
      });

      const env = { MYSQL_URL: operator.url };
      for (const args of [['status'], ['ls', '--owner', 'op-holder'], ['inspect', 'op:b'], ['history', 'op:a']]) {
        const r = await run('src/cli/bin.ts', args, env);
        expect(r.status, `${args.join(' ')}: ${r.stderr}`).toBe(0);
      }
      const cliRelease = await run('src/cli/bin.ts', ['release', String(b.id), '--reason', 'cli'], env);
      expect(cliRelease.status, cliRelease.stderr).toBe(0);
      expect(await grantRow(db.knex, b.id)).toMatchObject({ status: 2, released_by: 3 });

      const page = await serveDashboard({ knex: operator.knex, port: 0, allowRelease: true });
      try {
        const state = await fetch(`${page.url}api/state`);
        expect(state.status).toBe(200);
        expect(JSON.stringify(await state.json())).toContain('op:c');
        const html = await (await fetch(page.url)).text();
        const token = (
          JSON.parse(/<script type="application\/json" id="config">(.*?)<\/script>/.exec(html)![1]!) as {
            token: string;
          }
        ).token;
        const released = await fetch(`${page.url}api/release`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', origin: page.url.slice(0, -1), 'x-rwlock-token': token },
          body: JSON.stringify({ grantId: c.id, operator: 'Ada', reason: 'page' }),
        });
        expect(released.status, await released.clone().text()).toBe(200);
        expect(await grantRow(db.knex, c.id)).toMatchObject({ status: 2, released_by: 3 });
      } finally {
        await page.close();
      }
      expect(await invariantViolations(db.knex)).toEqual([]);
    },
  );

  it(
    'negative control, operator: without INSERT on t_lock_release_note forceRelease is refused and the grant stays live',
    SPAWNS,
    async () => {
      const noNote = await userFor('operator', { revoke: 'INSERT ON t_lock_release_note' });
      const holder = createLockManager({ knex: db.knex, owner: 'op-holder-2' });
      const g = (await holder.tryAcquireWrite('op:neg'))!;
      await expect(createLockManager({ knex: noNote.knex }).forceRelease(g.id, { reason: 'x' })).rejects.toEqual(
        privilegeRefusal(undefined, /INSERT command denied.*t_lock_release_note/),
      );
      expect(await grantRow(db.knex, g.id)).toMatchObject({ status: 0 });
      const r = await run('src/cli/bin.ts', ['release', String(g.id), '--reason', 'x'], { MYSQL_URL: noNote.url });
      expect(r.status).toBe(3);
      expect(r.stderr).toMatch(
        /^mysql-rwlock release: INSERT command denied.*t_lock_release_note.*mysql-rwlock privileges --role ROLE.*\(ERR_RWLOCK_PRIVILEGE\)$/m,
      );
      expect(await g.release()).toBe(true);
    },
  );

  it(
    "checker and repairer: a count changed by hand is found, then set from the log; the CLI's check and check --repair",
    SPAWNS,
    async () => {
      const holder = createLockManager({ knex: db.knex });
      const g = (await holder.tryAcquireRead('count:a'))!;
      await db.knex.raw('UPDATE t_read_write_lock SET r_count = 3 WHERE resource_id = ?', [Buffer.from('count:a')]);
      const checker = await userFor('checker');
      expect((await checkLockCounts(checker.knex)).disagreements.map((d) => d.resourceId)).toEqual(['count:a']);
      const repairer = await userFor('repairer');
      const repaired = await repairLockCounts(repairer.knex);
      expect(repaired).toMatchObject({ problems: [], skipped: [] });
      expect(repaired.repaired.map((d) => d.resourceId)).toEqual(['count:a']);
      // A missing resource row is inserted from the log.
      await db.knex.raw('DELETE FROM t_read_write_lock WHERE resource_id = ?', [Buffer.from('count:a')]);
      expect((await repairLockCounts(repairer.knex)).repaired).toEqual([
        expect.objectContaining({ resourceId: 'count:a', rowMissing: true }),
      ]);
      expect((await checkLockCounts(checker.knex)).disagreements).toEqual([]);
      // The CLI's check and check --repair, as the same users.
      await db.knex.raw('UPDATE t_read_write_lock SET r_count = 2 WHERE resource_id = ?', [Buffer.from('count:a')]);
      const found = await run('src/cli/bin.ts', ['check'], { MYSQL_URL: checker.url });
      expect(found.status, found.stderr).toBe(1); // a disagreement found
      expect(found.stdout).toContain('count:a');
      const fixed = await run('src/cli/bin.ts', ['check', '--repair'], { MYSQL_URL: repairer.url });
      expect(fixed.status, fixed.stderr).toBe(0);
      expect((await checkLockCounts(checker.knex)).disagreements).toEqual([]);
      expect(await g.release()).toBe(true);
    },
  );

  it('negative control, checker and repairer: without SELECT on t_lock_log, or INSERT on t_read_write_lock, refused and named', async () => {
    const checker = await userFor('checker', { revoke: 'SELECT ON t_lock_log' });
    await expect(checkLockCounts(checker.knex)).rejects.toEqual(
      privilegeRefusal(undefined, /SELECT command denied.*t_lock_log/),
    );
    const holder = createLockManager({ knex: db.knex });
    const g = (await holder.tryAcquireRead('count:neg'))!;
    await db.knex.raw('DELETE FROM t_read_write_lock WHERE resource_id = ?', [Buffer.from('count:neg')]);
    const repairer = await userFor('repairer', { revoke: 'INSERT ON t_read_write_lock' });
    const r = await repairLockCounts(repairer.knex);
    expect(r.repaired).toEqual([]);
    expect(r.problems).toEqual([
      expect.stringMatching(/^count:neg: INSERT command denied.*t_read_write_lock.*mysql-rwlock privileges --role/),
    ]);
    // Put right as root, so the file's other tests see agreeing counts.
    expect((await repairLockCounts(db.knex)).repaired.map((d) => d.resourceId)).toEqual(['count:neg']);
    expect(await g.release()).toBe(true);
  });

  describe('migrate, on an empty database', () => {
    const name = `${db.name.slice(0, 40)}_m${randomBytes(2).toString('hex')}`;
    beforeAll(() => createDatabase(db.url, name));
    afterAll(() => dropDatabase(db.url, name));

    it('creates the schema, then rebuilds a dropped procedure and index, as the migrate role', SPAWNS, async () => {
      const m = await userFor('migrate', { database: name });
      expect((await migrate(m.knex)).applied).toEqual(MIGRATIONS.map((x) => x.name));
      const root = connectKnex(db.url, name);
      knexes.push(root);
      await root.raw('DROP PROCEDURE rwlock_acquire');
      await root.raw('ALTER TABLE t_lock_log DROP INDEX ix_lock_log_resource');
      expect((await migrate(m.knex)).repaired.sort()).toEqual(['rwlock_acquire', 't_lock_log.ix_lock_log_resource']);
      // The schema it made serves the application.
      const app = await userFor('app', { database: name });
      const g = (await createLockManager({ knex: app.knex, procedures: true }).tryAcquireWrite('migrated'))!;
      expect(await g.release()).toBe(true);
      const cli = await run('src/cli/bin.ts', ['migrate'], { MYSQL_URL: m.url });
      expect(cli.status, cli.stderr).toBe(0); // up to date: nothing to do, and a deploy goes on
    });

    it('negative control: without CREATE ROUTINE, migrate is refused and names the role', async () => {
      const other = `${name}_n`;
      await createDatabase(db.url, other);
      try {
        const m = await userFor('migrate', { database: other, revoke: 'CREATE ROUTINE ON *' });
        await expect(migrate(m.knex)).rejects.toEqual(privilegeRefusal('migrate', /denied|CREATE ROUTINE/i));
      } finally {
        await dropDatabase(db.url, other);
      }
    });
  });

  it('negative control, app: without INSERT on t_lock_release_note an acquire cannot heal; it warns once and answers as before', async () => {
    const { knex } = await userFor('app', { revoke: 'INSERT ON t_lock_release_note' });
    const locks = createLockManager({ knex, owner: 'app-no-note', staleAfterMs: 60_000 });
    const crashed = (await locks.tryAcquireWrite('app-no-note'))!;
    await backdate(db.knex, crashed.id, 120_000);
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(w.message);
    process.on('warning', onWarning);
    try {
      expect(await locks.tryAcquireWrite('app-no-note')).toBeNull();
      expect(await locks.tryAcquireWrite('app-no-note')).toBeNull();
      await expect.poll(() => warnings.filter((m) => /self-healing is off/.test(m))).toHaveLength(1);
    } finally {
      process.off('warning', onWarning);
    }
    expect(await grantRow(db.knex, crashed.id)).toMatchObject({ status: 0 });
    expect(await crashed.release()).toBe(true);
  });

  it('every role is covered above', () => {
    expect(Object.keys(ROLES).sort()).toEqual([
      'app',
      'app-no-procedures',
      'checker',
      'migrate',
      'operator',
      'reaper',
      'repairer',
    ]);
  });
});

describe('a user who could acquire but not release (issue 24, failure 10)', () => {
  async function securityOfAcquire(): Promise<string> {
    const [row] = await rows<{ s: string }>(
      "SELECT SECURITY_TYPE AS s FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = 'rwlock_acquire'",
    );
    return row!.s;
  }

  it('only EXECUTE: the acquire fails with PrivilegeError and no grant row exists', async () => {
    const { knex } = await userFor(null, { extra: [`GRANT EXECUTE ON \`${db.name.replace(/_/g, '\\_')}\`.*`] });
    const locks = createLockManager({ knex, owner: 'execute-only' });
    await expect(locks.tryAcquireWrite('exec-only')).rejects.toEqual(privilegeRefusal('app', /denied/));
    await expect(locks.withWriteLock('exec-only', async () => 1, { waitMs: 100 })).rejects.toBeInstanceOf(
      PrivilegeError,
    );
    expect(await grantsOfOwner('execute-only')).toEqual([]);
  });

  it("negative control: without the probe, the EXECUTE-only user leaks a live grant where the procedure runs with its definer's rights", async () => {
    const { knex } = await userFor(null, { extra: [`GRANT EXECUTE ON \`${db.name.replace(/_/g, '\\_')}\`.*`] });
    const locks = createLockManager({ knex, owner: 'execute-only-unprobed' });
    testSwitches.privilegeProbe.probe = false;
    try {
      if ((await securityOfAcquire()) === 'DEFINER') {
        const g = (await locks.tryAcquireWrite('exec-leak'))!;
        await expect(g.release()).rejects.toBeInstanceOf(PrivilegeError);
        expect(await grantsOfOwner('execute-only-unprobed')).toEqual([{ id: g.id, status: 0 }]);
        expect(await createLockManager({ knex: db.knex }).forceRelease(g.id)).toBe(true);
      } else {
        // SQL SECURITY INVOKER: the procedure's own statements are refused, so nothing is granted.
        await expect(locks.tryAcquireWrite('exec-leak')).rejects.toBeInstanceOf(PrivilegeError);
        expect(await grantsOfOwner('execute-only-unprobed')).toEqual([]);
      }
    } finally {
      testSwitches.privilegeProbe.probe = true;
    }
  });

  it("negative control: without the probe, a user with the acquire's privileges but not UPDATE on t_lock_log leaks a live grant (both paths)", async () => {
    const { knex } = await userFor('app', { revoke: 'UPDATE ON t_lock_log' });
    testSwitches.privilegeProbe.probe = false;
    try {
      for (const procedures of [true, false]) {
        const owner = `no-release-${procedures}`;
        const g = (await createLockManager({ knex, owner, procedures }).tryAcquireWrite(`leak-${procedures}`))!;
        expect(g).not.toBeNull();
        await expect(g.release()).rejects.toEqual(privilegeRefusal(undefined, /UPDATE command denied.*t_lock_log/));
        expect(await grantsOfOwner(owner)).toEqual([{ id: g.id, status: 0 }]);
        expect(await createLockManager({ knex: db.knex }).forceRelease(g.id)).toBe(true);
      }
    } finally {
      testSwitches.privilegeProbe.probe = true;
    }
  });

  it('each manager probes before its first acquire: a privilege revoked after one manager passed refuses the next', async () => {
    const { knex, account } = await userFor('app');
    const locks = createLockManager({ knex, owner: 'probed-once' });
    expect(await (await locks.tryAcquireWrite('once'))!.release()).toBe(true);
    await db.knex.raw(`REVOKE INSERT ON \`${db.name}\`.\`t_lock_log\` FROM ${account}`);
    const fresh = createLockManager({ knex, owner: 'probed-fresh' });
    await expect(fresh.tryAcquireWrite('once')).rejects.toEqual(
      privilegeRefusal('app', /INSERT command denied.*t_lock_log/),
    );
    expect(await grantsOfOwner('probed-fresh')).toEqual([]);
  });
});
