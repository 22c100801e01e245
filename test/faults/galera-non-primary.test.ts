// A real Galera node cut off from its cluster (gmcast.isolate) is outside the primary component and
// refuses clients with 1047. Every lock call through it gets NodeNotReadyError and nothing changes
// on the primary component; once the node rejoins, the lock works through it again.
// covers: src/errors.ts, src/sql/connection.ts
import mysql from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import { errnoOf } from '../../src/sql/connection.js';
import { createLockManager, NodeNotReadyError, type Grant } from '../../src/index.js';
import { reapStaleGrants } from '../../src/admin/index.js';
import { useGaleraDatabase } from '../support/galera.js';

const galera = useGaleraDatabase('rwlock_non_primary', 'galera-non-primary');

async function status(port: number, name: string): Promise<string | undefined> {
  const conn = await mysql.createConnection({ host: '127.0.0.1', port, user: 'root' });
  try {
    const [rows] = await conn.query('SHOW STATUS LIKE ?', [name]);
    return (rows as Array<{ Value: string }>)[0]?.Value;
  } finally {
    await conn.end();
  }
}

async function isolate(port: number, on: boolean): Promise<void> {
  const conn = await mysql.createConnection({ host: '127.0.0.1', port, user: 'root' });
  try {
    await conn.query(`SET GLOBAL wsrep_provider_options = 'gmcast.isolate=${on ? 1 : 0}'`);
  } finally {
    await conn.end();
  }
}

async function logRows(resourceId: string): Promise<number> {
  const [rows] = (await galera
    .node(0)
    .raw('SELECT COUNT(*) AS n FROM t_lock_log WHERE resource_id = ?', [Buffer.from(resourceId)])) as unknown as [
    Array<{ n: number }>,
  ];
  return Number(rows[0]!.n);
}

function expectNotReady(err: unknown): void {
  expect(err).toBeInstanceOf(NodeNotReadyError);
  expect((err as NodeNotReadyError).code).toBe('ERR_RWLOCK_NODE_NOT_READY');
  expect(errnoOf((err as Error).cause)).toBe(1047);
}

describe('a Galera node outside the primary component', () => {
  it('refuses every lock call with NodeNotReadyError and changes nothing; after the rejoin it grants again', async () => {
    const { cluster } = galera;
    const [primary, isolated] = [galera.node(0), galera.node(2)];
    const onPrimary = createLockManager({ knex: primary });
    const throughIsolated = createLockManager({ knex: isolated });
    // A grant made before the cut, replicated to every node: the isolated node cannot release it.
    const held: Grant = (await onPrimary.tryAcquireWrite('np-held'))!;
    expect(held).not.toBeNull();
    await expect
      .poll(() => status(cluster.nodes[2]!.port, 'wsrep_last_committed'), { timeout: 30_000 })
      .toBe(await status(cluster.nodes[0]!.port, 'wsrep_last_committed'));

    await isolate(cluster.nodes[2]!.port, true);
    await expect
      .poll(() => status(cluster.nodes[2]!.port, 'wsrep_cluster_status'), { timeout: 60_000 })
      .toBe('non-Primary');
    await expect.poll(() => cluster.clusterSize(0), { timeout: 60_000 }).toBe(2);

    expectNotReady(await throughIsolated.tryAcquireWrite('np-1').catch((e: unknown) => e));
    expectNotReady(await throughIsolated.acquireRead('np-1', { waitMs: 500 }).catch((e: unknown) => e));
    let ran = false;
    expectNotReady(await throughIsolated.withWriteLock('np-1', async () => void (ran = true)).catch((e: unknown) => e));
    expect(ran).toBe(false);
    expectNotReady(await throughIsolated.forceRelease(held.id).catch((e: unknown) => e));
    expectNotReady(await reapStaleGrants(isolated, { staleAfterMs: 1 }).catch((e: unknown) => e));
    // The primary component saw none of it.
    expect(await logRows('np-1')).toBe(0);
    expect((await onPrimary.inspect('np-held')).holders.map((h) => h.id)).toEqual([held.id]);

    await isolate(cluster.nodes[2]!.port, false);
    await expect
      .poll(() => status(cluster.nodes[2]!.port, 'wsrep_local_state_comment'), { timeout: 120_000 })
      .toBe('Synced');
    await expect.poll(() => cluster.clusterSize(0), { timeout: 60_000 }).toBe(3);
    const again = await throughIsolated.acquireWrite('np-1', { waitMs: 30_000 });
    expect((await onPrimary.inspect('np-1')).holders.map((h) => h.id)).toEqual([again.id]);
    expect(await again.release()).toBe(true);
    expect(await held.release()).toBe(true);
  });
});
