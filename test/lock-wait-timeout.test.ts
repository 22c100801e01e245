// A server whose GLOBAL innodb_lock_wait_timeout is 1 s (a DBA's setting; a throwaway server of
// the lane's flavour, started with it): a durable acquire that meets a section, and a durable
// reader's fence committed while a reading section runs, never fail with the server's raw 1205.
// The acquire never waits on a lock (it is refused and tries again until its waitMs); a reading
// section never locks the lock row the fence writes. Negative control: migration 006's acquire,
// which waited on the lock row in InnoDB's queue, fails there with 1205 after 1 s.
// covers: src/sql/acquire.ts, src/sql/section.ts, src/lock/sections/section-take.ts
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Knex } from 'knex';
import { connectKnex, createDatabase } from '../harness/database.js';
import { chosenFlavour, findServer, type FoundServer } from '../harness/server.js';
import { migrate, purgeReleasedGrants } from '../src/admin/index.js';
import { invariantViolations } from './support/state.js';
import { createLockManager } from '../src/index.js';
import { TEST_PROCEDURES } from './support/db.js';
import { PROCEDURES as V6 } from '../migrations/006_invoker_routines.js';
import { errnoOf } from '../src/sql/connection.js';
import { fromKnex } from '../src/adapters/index.js';

/** Each section holds the resource this long: well past the server's 1 s lock wait timeout. */
const SECTION_MS = 2_500;
/**
 * A fence in flight commits this long after it ran: past the server's 1 s lock wait timeout, and
 * past the two tries below, each bounded by that timeout.
 */
const FENCE_MS = 4_000;
const DAY_MS = 86_400_000;

let server: FoundServer | undefined;
let knex: Knex | undefined;

beforeAll(async () => {
  const saved = { url: process.env.MYSQL_URL, flavour: process.env.RWLOCK_TEST_SERVER };
  delete process.env.MYSQL_URL;
  process.env.RWLOCK_TEST_SERVER = chosenFlavour() ?? 'mariadb-10.11';
  try {
    server = await findServer({ extraArgs: ['--innodb-lock-wait-timeout=1'] });
  } finally {
    if (saved.url === undefined) delete process.env.MYSQL_URL;
    else process.env.MYSQL_URL = saved.url;
    if (saved.flavour === undefined) delete process.env.RWLOCK_TEST_SERVER;
    else process.env.RWLOCK_TEST_SERVER = saved.flavour;
  }
  await createDatabase(server.url, 'rwl_lwt');
  knex = connectKnex(server.url, 'rwl_lwt', { poolMax: 10 });
  await migrate(knex, { procedures: TEST_PROCEDURES });
}, 180_000);

afterAll(async () => {
  await knex?.destroy();
  await server?.stop();
});

function gate(): { open: () => void; opened: Promise<void> } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}

/** A section on `id` in `mode` that holds for SECTION_MS; resolves once it holds. */
async function section(id: string, mode: 'write' | 'read'): Promise<{ done: Promise<void>; ended: () => boolean }> {
  const locks = createLockManager({ knex: knex! });
  const inside = gate();
  let ended = false;
  const work = async (): Promise<void> => {
    inside.open();
    await new Promise((r) => setTimeout(r, SECTION_MS));
    ended = true; // the commit follows
  };
  const done =
    mode === 'write'
      ? locks.withWriteLock(id, work, { section: true })
      : locks.withReadLock(id, work, { section: true });
  await inside.opened;
  return { done, ended: () => ended };
}

