// LockManager.close(): it waits for the calls in flight (scoped work and waiting acquires) to end,
// refuses new calls with ManagerClosedError and writes nothing for them, leaves the grants it
// handed out valid until released, and leaves nothing running: a process that closes its manager
// and destroys its knex exits on its own, its work committed.
// covers: src/lock/manager/in-flight.ts, src/lock/manager/manager.ts
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it, beforeAll } from 'vitest';
import { databaseUrl } from '../harness/database.js';
import { createLockManager, ManagerClosedError, type Grant, type LockManager } from '../src/index.js';
import { useTestDatabase } from './support/db.js';

const db = useTestDatabase(import.meta.filename);
const REPO = join(import.meta.dirname, '..');
/** Far longer than a cold tsx start and two short transactions on a busy 2-core machine; a hang means something was left running. */
const EXIT_WITHIN_MS = 90_000;

beforeAll(async () => {
  await db.knex.raw('CREATE TABLE close_effects (id VARCHAR(100) PRIMARY KEY)');
});

async function rowCounts(): Promise<{ grants: number; resources: number; notes: number }> {
  const [[row]] = (await db.knex.raw(
    'SELECT (SELECT COUNT(*) FROM t_lock_log) AS grants, (SELECT COUNT(*) FROM t_read_write_lock) AS resources, (SELECT COUNT(*) FROM t_lock_release_note) AS notes',
  )) as unknown as [[{ grants: number | string; resources: number | string; notes: number | string }]];
  return { grants: Number(row.grants), resources: Number(row.resources), notes: Number(row.notes) };
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('close()', () => {
  it('waits for scoped work and a waiting acquire in flight, refusing new calls meanwhile', async () => {
    const locks = createLockManager({ knex: db.knex });
    const entered = deferred();
    const gate = deferred();
    const work = locks.withWriteLock(
      'close-1',
      async (trx) => {
        entered.resolve();
        await gate.promise;
        await trx.raw('INSERT INTO close_effects (id) VALUES (?)', ['close-1:work']);
        return 'done';
      },
      { leaseMs: 300 },
    );
    await entered.promise;
    const waiter = locks.acquireRead('close-1', { waitMs: 30_000 });
    let closed = false;
    const closing = locks.close().then(() => void (closed = true));

    await expect(locks.tryAcquireWrite('close-1-other')).rejects.toBeInstanceOf(ManagerClosedError);
    // The work cannot end before the gate opens, so neither can close().
    expect(closed).toBe(false);
    gate.resolve();
    expect(await work).toBe('done');
    const read = await waiter;
    await closing;
    expect(closed).toBe(true);
    // The grant handed out before close stays valid until released.
    expect(await read.isLive()).toBe(true);
    expect(await read.release()).toBe(true);

    const [[effect]] = (await db.knex.raw('SELECT COUNT(*) AS n FROM close_effects WHERE id = ?', [
      'close-1:work',
    ])) as unknown as [[{ n: number | string }]];
    expect(Number(effect.n)).toBe(1);
    expect(await createLockManager({ knex: db.knex }).inspect('close-1')).toMatchObject({
      live: { write: 0, read: 0 },
      holders: [],
    });
  });

  it('refuses every call of a closed manager with ManagerClosedError, writing nothing', async () => {
    const locks = createLockManager({ knex: db.knex });
    const held = await locks.acquireWrite('close-2-held');
    await locks.close();
    const before = await rowCounts();
    const calls: Array<[string, (l: LockManager) => Promise<unknown>]> = [
      ['tryAcquireWrite', (l) => l.tryAcquireWrite('close-2')],
      ['tryAcquireRead', (l) => l.tryAcquireRead('close-2')],
      ['acquireWrite', (l) => l.acquireWrite('close-2')],
      ['acquireRead', (l) => l.acquireRead('close-2')],
      ['withWriteLock', (l) => l.withWriteLock('close-2', async () => 1)],
      ['withReadLock', (l) => l.withReadLock('close-2', async () => 1)],
      ['inspect', (l) => l.inspect('close-2')],
      ['list', (l) => l.list()],
      ['history', (l) => l.history('close-2')],
      ['stats', (l) => l.stats()],
      ['forceRelease', (l) => l.forceRelease(held.id, { reason: 'after close' })],
    ];
    for (const [what, call] of calls) {
      const err = await call(locks).catch((e: unknown) => e);
      expect(err, what).toBeInstanceOf(ManagerClosedError);
      expect(err, what).toMatchObject({ code: 'ERR_RWLOCK_CLOSED', message: `${what}: the lock manager is closed` });
    }
    expect(await rowCounts()).toEqual(before);
    // forceRelease was refused: the grant is still live, and its holder can still release it.
    expect(await held.release()).toBe(true);
  });

  it('is idempotent, and `await using` closes the manager at the end of the scope', async () => {
    const locks = createLockManager({ knex: db.knex });
    const first = locks.close();
    expect(locks.close()).toBe(first);
    await first;
    await expect(locks.close()).resolves.toBeUndefined();

    let scoped: LockManager | undefined;
    {
      await using inScope = createLockManager({ knex: db.knex });
      scoped = inScope;
      expect(await inScope.withWriteLock('close-3', async () => 'ran')).toBe('ran');
    }
    await expect(scoped.tryAcquireWrite('close-3')).rejects.toBeInstanceOf(ManagerClosedError);
  });

  it('serves the calls the work in flight makes, so that it can finish', async () => {
    const locks = createLockManager({ knex: db.knex });
    const entered = deferred();
    const gate = deferred();
    let inner: { joined: number; live: number } | undefined;
    const work = locks.withWriteLock('close-4', async (_trx, grant) => {
      entered.resolve();
      await gate.promise;
      // Made after close() was called, from inside the work it waits for.
      const joined = await locks.withWriteLock('close-4', async (_t, g: Grant) => g.id);
      const state = await locks.inspect('close-4');
      inner = { joined: joined === grant.id ? 1 : 0, live: state.live.write };
      return 'finished';
    });
    await entered.promise;
    const closing = locks.close();
    await expect(locks.inspect('close-4')).rejects.toBeInstanceOf(ManagerClosedError);
    gate.resolve();
    expect(await work).toBe('finished');
    await closing;
    expect(inner).toEqual({ joined: 1, live: 1 });
  });
});

/** The worker's JSON line: the last of its output (knex logs the connection requests destroy() aborts there too). */
function lastLine(stdout: string): unknown {
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '');
}

