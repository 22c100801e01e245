// checkLockCounts and repairLockCounts: counts that disagree with the log (made by hand here, as
// an operator's edit or a partial restore would), what each kind does to the lock, and a repair
// racing an acquire, with a repair that counts before it locks as the negative control.
// covers: src/admin/count-check.ts, src/sql/recount.ts
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { describe, expect, it } from 'vitest';
import { withConnection, type RawConnection } from '../src/sql/connection.js';
import { createLockManager, InvalidOptionsError, LIMITS, type Grant } from '../src/index.js';
import { checkLockCounts, repairLockCounts, type CountDisagreement } from '../src/admin/index.js';
import { findDisagreements, recountResource } from '../src/sql/recount.js';
import { connectKnex } from '../harness/database.js';
import { useTestDatabase } from './support/db.js';
import { lockWaitCount } from './support/lock-waits.js';
import { afterCount, countThenLock } from './support/recount.js';
import { invariantViolations, snapshot } from './support/state.js';

const db = useTestDatabase(import.meta.filename);

async function setCounts(resource: string, w: number, r: number): Promise<void> {
  await db.knex.raw('UPDATE t_read_write_lock SET w_count = ?, r_count = ? WHERE resource_id = ?', [
    w,
    r,
    Buffer.from(resource),
  ]);
}

async function releaseAll(): Promise<void> {
  const locks = createLockManager({ knex: db.knex, owner: 'cleanup' });
  for (const g of (await locks.list({ limit: 10_000 })).grants)
    await locks.forceRelease(g.id, { reason: 'test cleanup' });
}

/**
 * The three kinds of disagreement, made by hand under `prefix`: `stuck`, a write count with no grant
 * (blocked for good); `under`, two live readers counted as one; `missing`, a live write grant whose
 * resource row was deleted. Returns the grants left live.
 */
async function makeDisagreements(prefix: string): Promise<{ readers: Grant[]; orphan: Grant }> {
  const locks = createLockManager({ knex: db.knex });
  await (await locks.tryAcquireWrite(`${prefix}:stuck`))!.release();
  await setCounts(`${prefix}:stuck`, 1, 0);
  const readers = [(await locks.tryAcquireRead(`${prefix}:under`))!, (await locks.tryAcquireRead(`${prefix}:under`))!];
  await setCounts(`${prefix}:under`, 0, 1);
  const orphan = (await locks.tryAcquireWrite(`${prefix}:missing`))!;
  await db.knex.raw('DELETE FROM t_read_write_lock WHERE resource_id = ?', [Buffer.from(`${prefix}:missing`)]);
  return { readers, orphan };
}

const found = (
  resourceId: string,
  wCount: number,
  rCount: number,
  liveWrites: number,
  liveReads: number,
  rowMissing = false,
): CountDisagreement => ({ resourceId, wCount, rCount, liveWrites, liveReads, rowMissing });

