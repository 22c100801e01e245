// A server whose GLOBAL innodb_lock_wait_timeout is 1 s (a DBA's setting; a throwaway server of
// the lane's flavour, started with it): a durable acquire that meets a section, and a durable
// reader's fence committed while a reading section runs, never fail with the server's raw 1205.
// The acquire never waits on a lock (it is refused and tries again until its waitMs); a reading
// section never locks the lock row the fence writes. Negative control: migration 006's acquire,
// which waited on the lock row in InnoDB's queue, fails there with 1205 after 1 s.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Knex } from 'knex';
import { connectKnex, createDatabase } from '../harness/database.js';
import { chosenFlavour, findServer, type FoundServer } from '../harness/server.js';
import { migrate } from '../src/admin/index.js';
import { createLockManager } from '../src/index.js';
import { TEST_PROCEDURES } from './support/db.js';
import { PROCEDURES as V6 } from '../migrations/006_invoker_routines.js';
import { errnoOf } from '../src/sql/connection.js';

/** Each section holds the resource this long: well past the server's 1 s lock wait timeout. */
const SECTION_MS = 2_500;

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
