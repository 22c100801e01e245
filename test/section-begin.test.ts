// A one-commit section costs the round trips of the plain transaction it wraps: its take goes in
// place of knex's BEGIN (rwlock_section_begin, migration 012) and its end in place of the COMMIT
// (rwlock_section_commit). Counted as the commands the section's one connection sends, exact
// whatever the machine's load. Without migration 012 the BEGIN and the take go apart: one more.
import { describe, expect, it } from 'vitest';
import type { Knex } from 'knex';
import { createLockManager } from '../src/index.js';
import { useTestDatabase } from './support/db.js';

// The procedures themselves are under test: whatever the lane, this database has them.
const db = useTestDatabase(import.meta.filename, { procedures: true });

interface Counted {
  knex: Knex;
  /** The commands `op` sent on the pool's one connection. */
  commandsOf(op: () => Promise<unknown>): Promise<number>;
}

/** A knex of one pooled connection whose commands are counted. */
async function countedKnex(): Promise<Counted> {
  const knex = db.connect({ poolMax: 1 });
  const client = knex.client as {
    acquireConnection(): Promise<{ addCommand(cmd: unknown): unknown }>;
    releaseConnection(conn: unknown): Promise<void>;
  };
  const conn = await client.acquireConnection();
  await client.releaseConnection(conn);
  let commands = 0;
  const send = conn.addCommand.bind(conn);
  conn.addCommand = (cmd) => {
    commands++;
    return send(cmd);
  };
  return {
    knex,
    async commandsOf(op) {
      const before = commands;
      await op();
      return commands - before;
    },
  };
}

const WORK = 'UPDATE rt_probe SET n = n + 1 WHERE id = 1';

async function probe(): Promise<number> {
  const [rows] = (await db.knex.raw('SELECT n FROM rt_probe WHERE id = 1')) as unknown as [Array<{ n: number }>];
  return Number(rows[0]!.n);
}

describe('the round trips of a one-commit section', () => {
  it('a one-row section sends as many commands as the same plain transaction, and takes the lock', async () => {
    await db.knex.raw('CREATE TABLE IF NOT EXISTS rt_probe (id INT PRIMARY KEY, n INT NOT NULL) ENGINE=InnoDB');
    await db.knex.raw('INSERT IGNORE INTO rt_probe VALUES (1, 0)');
    const counted = await countedKnex();
    const locks = createLockManager({ knex: counted.knex });
    const other = createLockManager({ knex: db.knex });
    const section = (): Promise<unknown> =>
      locks.withWriteLock('rt-one', (trx) => trx.raw(WORK), { section: true, waitMs: 5_000 });
    // First use: the schema check, the server's kind, the resource's rows.
    await section();
    const plain = await counted.commandsOf(() => counted.knex.transaction((trx) => trx.raw(WORK)));
    let heldDuringWork: unknown = 'not asked';
    const sectionCommands = await counted.commandsOf(() =>
      locks.withWriteLock(
        'rt-one',
        async (trx) => {
          heldDuringWork = await other.tryAcquireWrite('rt-one');
          await trx.raw(WORK);
        },
        { section: true, waitMs: 5_000 },
      ),
    );
    expect(plain).toBe(3);
    expect(sectionCommands).toBe(plain);
    expect(heldDuringWork).toBeNull();
    expect(await probe()).toBe(3);
    const { grants } = await other.history('rt-one', { limit: 10 });
    expect(grants.map((g) => g.releasedBy)).toEqual(['section', 'section']);
  });

  // Told apart by what they do: a row another connection changes mid-transaction is seen changed at
  // READ COMMITTED and unchanged at REPEATABLE READ (the servers' default), the control.
  for (const [level, sees] of [
    ['read committed', 'the change'],
    [undefined, 'no change'],
  ] as const)
    it(`at ${level ?? 'the default level'}: the call begins the transaction at it (${sees} seen)`, async () => {
      await db.knex.raw('CREATE TABLE IF NOT EXISTS rt_level (id INT PRIMARY KEY, n INT NOT NULL) ENGINE=InnoDB');
      await db.knex.raw('INSERT IGNORE INTO rt_level VALUES (1, 0)');
      const read = async (k: Knex | Knex.Transaction): Promise<number> => {
        const [rows] = (await k.raw('SELECT n FROM rt_level WHERE id = 1')) as unknown as [Array<{ n: number }>];
        return Number(rows[0]!.n);
      };
      const locks = createLockManager({ knex: db.knex });
      const [before, after] = await locks.withWriteLock(
        'rt-level',
        async (trx) => {
          const first = await read(trx);
          await db.knex.raw('UPDATE rt_level SET n = n + 1 WHERE id = 1'); // another connection, autocommit
          return [first, await read(trx)];
        },
        { section: true, ...(level ? { isolationLevel: level } : {}) },
      );
      expect(after).toBe(level ? before + 1 : before);
    });

  it('negative control: without migration 012 the BEGIN and the take go apart, one command more', async () => {
    await db.knex.raw('DROP PROCEDURE IF EXISTS rwlock_section_begin');
    const counted = await countedKnex();
    const locks = createLockManager({ knex: counted.knex });
    const other = createLockManager({ knex: db.knex });
    const section = (): Promise<unknown> =>
      locks.withWriteLock('rt-apart', (trx) => trx.raw(WORK), { section: true, waitMs: 5_000 });
    await section(); // the first finds the procedure missing, and goes again apart
    const plain = await counted.commandsOf(() => counted.knex.transaction((trx) => trx.raw(WORK)));
    let heldDuringWork: unknown = 'not asked';
    const sectionCommands = await counted.commandsOf(() =>
      locks.withWriteLock(
        'rt-apart',
        async (trx) => {
          heldDuringWork = await other.tryAcquireWrite('rt-apart');
          await trx.raw(WORK);
        },
        { section: true, waitMs: 5_000 },
      ),
    );
    expect(sectionCommands).toBe(plain + 1);
    expect(heldDuringWork).toBeNull();
  });
});