describe('checkLockCounts()', () => {
  it('finds nothing while the counts follow the log, whatever is held', async () => {
    const locks = createLockManager({ knex: db.knex });
    const w = (await locks.tryAcquireWrite('agree:w'))!;
    const r1 = (await locks.tryAcquireRead('agree:r'))!;
    const r2 = (await locks.tryAcquireRead('agree:r'))!;
    await (await locks.tryAcquireWrite('agree:released'))!.release();
    const w2 = (await locks.tryAcquireWrite('agree:downgraded'))!;
    await w2.downgrade();
    expect(await checkLockCounts(db.knex)).toEqual({ disagreements: [], more: false });
    for (const g of [w, r1, r2, w2]) await g.release();
    expect(await checkLockCounts(db.knex)).toEqual({ disagreements: [], more: false });
  });

  it('finds every kind of disagreement, by resource id, and changes nothing', async () => {
    await releaseAll();
    const locks = createLockManager({ knex: db.knex });
    const { readers, orphan } = await makeDisagreements('kind');
    const before = await snapshot(db.knex);

    const check = await checkLockCounts(db.knex);
    expect(check).toEqual({
      disagreements: [
        found('kind:missing', 0, 0, 1, 0, true),
        found('kind:stuck', 1, 0, 0, 0),
        found('kind:under', 0, 1, 0, 2),
      ],
      more: false,
    });
    expect(await checkLockCounts(db.knex, { limit: 2 })).toEqual({
      disagreements: check.disagreements.slice(0, 2),
      more: true,
    });
    expect(await snapshot(db.knex)).toBe(before);

    // what each does to the lock, before any repair
    expect(await locks.tryAcquireWrite('kind:stuck')).toBeNull();
    await readers[0]!.release();
    const intruder = await locks.tryAcquireWrite('kind:under'); // granted beside the reader still holding
    expect(intruder).not.toBeNull();
    await intruder!.release();
    await readers[1]!.release().catch(() => undefined); // its count is already gone: refused
    await orphan.release().catch(() => undefined);
    await db.knex.raw('DELETE FROM t_lock_log WHERE resource_id LIKE ?', ['kind:%']);
    await db.knex.raw('DELETE FROM t_read_write_lock WHERE resource_id LIKE ?', ['kind:%']);
  });

  it('reads the resource table a page at a time, and finds the same whatever the page size', async () => {
    await releaseAll();
    await makeDisagreements('page');
    const locks = createLockManager({ knex: db.knex });
    for (const id of ['page:a', 'page:n', 'page:t', 'page:z']) await (await locks.tryAcquireWrite(id))!.release(); // agreeing, in between
    const find = (limit: number, pageRows?: number) =>
      withConnection(db.knex, (conn) => findDisagreements(conn, limit, pageRows));
    const whole = await find(1000);
    expect(whole.map((d) => d.found.resourceId)).toEqual(['page:missing', 'page:stuck', 'page:under']);
    for (const pageRows of [1, 2, 3, 7]) {
      expect(await find(1000, pageRows), `pages of ${pageRows}`).toEqual(whole);
      for (const limit of [1, 2])
        expect(await find(limit, pageRows), `pages of ${pageRows}, limit ${limit}`).toEqual(whole.slice(0, limit + 1));
    }
    await db.knex.raw('DELETE FROM t_lock_log WHERE resource_id LIKE ?', ['page:%']);
    await db.knex.raw('DELETE FROM t_read_write_lock WHERE resource_id LIKE ?', ['page:%']);
  });

  it('refuses a bad limit, unknown options or a db that is not knex, with nothing changed', async () => {
    await (await createLockManager({ knex: db.knex }).tryAcquireRead('bad:stuck'))!.release();
    await setCounts('bad:stuck', 1, 0);
    const before = await snapshot(db.knex);
    await expect(checkLockCounts(db.knex, { limit: 0 })).rejects.toBeInstanceOf(InvalidOptionsError);
    await expect(checkLockCounts(db.knex, { limit: LIMITS.maxPageSize + 1 })).rejects.toBeInstanceOf(
      InvalidOptionsError,
    );
    await expect(repairLockCounts(db.knex, { limit: 1.5 })).rejects.toBeInstanceOf(InvalidOptionsError);
    await expect(repairLockCounts(db.knex, { batch: 3 } as never)).rejects.toBeInstanceOf(InvalidOptionsError);
    await expect(checkLockCounts({} as Knex)).rejects.toBeInstanceOf(InvalidOptionsError);
    await expect(repairLockCounts({} as Knex)).rejects.toBeInstanceOf(InvalidOptionsError);
    expect(await snapshot(db.knex)).toBe(before);
    await setCounts('bad:stuck', 0, 0);
  });
});

