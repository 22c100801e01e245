// Property 5 (docs/guarantees.md): 1213 is retried; 1205 is rolled back and never committed; a connection lost during
// COMMIT, or an error COMMIT replied, is settled from the grant row (or surfaces as
// LockOutcomeUnknownError) — never a silent double grant or a leaked count.
// covers: src/sql/retry.ts, src/sql/lookup.ts, src/sql/withdraw.ts, src/lock/fence/fenced.ts, src/lock/durable/grant.ts, src/sql/unreachable.ts
import type { Knex } from 'knex';
import { beforeAll, describe, expect, it } from 'vitest';
import { connectKnex } from '../harness/database.js';
import { isConflict } from '../src/sql/connection.js';
import { fromKnex } from '../src/adapters/index.js';
import { proxyFor, useProxiedKnex } from './support/proxy.js';
import {
  ConnectionLostError,
  createLockManager,
  LockLostError,
  DatabaseUnreachableError,
  LockOutcomeUnknownError,
  TransactionConflictError,
  type Grant,
} from '../src/index.js';
import { FENCED_COMMIT, TEST_PROCEDURES, useTestDatabase } from './support/db.js';
import { lockWaitCount } from './support/lock-waits.js';
import { grantRow, invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);
const via = useProxiedKnex(db);

beforeAll(async () => {
  await db.knex.raw('CREATE TABLE acct (id INT PRIMARY KEY, balance INT NOT NULL) ENGINE=InnoDB');
  await db.knex.raw('INSERT INTO acct VALUES (1, 0), (2, 0), (3, 0), (4, 0)');
  await db.knex.raw(
    'CREATE TABLE ledger (id INT AUTO_INCREMENT PRIMARY KEY, tag VARCHAR(32), grant_id BIGINT) ENGINE=InnoDB',
  );
});

async function ledgerCount(tag: string): Promise<number> {
  const [rows] = (await db.knex.raw('SELECT COUNT(*) AS n FROM ledger WHERE tag = ?', [tag])) as unknown as [
    Array<{ n: number }>,
  ];
  return Number(rows[0]!.n);
}

/** Makes `trx` the victim of a real deadlock with `other` (1213 on its last statement). */
async function loseDeadlock(trx: Knex.Transaction, other: Knex.Transaction): Promise<void> {
  await trx.raw('UPDATE acct SET balance = balance + 1 WHERE id = 1');
  // The other transaction takes row 2, then wants row 1; this one then wants row 2: a cycle.
  // The other has written more rows, so InnoDB rolls this one back (1213).
  // One row per statement: on a 4-row table an IN list is a full scan that would lock row 1 too.
  for (const id of [2, 3, 4]) await other.raw('UPDATE acct SET balance = balance + 1 WHERE id = ?', [id]);
  // .then() sends it: a knex query runs only when consumed.
  const blocked = other.raw('UPDATE acct SET balance = balance + 1 WHERE id = 1').then(() => undefined);
  await expect.poll(() => lockWaitCount(db.knex), { timeout: 20_000 }).toBeGreaterThan(0);
  try {
    await trx.raw('UPDATE acct SET balance = balance + 1 WHERE id = 2');
  } finally {
    await blocked;
    await other.commit();
  }
}

