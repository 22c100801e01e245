// A fenced withWriteLock/withReadLock sends its fence and its COMMIT as one call
// (rwlock_fence_commit, migration 015) in the place of knex's COMMIT: one round trip fewer than the
// fence and the COMMIT apart, and the same outcome. A fence that finds the grant no longer live
// rolls the business writes back, as the fence sent before the COMMIT does. Counted as the commands
// the transaction's one connection sends, exact whatever the machine's load.
// covers: src/lock/fence/fence-in-commit.ts, src/lock/fence/fenced.ts, src/sql/fence-commit.ts, src/sql/routines-fence.ts
import { beforeAll, describe, expect, it } from 'vitest';
import { createLockManager, LockLostError } from '../src/index.js';
import { CURRENT_ROUTINES } from '../src/sql/routines.js';
import { useTestDatabase } from './support/db.js';
import { calls, countedKnex } from './support/commands.js';
import { grantRow, invariantViolations } from './support/state.js';

// The procedure itself is under test: whatever the lane, this database has the routines.
const db = useTestDatabase(import.meta.filename, { procedures: true });
const counted = () => countedKnex((o) => db.connect(o));

beforeAll(async () => {
  await db.knex.raw('CREATE TABLE ledger (id INT AUTO_INCREMENT PRIMARY KEY, tag VARCHAR(32)) ENGINE=InnoDB');
});

async function ledger(k: { raw: typeof db.knex.raw }, tag: string): Promise<number> {
  const [rows] = (await k.raw('SELECT COUNT(*) AS n FROM ledger WHERE tag = ?', [tag])) as unknown as [
    Array<{ n: number }>,
  ];
  return Number(rows[0]!.n);
}

const write = (tag: string) => 'INSERT INTO ledger (tag) VALUES (' + `'${tag}'` + ')';

/** Replaces rwlock_fence_commit by `ddl` for the length of `run`, then puts the current one back. */
async function withRoutine(ddl: string | null, run: () => Promise<void>): Promise<void> {
  await db.knex.raw('DROP PROCEDURE IF EXISTS rwlock_fence_commit');
  try {
    if (ddl !== null) await db.knex.raw(ddl);
    await run();
  } finally {
    await db.knex.raw('DROP PROCEDURE IF EXISTS rwlock_fence_commit');
    await db.knex.raw(CURRENT_ROUTINES.rwlock_fence_commit!);
  }
}