describe('repairLockCounts()', () => {
  it('sets counts from the log, so a blocked resource grants again and a counted reader keeps writers out', async () => {
    await releaseAll();
    const locks = createLockManager({ knex: db.knex });
    const { readers, orphan } = await makeDisagreements('fix');
    // two live writers: what a missing row let in
    const first = (await locks.tryAcquireWrite('fix:two-writers'))!;
    await db.knex.raw('DELETE FROM t_read_write_lock WHERE resource_id = ?', [Buffer.from('fix:two-writers')]);
    const second = (await locks.tryAcquireWrite('fix:two-writers'))!;
    expect(second).not.toBeNull();

    const repair = await repairLockCounts(db.knex);
    expect(repair).toMatchObject({
      repaired: [
        found('fix:missing', 0, 0, 1, 0, true),
        found('fix:stuck', 1, 0, 0, 0),
        found('fix:under', 0, 1, 0, 2),
      ],
      conflicting: [found('fix:two-writers', 1, 0, 2, 0)],
      skipped: [],
      problems: [],
      more: false,
    });
    expect(await checkLockCounts(db.knex)).toEqual({
      disagreements: [found('fix:two-writers', 1, 0, 2, 0)],
      more: false,
    });

    const stuck = await locks.tryAcquireWrite('fix:stuck');
    expect(stuck).not.toBeNull();
    await stuck!.release();
    await readers[0]!.release();
    expect(await locks.tryAcquireWrite('fix:under')).toBeNull(); // the other reader still holds it
    await readers[1]!.release();
    expect(await locks.tryAcquireWrite('fix:missing')).toBeNull();
    expect(await orphan.release()).toBe(true);

    // the conflicting pair waits for an operator: force one out, then the counts can follow the log
    expect(await locks.forceRelease(first.id, { reason: 'two writers after a lost row' })).toBe(true);
    expect((await repairLockCounts(db.knex)).repaired).toEqual([found('fix:two-writers', 0, 0, 1, 0)]);
    await expect(first.release()).resolves.toBe(false);
    expect(await second.release()).toBe(true);
    expect(await invariantViolations(db.knex)).toEqual([]);
    expect(await repairLockCounts(db.knex)).toMatchObject({
      repaired: [],
      conflicting: [],
      skipped: [],
      problems: [],
      more: false,
    });
  });

  /**
   * A connection that, right after the repair has counted the live grants, has a reader try to
   * acquire the resource, and goes on once the reader is granted or, if `mayWait`, once some
   * transaction waits for a row lock. The negative control, where nothing holds the row, waits for
   * the grant alone: the reader is granted in between or the control shows nothing.
   */
  function readerArrivesAfterCount(
    conn: RawConnection,
    reader: () => Promise<Grant | null>,
    arrived: Array<Grant | null>,
    mayWait: boolean,
  ): RawConnection {
    return afterCount(conn, async () => {
      let settled = false;
      const granted = reader()
        .then((g) => void arrived.push(g))
        .finally(() => (settled = true));
      if (!mayWait) return granted;
      const blocked = (async () => {
        while (!settled && (await lockWaitCount(db.knex)) === 0) await new Promise((r) => setTimeout(r, 5));
      })();
      await Promise.race([granted, blocked]);
    });
  }

  it.each([
    ['locks the resource row, then counts: the reader waits and is counted', false],
    ['negative control: counts, then locks: the reader granted in between is lost from the count', true],
  ])('a reader acquiring during a repair: %s', async (_name, broken) => {
    const id = `race:${broken ? 'broken' : 'locked'}`;
    const resource = Buffer.from(id);
    const locks = createLockManager({ knex: db.knex });
    await (await locks.tryAcquireRead(id))!.release();
    await setCounts(id, 0, 5); // five readers counted, none live
    const arrived: Array<Grant | null> = [];
    await withConnection(db.knex, async (conn) => {
      const racing = readerArrivesAfterCount(conn, () => locks.tryAcquireRead(id), arrived, !broken);
      if (broken) await countThenLock(racing, resource);
      else expect((await recountResource(racing, resource)).kind).toBe('repaired');
    });
    await expect.poll(() => arrived.length).toBe(1);
    const reader = arrived[0]!;
    expect(reader).not.toBeNull();
    const check = await checkLockCounts(db.knex);
    const writer = await locks.tryAcquireWrite(id);
    if (broken) {
      expect(check.disagreements).toEqual([found(id, 0, 0, 0, 1)]);
      expect(writer).not.toBeNull(); // a writer beside the live reader
      await writer!.release();
      await setCounts(id, 0, 1); // so that the reader's release can give its count back
      expect(await reader.release()).toBe(true);
    } else {
      expect(check.disagreements).toEqual([]);
      expect(writer).toBeNull();
      expect(await reader.release()).toBe(true);
    }
    expect(await checkLockCounts(db.knex)).toEqual({ disagreements: [], more: false });
  });
});