describe('deadlock (1213)', () => {
  it('a business transaction chosen as deadlock victim is retried under the same grant and commits once', async () => {
    const locks = createLockManager({ knex: db.knex });
    let attempts = 0;
    const grantIds = new Set<number>();
    const other = await db.knex.transaction();
    const result = await locks
      .withWriteLock('dl', async (trx, grant) => {
        attempts += 1;
        grantIds.add(grant.id);
        await trx.raw('INSERT INTO ledger (tag, grant_id) VALUES (?, ?)', ['dl', grant.id]);
        if (attempts === 1) await loseDeadlock(trx, other);
        return 'ok';
      })
      .finally(() => (other.isCompleted() ? undefined : other.rollback()));
    expect(result).toBe('ok');
    expect(attempts).toBe(2);
    expect(grantIds.size).toBe(1);
    expect(await ledgerCount('dl')).toBe(1);
    expect((await locks.inspect('dl')).holders).toEqual([]);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('is not run again when its grant was released meanwhile: LockLostError, nothing committed', async () => {
    const locks = createLockManager({ knex: db.knex });
    let attempts = 0;
    const other = await db.knex.transaction();
    const err = await locks
      .withWriteLock('dl-lost', async (trx, grant) => {
        attempts += 1;
        await trx.raw('INSERT INTO ledger (tag, grant_id) VALUES (?, ?)', ['dl-lost', grant.id]);
        expect(await locks.forceRelease(grant.id)).toBe(true);
        await loseDeadlock(trx, other);
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      )
      .finally(() => (other.isCompleted() ? undefined : other.rollback()));
    expect(err).toBeInstanceOf(LockLostError);
    expect(attempts).toBe(1);
    expect(await ledgerCount('dl-lost')).toBe(0);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });
});

describe('deadlock after a mode change', () => {
  for (const [outer, change] of [
    ['withWriteLock', 'downgrade'],
    ['withReadLock', 'tryUpgrade'],
  ] as const) {
    it(`${outer} whose grant ran ${change}() is not run again under the other mode: TransactionConflictError, nothing committed, the grant released`, async () => {
      const locks = createLockManager({ knex: db.knex });
      const resource = `dl-${change}`;
      let attempts = 0;
      const other = await db.knex.transaction();
      const work = async (trx: Knex.Transaction, grant: Grant): Promise<void> => {
        attempts += 1;
        if (change === 'downgrade') await grant.downgrade();
        else expect(await grant.tryUpgrade()).toBe(grant);
        await trx.raw('INSERT INTO ledger (tag, grant_id) VALUES (?, ?)', [resource, grant.id]);
        await loseDeadlock(trx, other);
      };
      const run = outer === 'withWriteLock' ? locks.withWriteLock(resource, work) : locks.withReadLock(resource, work);
      const err = await run
        .then(
          () => undefined,
          (e: unknown) => e,
        )
        .finally(() => (other.isCompleted() ? undefined : other.rollback()));
      expect(err).toBeInstanceOf(TransactionConflictError);
      expect((err as Error).message).toMatch(/changed mode/);
      expect(attempts).toBe(1);
      expect(await ledgerCount(resource)).toBe(0);
      expect((await locks.inspect(resource)).holders).toEqual([]);
      expect(await invariantViolations(db.knex)).toEqual([]);
    });
  }
});

describe('lock wait timeout (1205)', () => {
  async function timedOutBusiness(
    run: (work: (trx: Knex.Transaction) => Promise<void>) => Promise<unknown>,
  ): Promise<unknown> {
    const holder = await db.knex.transaction();
    await holder.raw('SELECT * FROM acct WHERE id = 4 FOR UPDATE');
    try {
      return await run(async (trx) => {
        await trx.raw('SET SESSION innodb_lock_wait_timeout = 1');
        await trx.raw('INSERT INTO ledger (tag) VALUES (?)', ['lw']);
        await trx.raw('UPDATE acct SET balance = balance + 1 WHERE id = 4'); // waits, then 1205
      }).then(
        () => undefined,
        (e: unknown) => e,
      );
    } finally {
      await holder.rollback();
    }
  }

  it('the business transaction is rolled back, the error surfaces, the grant is released', async () => {
    const locks = createLockManager({ knex: db.knex });
    const err = await timedOutBusiness((work) => locks.withWriteLock('lw', (trx) => work(trx)));
    expect((err as { errno?: number }).errno).toBe(1205);
    expect(await ledgerCount('lw')).toBe(0);
    expect((await locks.inspect('lw')).holders).toEqual([]);
  });

  it('negative control: committing after 1205 (it rolls back only the statement) keeps the partial work', async () => {
    await timedOutBusiness(async (work) => {
      const trx = await db.knex.transaction();
      await work(trx).catch(() => undefined);
      await trx.commit();
    });
    expect(await ledgerCount('lw')).toBe(1); // the check above would have caught this
    await db.knex.raw("DELETE FROM ledger WHERE tag = 'lw'");
  });
});

describe('connection lost during COMMIT', () => {
  it('reply lost after the server committed: the outcome is looked up and reported as committed, once', async () => {
    const locks = createLockManager({ knex: via.knex, resolveTimeoutMs: 10_000 });
    let id = 0;
    let cut: Promise<string> | undefined;
    const value = await locks.withWriteLock('cl-1', async (trx, grant) => {
      // Armed once the lock is held, so it is the business COMMIT that is cut (the plain-statement
      // acquire commits too).
      cut = via.proxy.armOnce(FENCED_COMMIT, 'before-reply');
      id = grant.id;
      await trx.raw('INSERT INTO ledger (tag, grant_id) VALUES (?, ?)', ['cl-1', grant.id]);
      return 'paid';
    });
    expect(await cut).toMatch(FENCED_COMMIT);
    expect(value).toBe('paid');
    expect(await ledgerCount('cl-1')).toBe(1);
    expect(await grantRow(db.knex, id)).toMatchObject({ status: 2, released_by: 1 });
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('COMMIT never reached the server: ConnectionLostError, nothing committed, the grant is released', async () => {
    const locks = createLockManager({ knex: via.knex, resolveTimeoutMs: 10_000 });
    let id = 0;
    const err = await locks
      .withWriteLock('cl-2', async (trx, grant) => {
        void via.proxy.armOnce(FENCED_COMMIT, 'before-forward');
        id = grant.id;
        await trx.raw('INSERT INTO ledger (tag, grant_id) VALUES (?, ?)', ['cl-2', grant.id]);
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectionLostError);
    expect(await ledgerCount('cl-2')).toBe(0);
    expect(await grantRow(db.knex, id)).toMatchObject({ status: 2, released_by: 1 });
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('acquire reply lost: the grant is found by its token, so it is neither doubled nor leaked', async () => {
    const locks = createLockManager({ knex: via.knex, resolveTimeoutMs: 10_000 });
    // The reply that carries the acquire's outcome: the CALL's, or the plain statements' COMMIT's.
    const cut = via.proxy.armOnce(TEST_PROCEDURES ? /CALL rwlock_acquire/ : /^COMMIT/i, 'before-reply');
    const g = await locks.tryAcquireWrite('cl-3');
    await cut;
    expect(g).not.toBeNull();
    const state = await locks.inspect('cl-3');
    expect(state.live.write).toBe(1);
    expect(state.holders.map((h) => h.id)).toEqual([g!.id]);
    expect(await g!.release()).toBe(true);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('release reply lost: the release is confirmed by reading the row back', async () => {
    const locks = createLockManager({ knex: via.knex, resolveTimeoutMs: 10_000 });
    const g = await locks.tryAcquireRead('cl-4');
    const cut = via.proxy.armOnce(/^UPDATE t_lock_log l JOIN/, 'before-reply');
    expect(await g!.release()).toBe(true);
    expect(await cut).toMatch(/^UPDATE t_lock_log/);
    expect((await locks.inspect('cl-4')).live.read).toBe(0);
  });

  it('downgrade and upgrade replies lost: the grant row says the change was made, and the release gives back the right count', async () => {
    const locks = createLockManager({ knex: via.knex, resolveTimeoutMs: 10_000 });
    const g = (await locks.tryAcquireWrite('cl-mode'))!;
    const down = via.proxy.armOnce(/SET l\.lock_type/, 'before-reply');
    await g.downgrade();
    expect(await down).toMatch(/^UPDATE t_lock_log l JOIN/);
    expect(g.mode).toBe('read');
    expect(await locks.inspect('cl-mode')).toMatchObject({ live: { write: 0, read: 1 } });
    const up = via.proxy.armOnce(/SET l\.lock_type/, 'before-reply');
    expect(await g.tryUpgrade()).toBe(g);
    await up;
    expect(g.mode).toBe('write');
    expect(await g.release()).toBe(true);
    expect(await locks.inspect('cl-mode')).toMatchObject({ live: { write: 0, read: 0 } });
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('when the outcome cannot be learned in time, LockOutcomeUnknownError carries the token', async () => {
    const locks = createLockManager({ knex: via.knex, resolveTimeoutMs: 0 });
    let grantId = 0;
    const pending = locks
      .withWriteLock('cl-5', async (trx, grant) => {
        // The COMMIT's reply is lost, and so is the reply of the statement that would settle it.
        void via.proxy
          .armOnce(FENCED_COMMIT, 'before-reply')
          .then(() => via.proxy.armOnce(/^UPDATE t_lock_log l JOIN/, 'before-forward'));
        grantId = grant.id;
        await trx.raw('INSERT INTO ledger (tag, grant_id) VALUES (?, ?)', ['cl-5', grant.id]);
      })
      .catch((e: unknown) => e);
    const err = await pending;
    expect(err).toBeInstanceOf(LockOutcomeUnknownError);
    expect((err as LockOutcomeUnknownError).code).toBe('ERR_RWLOCK_OUTCOME_UNKNOWN');
    expect((err as LockOutcomeUnknownError).grantId).toBe(grantId);
    expect((err as LockOutcomeUnknownError).token).toMatch(/^[0-9a-f]{32}$/);
  });

  it('negative control: blindly retrying a business transaction whose COMMIT reply was lost applies it twice', async () => {
    const cut = via.proxy.armOnce(/^COMMIT/i, 'before-reply');
    const pay = (): Promise<void> =>
      via.knex.transaction(async (trx) => {
        await trx.raw('INSERT INTO ledger (tag) VALUES (?)', ['cl-6']);
      });
    await pay().catch(() => pay()); // "retry on connection error"
    await cut;
    expect(await ledgerCount('cl-6')).toBe(2); // what looking the grant up prevents
  });
});

describe('an error replied to COMMIT', () => {
  // Errors a Group Replication member replies to COMMIT: a certification failure, and a failure of
  // its commit hook. A member that leaves the group while its commit is being certified cannot know
  // the outcome, and the rest of the group may apply it. The proxy forwards the COMMIT (or a
  // ROLLBACK in its place) and hands the client the error instead of the server's reply.
  const CERTIFICATION_FAILED = {
    errno: 3101,
    sqlState: '40000',
    message: 'Plugin instructed the server to rollback the current transaction.',
  };
  const HOOK_FAILED = {
    errno: 3100,
    sqlState: 'HY000',
    message: "Error on observer while running replication hook 'before_commit'.",
  };

  it.each([
    ['a conflict (3101)', CERTIFICATION_FAILED],
    ['another error (3100)', HOOK_FAILED],
  ] as const)(
    '%s for a COMMIT the server made: settled from the grant row and reported as committed; the work ran once',
    async (_, error) => {
      const tag = `cc-ok-${error.errno}`;
      const locks = createLockManager({ knex: via.knex, resolveTimeoutMs: 10_000 });
      let id = 0;
      let runs = 0;
      let replaced: Promise<string> | undefined;
      const value = await locks.withWriteLock(tag, async (trx, grant) => {
        runs++;
        replaced ??= via.proxy.armErrorReply(FENCED_COMMIT, error);
        id = grant.id;
        await trx.raw('INSERT INTO ledger (tag, grant_id) VALUES (?, ?)', [tag, grant.id]);
        return 'paid';
      });
      expect(await replaced).toMatch(FENCED_COMMIT);
      expect(value).toBe('paid');
      expect(runs).toBe(1);
      expect(await ledgerCount(tag)).toBe(1);
      expect(await grantRow(db.knex, id)).toMatchObject({ status: 2, released_by: 1 });
      expect(await invariantViolations(db.knex)).toEqual([]);
    },
  );

  it('a conflict for a COMMIT the server rolled back: run again under the same grant and committed once', async () => {
    const locks = createLockManager({ knex: via.knex, resolveTimeoutMs: 10_000 });
    const grants = new Set<number>();
    let runs = 0;
    let replaced: Promise<string> | undefined;
    const value = await locks.withWriteLock('cc-retry', async (trx, grant) => {
      runs++;
      replaced ??= via.proxy.armErrorReply(FENCED_COMMIT, CERTIFICATION_FAILED, 'ROLLBACK');
      grants.add(grant.id);
      await trx.raw('INSERT INTO ledger (tag, grant_id) VALUES (?, ?)', ['cc-retry', grant.id]);
      return 'paid';
    });
    expect(await replaced).toMatch(FENCED_COMMIT);
    expect(value).toBe('paid');
    expect(runs).toBe(2);
    expect(grants.size).toBe(1);
    expect(await ledgerCount('cc-retry')).toBe(1);
    expect(await grantRow(db.knex, [...grants][0]!)).toMatchObject({ status: 2, released_by: 1 });
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('another error for a COMMIT the server rolled back: the error reaches the caller, nothing committed, the grant released', async () => {
    const locks = createLockManager({ knex: via.knex, resolveTimeoutMs: 10_000 });
    let id = 0;
    let runs = 0;
    const err = await locks
      .withWriteLock('cc-fail', async (trx, grant) => {
        runs++;
        void via.proxy.armErrorReply(FENCED_COMMIT, HOOK_FAILED, 'ROLLBACK');
        id = grant.id;
        await trx.raw('INSERT INTO ledger (tag, grant_id) VALUES (?, ?)', ['cc-fail', grant.id]);
      })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ errno: 3100 });
    expect(runs).toBe(1);
    expect(await ledgerCount('cc-fail')).toBe(0);
    expect(await grantRow(db.knex, id)).toMatchObject({ status: 2, released_by: 1 });
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('your own transaction: grant.isLive() tells a COMMIT that replied an error but committed (false) from one that rolled back (true)', async () => {
    const locks = createLockManager({ knex: via.knex, resolveTimeoutMs: 10_000 });
    const pay = (grant: Grant, tag: string): Promise<unknown> =>
      via.knex
        .transaction(async (trx) => {
          await trx.raw('INSERT INTO ledger (tag, grant_id) VALUES (?, ?)', [tag, grant.id]);
          await grant.fence(fromKnex(trx));
        })
        .then(
          () => null,
          (err: unknown) => err,
        );

    const committed = await locks.acquireWrite('cc-own-1');
    void via.proxy.armErrorReply(/^COMMIT/i, CERTIFICATION_FAILED);
    expect(isConflict(await pay(committed, 'cc-own-1'))).toBe(true);
    expect(await committed.isLive()).toBe(false);
    expect(committed.signal.aborted).toBe(false); // ended by its own commit: do not run it again
    expect(await ledgerCount('cc-own-1')).toBe(1);

    const rolledBack = await locks.acquireWrite('cc-own-2');
    void via.proxy.armErrorReply(/^COMMIT/i, CERTIFICATION_FAILED, 'ROLLBACK');
    expect(isConflict(await pay(rolledBack, 'cc-own-2'))).toBe(true);
    expect(await rolledBack.isLive()).toBe(true); // nothing committed: run it again under the same grant
    expect(await pay(rolledBack, 'cc-own-2')).toBeNull();
    rolledBack.committed();
    expect(await ledgerCount('cc-own-2')).toBe(1);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  // Nothing was sent, so nothing is unknown: DatabaseUnreachableError at once (docs/api.md, rule 4), never
  // LockOutcomeUnknownError, which is for a reply truly lost.
  it('isLive() when the database cannot be reached: DatabaseUnreachableError, not LockOutcomeUnknownError', async () => {
    const { proxy: own, url } = await proxyFor(db.url);
    const knex = connectKnex(url.toString(), db.name, { poolMax: 2 });
    try {
      const locks = createLockManager({ knex, resolveTimeoutMs: 300 });
      const grant = await locks.acquireWrite('cc-unreachable');
      await own.close(); // every connection cut, and no new one accepted
      const err = await grant.isLive().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(DatabaseUnreachableError);
      expect(err).not.toBeInstanceOf(LockOutcomeUnknownError);
      expect(await createLockManager({ knex: db.knex }).forceRelease(grant.id)).toBe(true);
    } finally {
      await knex.destroy();
    }
  });

  it('negative control: running a transaction again on the conflict its COMMIT replied applies it twice', async () => {
    const replaced = via.proxy.armErrorReply(/^COMMIT/i, CERTIFICATION_FAILED);
    const pay = (): Promise<void> =>
      via.knex.transaction(async (trx) => {
        await trx.raw('INSERT INTO ledger (tag) VALUES (?)', ['cc-twice']);
      });
    await pay().catch((err: unknown) => (isConflict(err) ? pay() : Promise.reject(err))); // "retry on a conflict"
    await replaced;
    expect(await ledgerCount('cc-twice')).toBe(2); // what reading the grant row prevents
  });
});

describe('connection killed inside the business transaction', () => {
  it("ConnectionLostError carrying the driver error that killed it (not knex's failed ROLLBACK), nothing commits, the lock is free", async () => {
    const locks = createLockManager({ knex: db.knex });
    const err = await locks
      .withWriteLock('killed', async (trx, grant) => {
        await trx.raw('INSERT INTO ledger (tag, grant_id) VALUES (?, ?)', ['killed', grant.id]);
        const [[{ id }]] = (await trx.raw('SELECT CONNECTION_ID() AS id')) as unknown as [[{ id: number }]];
        await db.knex.raw('KILL CONNECTION ?', [id]);
        await trx.raw('SELECT 1');
      })
      .catch((e: unknown) => e);
    // The statement that met the dead connection failed with a fatal driver error, which knex's
    // failed ROLLBACK ("ROLLBACK - Can't add new command ...") must not replace.
    expect(err).toBeInstanceOf(ConnectionLostError);
    expect((err as ConnectionLostError).code).toBe('ERR_RWLOCK_CONNECTION_LOST');
    expect((err as Error).cause).toMatchObject({ fatal: true });
    expect(((err as Error).cause as Error).message).not.toMatch(/^ROLLBACK/);
    expect(await ledgerCount('killed')).toBe(0);
    expect((await locks.inspect('killed')).holders).toEqual([]);
  });
});
