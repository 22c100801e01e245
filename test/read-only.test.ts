// A server that refuses the lock's writes (a replica, a primary that stepped down, a read-only
// session, a Galera node outside the primary component) gets a typed error from every lock write,
// and nothing changes in the database. A real Galera node cut off from its cluster is in the
// reliability suite (test/faults/galera-non-primary.test.ts).
// covers: src/errors.ts, src/sql/connection.ts
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Knex } from 'knex';
import { connectKnex } from '../harness/database.js';
import { createLockManager, NodeNotReadyError, type RwLockError, ServerReadOnlyError } from '../src/index.js';
import { reapStaleGrants } from '../src/admin/index.js';
import { errnoOf } from '../src/sql/connection.js';
import { TEST_PROCEDURES, useTestDatabase } from './support/db.js';
import { useProxiedKnex } from './support/proxy.js';
import { invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);
/** Every session of this pool is read-only, as on a reader endpoint: the lock's writes fail with 1792. */
let readOnly: Knex;

beforeAll(() => {
  readOnly = connectKnex(db.url, db.name, { poolMax: 4, afterCreate: 'SET SESSION TRANSACTION READ ONLY' });
});

afterAll(async () => {
  await readOnly?.destroy();
});

async function logRows(resourceId: string): Promise<number> {
  const [rows] = (await db.knex.raw('SELECT COUNT(*) AS n FROM t_lock_log WHERE resource_id = ?', [
    Buffer.from(resourceId),
  ])) as unknown as [Array<{ n: number }>];
  return Number(rows[0]!.n);
}

function expectReadOnly(err: unknown, errno: number): void {
  expect(err).toBeInstanceOf(ServerReadOnlyError);
  expect((err as ServerReadOnlyError).code).toBe('ERR_RWLOCK_READ_ONLY');
  expect(errnoOf((err as Error).cause)).toBe(errno);
}

describe('a read-only session', () => {
  it('acquire, withWriteLock, forceRelease and the reaper throw ServerReadOnlyError; nothing changes', async () => {
    const locks = createLockManager({ knex: readOnly });
    expectReadOnly(await locks.tryAcquireWrite('ro-1').catch((e: unknown) => e), 1792);
    expectReadOnly(await locks.acquireRead('ro-1', { waitMs: 1_000 }).catch((e: unknown) => e), 1792);
    let ran = false;
    expectReadOnly(await locks.withWriteLock('ro-1', async () => void (ran = true)).catch((e: unknown) => e), 1792);
    expect(ran).toBe(false);
    expect(await logRows('ro-1')).toBe(0);

    // A grant made through a writable pool cannot be released or reaped through the read-only one.
    const held = await createLockManager({ knex: db.knex }).tryAcquireWrite('ro-2');
    expectReadOnly(await locks.forceRelease(held!.id).catch((e: unknown) => e), 1792);
    expect((await locks.inspect('ro-2')).live.write).toBe(1);
    // The reaper reports a grant it could not release and goes on.
    const reap = await reapStaleGrants(readOnly, { staleAfterMs: 1 });
    expect(reap).toMatchObject({ reaped: 0, failed: 1 });
    expect(reap.problems).toEqual([`grant ${held!.id}: ${new ServerReadOnlyError(null).message}`]);
    expect((await locks.inspect('ro-2')).holders.map((h) => h.id)).toEqual([held!.id]);
    expect(await held!.release()).toBe(true);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });
});

const REFUSALS = [
  {
    name: 'a server running read_only (1290, as a Group Replication secondary or a replica replies)',
    reply: {
      errno: 1290,
      sqlState: 'HY000',
      message: 'The MySQL server is running with the --super-read-only option so it cannot execute this statement',
    },
    type: ServerReadOnlyError,
    code: 'ERR_RWLOCK_READ_ONLY',
  },
  {
    name: 'a Galera node that is not ready (1047, outside the primary component or joining)',
    reply: { errno: 1047, sqlState: '08S01', message: 'WSREP has not yet prepared node for application use' },
    type: NodeNotReadyError,
    code: 'ERR_RWLOCK_NODE_NOT_READY',
  },
];

describe.each(REFUSALS)('$name', ({ reply, type, code }) => {
  const via = useProxiedKnex(db);

  it(`the acquire refused: ${code}, no grant written`, async () => {
    // The proxy does not forward the acquire's write and answers it the way such a server does.
    const refused = via.proxy.armErrorReply(
      TEST_PROCEDURES ? /CALL rwlock_acquire/ : /^UPDATE t_read_write_lock/,
      reply,
      'DO 0',
    );
    const resource = `ro-3-${reply.errno}`;
    const err = await createLockManager({ knex: via.knex })
      .tryAcquireWrite(resource)
      .catch((e: unknown) => e);
    await refused;
    expect(err).toBeInstanceOf(type);
    expect((err as RwLockError).code).toBe(code);
    expect(errnoOf((err as Error).cause)).toBe(reply.errno);
    expect(await logRows(resource)).toBe(0);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('a lost acquire reply settled during a failover: a probe refused so is asked again, and the grant is found', async () => {
    const locks = createLockManager({ knex: via.knex, resolveTimeoutMs: 10_000 });
    // The reply that carries the acquire's outcome is cut; the first probe that settles it (the
    // withdraw-by-token insert) meets a read-only node.
    const cut = via.proxy.armOnce(TEST_PROCEDURES ? /CALL rwlock_acquire/ : /^COMMIT/i, 'before-reply');
    const refused = via.proxy.armErrorReply(
      /^INSERT INTO t_lock_log \(resource_id, lock_type, status, create_time, version, owner, token, released_at, released_by\)/,
      reply,
      'DO 0',
    );
    const resource = `ro-4-${reply.errno}`;
    const g = await locks.tryAcquireWrite(resource);
    await cut;
    await refused;
    expect(g).not.toBeNull();
    expect((await locks.inspect(resource)).holders.map((h) => h.id)).toEqual([g!.id]);
    expect(await g!.release()).toBe(true);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });
});