describe('privileges', () => {
  it('the check needs SELECT on both tables, the repair also INSERT and UPDATE on t_read_write_lock, as documented; a refused resource stops no other', async () => {
    await releaseAll();
    const { readers, orphan } = await makeDisagreements('grants');
    const suffix = randomBytes(3).toString('hex');
    const password = randomBytes(9).toString('hex');
    const users = { checker: `rwl_chk_${suffix}`, reaper: `rwl_rea_${suffix}`, repairer: `rwl_rep_${suffix}` };
    const grants = {
      checker: [
        `GRANT SELECT ON \`${db.name}\`.t_lock_log TO '${users.checker}'@'%'`,
        `GRANT SELECT ON \`${db.name}\`.t_read_write_lock TO '${users.checker}'@'%'`,
      ],
      // the reaper's documented privileges: no INSERT on t_read_write_lock
      reaper: [
        `GRANT SELECT, UPDATE, DELETE ON \`${db.name}\`.t_lock_log TO '${users.reaper}'@'%'`,
        `GRANT SELECT, UPDATE ON \`${db.name}\`.t_read_write_lock TO '${users.reaper}'@'%'`,
      ],
      repairer: [
        `GRANT SELECT ON \`${db.name}\`.t_lock_log TO '${users.repairer}'@'%'`,
        `GRANT SELECT, INSERT, UPDATE ON \`${db.name}\`.t_read_write_lock TO '${users.repairer}'@'%'`,
      ],
    };
    const connections: Knex[] = [];
    try {
      for (const who of ['checker', 'reaper', 'repairer'] as const) {
        await db.knex.raw(`CREATE USER '${users[who]}'@'%' IDENTIFIED BY '${password}'`);
        for (const g of grants[who]) await db.knex.raw(g);
      }
      const as = (user: string): Knex => {
        const url = new URL(db.url);
        url.username = user;
        url.password = password;
        const k = connectKnex(url.toString(), db.name, { poolMax: 2 });
        connections.push(k);
        return k;
      };
      const checker = as(users.checker);
      const repairer = as(users.repairer);
      expect((await checkLockCounts(checker)).disagreements.map((d) => d.resourceId)).toEqual([
        'grants:missing',
        'grants:stuck',
        'grants:under',
      ]);
      const refused = await repairLockCounts(checker); // no UPDATE: each resource refused, none changed
      expect(refused).toMatchObject({ repaired: [], conflicting: [], skipped: [] });
      expect(refused.problems).toEqual([
        expect.stringMatching(/^grants:missing: /),
        expect.stringMatching(/^grants:stuck: /),
        expect.stringMatching(/^grants:under: /),
      ]);
      // no INSERT: the missing row is refused, and the other resources are still repaired after it
      const partly = await repairLockCounts(as(users.reaper));
      expect(partly.repaired.map((d) => d.resourceId)).toEqual(['grants:stuck', 'grants:under']);
      expect(partly.problems).toEqual([expect.stringMatching(/^grants:missing: .*INSERT/i)]);
      expect((await repairLockCounts(repairer)).repaired.map((d) => d.resourceId)).toEqual(['grants:missing']);
      expect(await checkLockCounts(checker)).toEqual({ disagreements: [], more: false });
      for (const g of [orphan, ...readers]) expect(await g.release()).toBe(true);
    } finally {
      await Promise.all(connections.map((k) => k.destroy()));
      for (const user of Object.values(users)) await db.knex.raw(`DROP USER IF EXISTS '${user}'@'%'`);
    }
  });
});
