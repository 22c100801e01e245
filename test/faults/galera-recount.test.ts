// The count repair on a real 3-node Galera cluster, racing a grant made on another node. The repair's
// row lock is local to its node, so there the other node's grant is not held back: it replicates,
// and applying it aborts the repair (a deadlock error), which leaves the counts to a later repair
// rather than writing a stale count. The negative control, a repair that counts before it locks,
// commits the stale count there, and a writer then gets in beside the reader.
// covers: src/sql/recount.ts, src/admin/count-check.ts
import { describe, expect, it } from 'vitest';
import { isConflict, withConnection } from '../../src/sql/connection.js';
import { createLockManager, type Grant } from '../../src/index.js';
import { checkLockCounts, repairLockCounts } from '../../src/admin/index.js';
import { recountResource } from '../../src/sql/recount.js';
import { useGaleraDatabase } from '../support/galera.js';
import { afterCount, countThenLock } from '../support/recount.js';

const galera = useGaleraDatabase('rwlock_recount', 'galera-recount');

/** True once node 1 has applied the grant row with this token. */
async function appliedOnNode1(token: string): Promise<boolean> {
  const [rows] = (await galera
    .node(0)
    .raw('SELECT COUNT(*) AS n FROM t_lock_log WHERE token = UNHEX(?)', [token])) as unknown as [Array<{ n: number }>];
  return Number(rows[0]!.n) === 1;
}

describe('repairing counts on Galera while another node grants', () => {
  it.each([
    [
      "locks, then counts: applying the other node's grant aborts the repair, and a repair after it counts the grant",
      false,
    ],
    ['negative control: counts, then locks: the stale count commits and a writer gets in beside the reader', true],
  ])('%s', async (_name, broken) => {
    const [node1, node3] = [galera.node(0), galera.node(2)];
    const id = `galera-race:${broken ? 'broken' : 'locked'}`;
    const resource = Buffer.from(id);
    const onNode1 = createLockManager({ knex: node1 });
    const onNode3 = createLockManager({ knex: node3 });
    await (await onNode1.tryAcquireRead(id))!.release();
    await node1.raw('UPDATE t_read_write_lock SET r_count = 5 WHERE resource_id = ?', [resource]); // five readers counted, none live
    await expect
      .poll(async () => (await checkLockCounts(node3)).disagreements.map((d) => d.resourceId), { timeout: 30_000 })
      .toEqual([id]);

    const got: { reader: Grant | null } = { reader: null };
    // Once node 1 has counted, a reader is granted on node 3, and node 1 applies that grant.
    const readerOnNode3 = async (): Promise<void> => {
      const reader = await onNode3.tryAcquireRead(id);
      expect(reader).not.toBeNull();
      got.reader = reader;
      await expect.poll(() => appliedOnNode1(reader!.token), { timeout: 30_000 }).toBe(true);
    };
    const outcome = await withConnection(node1, async (conn) => {
      const racing = afterCount(conn, readerOnNode3);
      return broken ? countThenLock(racing, resource) : recountResource(racing, resource);
    }).then(
      () => 'committed',
      (err: unknown) => (isConflict(err) ? 'aborted' : err),
    );
    const reader = got.reader!;
    expect(reader).not.toBeNull();
    const check = await checkLockCounts(node1);
    const writer = await onNode3.tryAcquireWrite(id);

    if (broken) {
      expect(outcome).toBe('committed');
      expect(check.disagreements).toEqual([
        { resourceId: id, wCount: 0, rCount: 0, liveWrites: 0, liveReads: 1, rowMissing: false },
      ]);
      expect(writer).not.toBeNull(); // a writer beside the live reader
      await writer!.release();
      // So the reader's release can give its count back; on node 3, where the writer's release
      // committed (node 1 may not have applied it yet, and would still count the writer).
      await node3.raw('UPDATE t_read_write_lock SET r_count = 1 WHERE resource_id = ?', [resource]);
    } else {
      expect(outcome).toBe('aborted');
      expect(writer).toBeNull();
      // The abort wrote nothing: the phantom readers are still counted, beside the real one.
      expect(check.disagreements).toEqual([
        { resourceId: id, wCount: 0, rCount: 6, liveWrites: 0, liveReads: 1, rowMissing: false },
      ]);
      expect((await repairLockCounts(node1)).repaired.map((d) => d.resourceId)).toEqual([id]);
      expect(await onNode3.tryAcquireWrite(id)).toBeNull();
    }
    await expect.poll(async () => (await checkLockCounts(node3)).disagreements, { timeout: 30_000 }).toEqual([]);
    expect(await reader.release()).toBe(true);
  });
});