describe('a process that closes its manager, then destroys its knex', () => {
  function runChild(env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/close-worker.ts'], {
        cwd: REPO,
        env: { ...process.env, MYSQL_URL: databaseUrl(db.url, db.name), ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const deadline = setTimeout(() => {
        child.kill('SIGKILL');
        reject(
          new Error(
            `close-worker did not exit within ${EXIT_WITHIN_MS} ms (something left running); stdout: ${stdout} stderr: ${stderr}`,
          ),
        );
      }, EXIT_WITHIN_MS);
      child.on('close', (code) => {
        clearTimeout(deadline);
        resolve({ code, stdout, stderr });
      });
    });
  }

  it('exits on its own with both writes in flight committed and nothing left held', async () => {
    const run = await runChild({ RESOURCE: 'close-child' });
    expect(run, run.stderr).toMatchObject({ code: 0 });
    expect(lastLine(run.stdout)).toEqual({ first: 'committed', second: 'committed' });
    const [rows] = (await db.knex.raw(
      "SELECT id FROM close_effects WHERE id LIKE 'close-child:%' ORDER BY id",
    )) as unknown as [Array<{ id: string }>];
    expect(rows.map((r) => r.id)).toEqual(['close-child:first', 'close-child:second']);
    expect(await createLockManager({ knex: db.knex }).inspect('close-child')).toMatchObject({
      live: { write: 0, read: 0 },
      holders: [],
    });
  });

  it('negative control: without close(), destroying the knex breaks the write still waiting', async () => {
    const run = await runChild({ RESOURCE: 'close-skip', CLOSE: 'skip' });
    expect(run.code, run.stderr).toBe(0);
    const outcome = lastLine(run.stdout) as { first: string; second: string };
    expect(outcome.second).toMatch(/^error: /);
    const [rows] = (await db.knex.raw("SELECT id FROM close_effects WHERE id = 'close-skip:second'")) as unknown as [
      unknown[],
    ];
    expect(rows).toHaveLength(0);
  });
});
