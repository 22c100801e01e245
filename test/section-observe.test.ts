// What an operator sees of one-commit sections: history gives a section its true span on the
// database clock (from its take to its commit), and while a section runs, list(), inspect() and
// stats() of another manager show it, read uncommitted (no privilege beyond SELECT); once it has
// committed or rolled back they no longer do, and nothing committed is ever left in progress.
// covers: src/sql/operate.ts, src/sql/inspect.ts, src/lock/sections/section-traces.ts
import { describe, expect, it } from 'vitest';
import type { Knex } from 'knex';
import { createLockManager } from '../src/index.js';
import { STATUS } from '../src/types.js';
import { useTestDatabase } from './support/db.js';
import { invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);

/** The database clock as epoch microseconds, read in `trx`. */
async function dbNowUs(trx: Knex.Transaction): Promise<number> {
  const [rows] = (await trx.raw(
    "SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)) AS us",
  )) as unknown as [Array<{ us: number | string }>];
  return Number(rows[0]!.us);
}

const ms = (us: number): number => Math.floor(us / 1000);

async function committedInProgress(): Promise<number> {
  const [rows] = (await db.knex.raw('SELECT COUNT(*) AS n FROM t_lock_log WHERE status = ?', [
    STATUS.sectionInProgress,
  ])) as unknown as [Array<{ n: number | string }>];
  return Number(rows[0]!.n);
}

describe('sections, as an operator sees them', () => {
  for (const group of [false, true])
    it(`history gives a ${group ? 'two-resource ' : ''}section its span from its take to its commit`, async () => {
      const locks = createLockManager({ knex: db.knex });
      const ids = group ? ['obs-span-a', 'obs-span-b'] : ['obs-span'];
      let began = 0;
      let ended = 0;
      const work = async (trx: Knex.Transaction): Promise<void> => {
        began = await dbNowUs(trx);
        // Work that lasts: the span must cover it, whatever the machine's speed.
        await trx.raw('SELECT SLEEP(0.05)');
        ended = await dbNowUs(trx);
      };
      if (group) await locks.withLocks({ write: [ids[0]!], read: [ids[1]!] }, work, { section: true });
      else await locks.withWriteLock(ids[0]!, work, { section: true });
      for (const id of ids) {
        const [g] = (await locks.history(id)).grants;
        expect(g!.releasedBy).toBe('section');
        expect(g!.createTime.getTime()).toBeLessThanOrEqual(ms(began));
        expect(g!.releasedAt!.getTime()).toBeGreaterThanOrEqual(ms(ended));
        expect(g!.heldMs).toBeGreaterThanOrEqual((ended - began) / 1000);
      }
      expect(await committedInProgress()).toBe(0);
    });

  it('a section in progress is seen by list(), inspect() and stats() of another manager, and gone after', async () => {
    const locks = createLockManager({ knex: db.knex, owner: 'obs-section' });
    const operator = createLockManager({ knex: db.connect(), owner: 'obs-operator' });
    const durable = await locks.acquireRead('obs-b');
    try {
      let seen: { listed: unknown; inspected: unknown; stats: unknown } | undefined;
      await locks.withLocks(
        { write: ['obs-a'], read: ['obs-b'] },
        async (_trx, grants) => {
          const [a, b] = grants;
          const listed = (await operator.list()).grants;
          const stats = await operator.stats();
          const inspected = await operator.inspect('obs-a');
          seen = { listed, inspected, stats };
          expect(listed).toEqual(
            expect.arrayContaining([
              expect.objectContaining({ id: a!.id, resourceId: 'obs-a', mode: 'write', section: true, stale: false }),
              expect.objectContaining({ id: b!.id, resourceId: 'obs-b', mode: 'read', section: true }),
              expect.objectContaining({ id: durable.id, resourceId: 'obs-b', mode: 'read', section: false }),
            ]),
          );
          expect(listed.map((g) => g.owner)).toEqual(['obs-section', 'obs-section', 'obs-section']);
          // Oldest first: the durable reader, then the section's rows in resource order.
          expect(listed.map((g) => g.id)).toEqual([durable.id, a!.id, b!.id]);
          expect(stats.sections).toMatchObject({ write: 1, read: 1 });
          expect(stats.sections.oldestAgeMs).toBeGreaterThanOrEqual(0);
          expect(stats.live).toEqual({ write: 0, read: 1, permit: 0 }); // a section changes no count
          expect(inspected.holders).toEqual([
            expect.objectContaining({ id: a!.id, mode: 'write', section: true, stale: false }),
          ]);
          // A page of one, then the next after it: a section's id is a cursor like any grant's.
          const first = await operator.list({ limit: 1 });
          expect(first.grants.map((g) => g.id)).toEqual([durable.id]);
          const second = await operator.list({ limit: 1, after: first.next! });
          expect(second.grants.map((g) => g.id)).toEqual([a!.id]);
          expect((await operator.list({ staleOnly: true })).grants).toEqual([]);
        },
        { section: true },
      );
      expect(seen).toBeDefined();
      expect((await operator.list()).grants.map((g) => g.id)).toEqual([durable.id]);
      expect((await operator.stats()).sections).toEqual({ write: 0, read: 0, oldestAgeMs: null });
      expect((await operator.inspect('obs-a')).holders).toEqual([]);
    } finally {
      await durable.release();
    }
    expect(await committedInProgress()).toBe(0);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('a section that rolls back leaves nothing in progress and no history', async () => {
    const locks = createLockManager({ knex: db.knex });
    const operator = createLockManager({ knex: db.connect() });
    await expect(
      locks.withWriteLock(
        'obs-rollback',
        async () => {
          expect((await operator.inspect('obs-rollback')).holders).toEqual([
            expect.objectContaining({ section: true }),
          ]);
          throw new Error('the work fails');
        },
        { section: true },
      ),
    ).rejects.toThrow('the work fails');
    expect((await operator.inspect('obs-rollback')).holders).toEqual([]);
    expect((await operator.history('obs-rollback')).grants).toEqual([]);
    expect(await committedInProgress()).toBe(0);
  });
});