describe('the fence and the COMMIT in one call', () => {
  it('withWriteLock sends the acquire, then the plain transaction with the call in its COMMIT: one command more than the transaction', async () => {
    const c = await counted();
    const locks = createLockManager({ knex: c.knex });
    await locks.withWriteLock('fc-rt', (trx) => trx.raw(write('fc-rt'))); // first use: the schema check, the rows
    const plain = await c.commandsOf(() => c.knex.transaction((trx) => trx.raw(write('fc-plain'))));
    let id = 0;
    const sql = await c.sqlOf(() =>
      locks.withWriteLock('fc-rt', async (trx, grant) => {
        id = grant.id;
        await trx.raw(write('fc-rt'));
      }),
    );
    expect(plain).toBe(3);
    expect(sql).toHaveLength(plain + 1);
    expect(calls(sql)).toEqual(['rwlock_acquire', 'rwlock_fence_commit']);
    expect(sql).not.toContain('COMMIT;');
    expect(await ledger(db.knex, 'fc-rt')).toBe(2);
    expect(await grantRow(db.knex, id)).toMatchObject({ status: 2, released_by: 1 });
    expect(await invariantViolations(db.knex)).toEqual([]);
    await c.knex.destroy();
  });

  it('withReadLock too', async () => {
    const c = await counted();
    const locks = createLockManager({ knex: c.knex });
    const read = await c.sqlOf(() => locks.withReadLock('fc-read', (trx) => trx.raw(write('fc-read'))));
    expect(calls(read)).toEqual(['rwlock_acquire', 'rwlock_fence_commit']);
    expect(await ledger(db.knex, 'fc-read')).toBe(1);
    expect((await locks.inspect('fc-read')).live.read).toBe(0);
    await c.knex.destroy();
  });

  it('a grant released by someone else during the work: LockLostError, the writes rolled back, the connection out of the transaction', async () => {
    const c = await counted();
    const locks = createLockManager({ knex: c.knex });
    const operator = createLockManager({ knex: db.knex });
    await locks.withWriteLock('fc-lost', (trx) => trx.raw(write('fc-lost-warm'))); // first use
    const { sql, error } = await c.sqlOfFailing(() =>
      locks.withWriteLock('fc-lost', async (trx, grant) => {
        await trx.raw(write('fc-lost'));
        expect(await operator.forceRelease(grant.id)).toBe(true);
      }),
    );
    expect(error).toBeInstanceOf(LockLostError);
    // The call's refusal says the grant was not live: no look-up of the grant row follows it.
    expect(sql.slice(-2)).toEqual([expect.stringMatching(/^CALL rwlock_fence_commit\(/), 'ROLLBACK']);
    // The same (only) connection: a transaction left open would still see its own row.
    expect(await ledger(c.knex, 'fc-lost')).toBe(0);
    expect(await ledger(db.knex, 'fc-lost')).toBe(0);
    expect((await locks.inspect('fc-lost')).live.write).toBe(0);
    expect(await invariantViolations(db.knex)).toEqual([]);
    await c.knex.destroy();
  });

  it('negative control: a routine that commits what its fence refused keeps the lost holder’s writes', async () => {
    const current = CURRENT_ROUTINES.rwlock_fence_commit!;
    const broken = current.replace('    ROLLBACK;\n    SET v_message', '    COMMIT;\n    SET v_message');
    expect(broken).not.toBe(current);
    await withRoutine(broken, async () => {
      const locks = createLockManager({ knex: db.knex });
      const err = await locks
        .withWriteLock('fc-broken', async (trx, grant) => {
          await trx.raw(write('fc-broken'));
          await locks.forceRelease(grant.id);
        })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(LockLostError);
      expect(await ledger(db.knex, 'fc-broken')).toBe(1); // what the routine's ROLLBACK prevents
    });
  });

  it('without migration 015 the fence and the COMMIT go apart, from the first call that found it missing on', async () => {
    await withRoutine(null, async () => {
      const c = await counted();
      const locks = createLockManager({ knex: c.knex });
      const first = await c.sqlOf(() => locks.withWriteLock('fc-apart', (trx) => trx.raw(write('fc-apart'))));
      expect(calls(first)).toEqual(['rwlock_acquire', 'rwlock_fence_commit']); // missing: 1305, nothing ran
      expect(first.slice(-2)).toEqual([expect.stringMatching(/^UPDATE t_lock_log l JOIN/), 'COMMIT']);
      const next = await c.sqlOf(() => locks.withWriteLock('fc-apart', (trx) => trx.raw(write('fc-apart'))));
      expect(calls(next)).toEqual(['rwlock_acquire']);
      expect(next).toHaveLength(5);
      expect(await ledger(db.knex, 'fc-apart')).toBe(2);
      // A fence apart that finds the grant released by someone else rolls back as well.
      const err = await locks
        .withWriteLock('fc-apart', async (trx, grant) => {
          await trx.raw(write('fc-apart-lost'));
          await createLockManager({ knex: db.knex }).forceRelease(grant.id);
        })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(LockLostError);
      expect(await ledger(c.knex, 'fc-apart-lost')).toBe(0);
      expect(await invariantViolations(db.knex)).toEqual([]);
      await c.knex.destroy();
    });
  });

  it('a manager without procedures fences apart', async () => {
    const c = await counted();
    const locks = createLockManager({ knex: c.knex, procedures: false });
    await locks.withWriteLock('fc-none', (trx) => trx.raw(write('fc-none')));
    const sql = await c.sqlOf(() => locks.withWriteLock('fc-none', (trx) => trx.raw(write('fc-none'))));
    expect(calls(sql)).toEqual([]);
    expect(sql).toContain('COMMIT;');
    expect(await ledger(db.knex, 'fc-none')).toBe(2);
    await c.knex.destroy();
  });
});