describe('a GLOBAL innodb_lock_wait_timeout of 1 s', () => {
  it('is in force on the throwaway server', async () => {
    const [rows] = (await knex!.raw('SELECT @@GLOBAL.innodb_lock_wait_timeout AS t')) as unknown as [
      Array<{ t: number }>,
    ];
    expect(Number(rows[0]!.t)).toBe(1);
  });

  it('a durable acquire with waitMs 10000 meeting a writing section is granted when it ends, not failed with 1205', async () => {
    const held = await section('lwt-write', 'write');
    const locks = createLockManager({ knex: knex! });
    for (const mode of ['write', 'read'] as const) {
      const grant = await (mode === 'write'
        ? locks.acquireWrite('lwt-write', { waitMs: 10_000 })
        : locks.acquireRead('lwt-write', { waitMs: 10_000 }));
      expect(held.ended()).toBe(true);
      await grant.release();
    }
    await held.done;
  });

  it("a durable reader's fence commits while a reading section runs past 1 s", async () => {
    const locks = createLockManager({ knex: knex! });
    const inside = gate();
    const sectionRuns = gate();
    const fenced = locks.withReadLock('lwt-read', async () => {
      inside.open();
      await sectionRuns.opened;
      return 'committed';
    });
    await inside.opened;
    const reading = await section('lwt-read', 'read');
    sectionRuns.open();
    // The fence writes the lock row, which the reading section (SECTION_MS long) never locked.
    expect(await fenced).toBe('committed');
    expect(reading.ended()).toBe(false);
    await reading.done;
  });

  /**
   * A durable holder of `id` in `mode` whose business transaction has run its fence (which releases
   * the grant, holding the lock row) and commits FENCE_MS later; resolves once the fence has run.
   */
  async function fenceInFlight(
    id: string,
    mode: 'write' | 'read',
  ): Promise<{ committed: () => boolean; done: Promise<void> }> {
    const holder = createLockManager({ knex: knex! });
    const grant = mode === 'write' ? await holder.acquireWrite(id) : await holder.acquireRead(id);
    const trx = await knex!.transaction();
    await grant.fence(fromKnex(trx));
    let committed = false;
    const done = (async () => {
      await new Promise((r) => setTimeout(r, FENCE_MS));
      committed = true;
      await trx.commit();
    })();
    return { committed: () => committed, done };
  }

  it('the fence in flight holds the lock row: a plain UPDATE of it fails with 1205 (the check below is not vacuous)', async () => {
    const held = await fenceInFlight('lwt-fence-control', 'write');
    const err = await knex!
      .raw('UPDATE t_read_write_lock SET version = version + 1 WHERE resource_id = ?', [
        Buffer.from('lwt-fence-control'),
      ])
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(errnoOf(err)).toBe(1205);
    expect(held.committed()).toBe(false);
    await held.done;
  });

  it("a durable acquire behind a holder's fence in flight: a try answers null, a wait is granted after its commit, never 1205", async () => {
    const locks = createLockManager({ knex: knex! });
    const held = await fenceInFlight('lwt-fence', 'write');
    expect(await locks.tryAcquireWrite('lwt-fence')).toBeNull();
    expect(await locks.tryAcquireRead('lwt-fence')).toBeNull();
    // Answered while the fence was still in flight: refused, not granted after its commit.
    expect(held.committed()).toBe(false);
    const grant = await locks.acquireWrite('lwt-fence', { waitMs: 10_000 });
    expect(held.committed()).toBe(true);
    await grant.release();
    await held.done;
    for (const call of [
      () => locks.acquirePermit('lwt-fence-p', { permits: 2, waitMs: 10_000 }).then((g) => g.release()),
      () => locks.withLocks({ write: ['lwt-fence-p', 'lwt-fence-q'] }, async () => 'ran', { waitMs: 10_000 }),
    ]) {
      const busy = await fenceInFlight('lwt-fence-p', 'write');
      await call();
      expect(busy.committed()).toBe(true);
      await busy.done;
    }
  });

  it("a reader's release beside another reader's fence in flight is made once that fence commits, never 1205", async () => {
    const locks = createLockManager({ knex: knex! });
    const other = await locks.acquireRead('lwt-release');
    const held = await fenceInFlight('lwt-release', 'read');
    expect(await other.release()).toBe(true);
    expect(held.committed()).toBe(true);
    await held.done;
  });

  /** `fenceInFlight` for a permit holder and for a durable group. */
  async function heldInFlight(
    start: (
      locks: ReturnType<typeof createLockManager>,
    ) => Promise<{ fence: (e: ReturnType<typeof fromKnex>) => Promise<void> }>,
  ): Promise<{ ended: () => boolean; done: Promise<void> }> {
    const holder = await start(createLockManager({ knex: knex! }));
    const trx = await knex!.transaction();
    await holder.fence(fromKnex(trx));
    let ended = false;
    const done = (async () => {
      await new Promise((r) => setTimeout(r, FENCE_MS));
      ended = true;
      await trx.commit();
    })();
    return { ended: () => ended, done };
  }

  /** A section group on `ids` that holds for SECTION_MS; resolves once it holds. */
  async function sectionGroup(ids: string[]): Promise<{ ended: () => boolean; done: Promise<void> }> {
    const inside = gate();
    let ended = false;
    const done = createLockManager({ knex: knex! }).withLocks(
      { write: ids },
      async () => {
        inside.open();
        await new Promise((r) => setTimeout(r, SECTION_MS));
        ended = true;
      },
      { section: true },
    );
    await inside.opened;
    return { ended: () => ended, done };
  }

  /** A released grant of `id` created and released two days ago: past any retention below. */
  async function oldReleasedGrant(id: string): Promise<void> {
    await (await createLockManager({ knex: knex! }).acquireRead(id)).release();
    await knex!.raw(
      `UPDATE t_lock_log SET create_time = create_time - INTERVAL 2 DAY, released_at = released_at - INTERVAL 2 DAY
        WHERE resource_id = ?`,
      [Buffer.from(id)],
    );
  }

  async function lockRowOf(id: string): Promise<boolean> {
    const [rows] = (await knex!.raw('SELECT 1 FROM t_read_write_lock WHERE resource_id = ?', [
      Buffer.from(id),
    ])) as unknown as [unknown[]];
    return rows.length === 1;
  }

  it('the purge waits on no transaction in flight: a write and a read section, a group, a permit holder, a fence', async () => {
    const holders: Array<[string, (id: string) => Promise<{ ended: () => boolean; done: Promise<void> }>]> = [
      ['write-section', (id) => section(id, 'write')],
      ['read-section', (id) => section(id, 'read')],
      ['section-group', (id) => sectionGroup([id, `${id}-2`])],
      [
        'durable-group',
        (id) => heldInFlight((locks) => locks.acquireMany({ write: [id, `${id}-2`] }, { waitMs: 5_000 })),
      ],
      ['permit', (id) => heldInFlight((locks) => locks.acquirePermit(id, { permits: 2, waitMs: 5_000 }))],
      ['fence', (id) => heldInFlight((locks) => locks.acquireWrite(id, { waitMs: 5_000 }))],
    ];
    for (const [name, hold] of holders) {
      const id = `lwt-purge-${name}`;
      await oldReleasedGrant(id);
      const held = await hold(id);
      const purged = await purgeReleasedGrants(knex!, { retentionMs: DAY_MS });
      // Returned before the holder (held past the 1 s lock wait timeout) ended: it waited on nothing.
      expect(held.ended(), name).toBe(false);
      expect(purged.purged, name).toBeGreaterThanOrEqual(1);
      await held.done;
      expect(await invariantViolations(knex!), name).toEqual([]);
    }
    // What was skipped goes with a later purge, once nothing holds it.
    await oldReleasedGrant('lwt-purge-later');
    const later = await fenceInFlight('lwt-purge-later', 'write');
    await purgeReleasedGrants(knex!, { retentionMs: DAY_MS });
    expect(await lockRowOf('lwt-purge-later')).toBe(true);
    await later.done;
    await knex!.raw(
      `UPDATE t_lock_log SET create_time = create_time - INTERVAL 2 DAY, released_at = released_at - INTERVAL 2 DAY
        WHERE resource_id = ?`,
      [Buffer.from('lwt-purge-later')],
    );
    await purgeReleasedGrants(knex!, { retentionMs: DAY_MS });
    expect(await lockRowOf('lwt-purge-later')).toBe(false);
  });

  it('negative control: deleting the idle lock row without SKIP LOCKED meets the write section with 1205', async () => {
    await oldReleasedGrant('lwt-purge-control');
    const held = await section('lwt-purge-control', 'write');
    const err = await knex!
      .raw('DELETE FROM t_read_write_lock WHERE resource_id = ? AND w_count = 0 AND r_count = 0', [
        Buffer.from('lwt-purge-control'),
      ])
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(errnoOf(err)).toBe(1205);
    expect(held.ended()).toBe(false);
    await held.done;
  });

  it("negative control: migration 006's acquire meeting the same section fails with the server's 1205", async () => {
    await knex!.raw('DROP PROCEDURE IF EXISTS rwlock_acquire_v6');
    await knex!.raw(
      V6.rwlock_acquire!.replace('CREATE PROCEDURE rwlock_acquire(', 'CREATE PROCEDURE rwlock_acquire_v6('),
    );
    const held = await section('lwt-control', 'write');
    const err = await knex!
      .raw('CALL rwlock_acquire_v6(?, 0, CONVERT(? USING utf8mb4), ?, 0)', [
        Buffer.from('lwt-control'),
        Buffer.from('control'),
        Buffer.from('v6-lwt-control-t'),
      ])
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(errnoOf(err)).toBe(1205);
    expect(held.ended()).toBe(false);
    await held.done;
  });
});
