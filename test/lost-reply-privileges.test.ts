// An acquire whose connection is cut while its CALL waits on a row lock, for a runtime user with
// only the privileges the README lists (no PROCESS, so it cannot see the old server thread). The
// lost attempt is withdrawn under its token, so when the old CALL finally runs it cannot commit a
// grant that nobody holds.
// covers: src/lock/durable/durable-acquire.ts, src/sql/withdraw.ts, src/lock/durable/token.ts
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectKnex, parseMysqlUrl } from '../harness/database.js';
import { lockWaitingThreads } from './support/lock-waits.js';
import { proxyFor, type FaultProxy } from './support/proxy.js';
import { createLockManager } from '../src/index.js';
import { grantStatements } from '../src/admin/privileges.js';
import { newToken } from '../src/lock/durable/token.js';
import { useTestDatabase } from './support/db.js';
import { invariantViolations } from './support/state.js';

// The lost CALL: this database has the procedure whatever the lane (the plain statements' lost
// COMMIT is test/failures.test.ts's).
const db = useTestDatabase(import.meta.filename, { procedures: true });
const user = `rwl_np_${randomBytes(3).toString('hex')}`;
const password = randomBytes(9).toString('hex');
let proxy: FaultProxy;
let runtime: Knex;
let runtimeUrl = '';

/** The runtime privileges the README documents (the `app` role), and nothing else. */
const RUNTIME_GRANTS = (database: string): string[] => grantStatements('app', `'${user}'@'%'`, database);

beforeAll(async () => {
  await db.knex.raw(`CREATE USER '${user}'@'%' IDENTIFIED BY '${password}'`);
  for (const grant of RUNTIME_GRANTS(db.name)) await db.knex.raw(grant);
  const front = await proxyFor(db.url);
  proxy = front.proxy;
  const url = front.url;
  url.username = user;
  url.password = password;
  runtimeUrl = url.toString();
  runtime = connectKnex(runtimeUrl, db.name, { poolMax: 4 });
});

afterAll(async () => {
  await runtime?.destroy();
  await proxy?.close();
  await db.knex.raw(`DROP USER IF EXISTS '${user}'@'%'`);
});

async function rows<T>(sql: string, bindings: Knex.RawBinding[] = []): Promise<T[]> {
  return ((await db.knex.raw(sql, bindings)) as unknown as [T[]])[0];
}

/** Server threads of this database's transactions that wait for a lock. */
const waitingThreads = (): Promise<number[]> => lockWaitingThreads(db.knex);

async function until<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function threadGone(id: number): Promise<true | undefined> {
  return (await rows('SELECT 1 FROM information_schema.PROCESSLIST WHERE ID = ?', [id])).length === 0
    ? true
    : undefined;
}

async function liveGrantIds(resource: string): Promise<number[]> {
  const found = await rows<{ id: number }>(
    'SELECT id FROM t_lock_log WHERE status = 0 AND resource_id = ? ORDER BY id',
    [Buffer.from(resource)],
  );
  return found.map((r) => Number(r.id));
}

/**
 * Holds the resource row so acquires wait on it; `cutWhileWaiting` then runs an acquire through the
 * proxy, cuts its connection once its CALL waits on the row lock, and lets it go on afterwards.
 */
async function blockResource(resource: string): Promise<Knex.Transaction> {
  const locks = createLockManager({ knex: db.knex });
  await (await locks.acquireRead(resource)).release(); // the row exists
  const blocker = await db.knex.transaction();
  await blocker.raw('SELECT * FROM t_read_write_lock WHERE resource_id = ? FOR UPDATE', [Buffer.from(resource)]);
  return blocker;
}

describe('a lost acquire reply, for a runtime user without PROCESS', () => {
  it('the runtime user really lacks PROCESS', async () => {
    const [grants] = (await runtime.raw('SHOW GRANTS')) as unknown as [Array<Record<string, string>>];
    expect(grants.map((g) => Object.values(g)[0]).join('\n')).not.toMatch(/PROCESS|ALL PRIVILEGES|SUPER/);
  });

  it('a CALL cut while it waits on a row lock is withdrawn: afterwards the caller holds the only live grant', async () => {
    const resource = 'np-lost';
    const blocker = await blockResource(resource);
    const locks = createLockManager({ knex: runtime, resolveTimeoutMs: 30_000 });
    const forwarded = proxy.armOnce(/CALL rwlock_acquire/, 'before-reply');
    const pending = locks.tryAcquireRead(resource);
    await forwarded;
    const [oldThread] = await until('the CALL to wait on the row lock', async () =>
      (await waitingThreads()).length === 1 ? waitingThreads() : undefined,
    );
    proxy.cutAll();
    // The library withdraws the lost attempt and tries again, which waits on the row too.
    await until('the new attempt to wait as well', async () =>
      (await waitingThreads()).some((t) => t !== oldThread) ? true : undefined,
    );
    await blocker.rollback();
    const grant = await pending;
    await until('the old CALL to finish', () => threadGone(oldThread!));
    expect(grant).not.toBeNull();
    expect(await liveGrantIds(resource)).toEqual([grant!.id]);
    expect(await invariantViolations(db.knex)).toEqual([]);
    expect(await grant!.release()).toBe(true);
    expect(await liveGrantIds(resource)).toEqual([]);
  });

  it('negative control: a new attempt without withdrawing the lost one leaves a live grant that nobody holds', async () => {
    const resource = 'np-blind';
    const blocker = await blockResource(resource);
    const forwarded = proxy.armOnce(/CALL rwlock_acquire/, 'before-reply');
    // Each CALL on a connection of its own, through the proxy, as the runtime user.
    const call = async (): Promise<number | null> => {
      const conn = await mysql.createConnection({ ...parseMysqlUrl(runtimeUrl), database: db.name });
      try {
        const [sets] = await conn.query('CALL rwlock_acquire(?, 1, ?, ?, 0)', [
          Buffer.from(resource),
          Buffer.from('blind'),
          newToken(),
        ]);
        return (sets as Array<Array<{ id: number | null }>>)[0]![0]!.id;
      } finally {
        conn.destroy();
      }
    };
    const lost = call().catch((e: unknown) => e);
    await forwarded;
    const [oldThread] = await until('the CALL to wait on the row lock', async () =>
      (await waitingThreads()).length === 1 ? waitingThreads() : undefined,
    );
    proxy.cutAll();
    expect(await lost).toBeInstanceOf(Error);
    const retried = call();

    await until('the blind retry to wait as well', async () =>
      (await waitingThreads()).some((t) => t !== oldThread) ? true : undefined,
    );
    await blocker.rollback();
    const id = await retried;
    await until('the old CALL to finish', () => threadGone(oldThread!));
    const live = await liveGrantIds(resource);
    expect(live).toContain(Number(id));
    expect(live.length).toBe(2); // the lost CALL's grant, held by nobody until the reaper
  });
});
