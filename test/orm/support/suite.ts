// The fence through an ORM: the same outcomes for every ORM, each with and without mysql2's
// CLIENT_FOUND_ROWS, and a check that docs/orms.md carries the recipe the test runs.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ConnectionLostError,
  createLockManager,
  InvalidOptionsError,
  isConflict,
  LockLostError,
  type FenceExecutor,
  type Grant,
} from '../../../src/index.js';
import type { TestDatabase } from '../../support/db.js';
import { proxyFor, type FaultProxy } from '../../support/proxy.js';
import { grantRow, invariantViolations } from '../../support/state.js';

const ROOT = join(import.meta.dirname, '..', '..', '..');
export const DOCS = join(ROOT, 'docs', 'orms.md');

/** The business tables every recipe writes: a loan's running total and one row per payment. */
export async function createBusinessTables(db: TestDatabase): Promise<void> {
  await db.knex.raw('CREATE TABLE loans (id VARCHAR(32) PRIMARY KEY, repaid_cents INT NOT NULL) ENGINE=InnoDB');
  // A payment must be positive: a recipe given a negative amount fails in its second statement,
  // after its first one changed a row, which is the business error whose rollback is tested.
  await db.knex.raw(`CREATE TABLE payments (id INT AUTO_INCREMENT PRIMARY KEY, loan_id VARCHAR(32) NOT NULL,
    amount_cents INT NOT NULL, CONSTRAINT payment_positive CHECK (amount_cents > 0)) ENGINE=InnoDB`);
  // signal_deadlock() gives the client what a deadlock gives it (1213, SQLSTATE 40001); unlike a
  // real deadlock it leaves the transaction open, and the ORM's rollback ends it. A procedure,
  // because MySQL does not prepare a bare SIGNAL, and some ORMs send prepared statements.
  await db.knex.raw(`CREATE PROCEDURE signal_deadlock() SIGNAL SQLSTATE '40001'
    SET MYSQL_ERRNO = 1213, MESSAGE_TEXT = 'Deadlock found when trying to get lock; try restarting transaction'`);
}

/** One ORM connected to the file's database, driven through its recipe. */
export interface OrmUnderTest {
  /** The recipe: a loan's payment and the fence through the ORM's adapter, in one ORM transaction (withWriteGrant's work). */
  repay(grant: Grant, loanId: string, amount: number): Promise<void>;
  /**
   * Opens an ORM transaction the way the recipe does and calls `body` with the ORM's adapter (from
   * mysql-rwlock/adapters) on it; the transaction commits if `body` resolves and rolls back if it
   * rejects, and the promise settles as `body` did.
   */
  inTransaction(body: (execute: FenceExecutor) => Promise<void>): Promise<void>;
  /** Hands the ORM's adapter the client instead of a transaction, where the adapter refuses it. */
  adaptClient?(): unknown;
  close(): Promise<void>;
}

export interface SuiteOptions {
  /** The ORM's name in test titles. */
  name: string;
  db: TestDatabase;
  /** Files whose recipe, between the marker lines, must appear verbatim in docs/orms.md: the test file and any schema. */
  recipes: string[];
  /** Packages whose installed versions docs/orms.md must name as tested, e.g. ['typeorm', 'mysql2']. */
  packages: string[];
  /**
   * Connects the ORM with mysql2's CLIENT_FOUND_ROWS on (affected = matched rows) or off (= changed
   * rows), to the server at `url` (the test database's server when undefined; a fault proxy's).
   */
  connect(options: { foundRows: boolean; url?: string }): Promise<OrmUnderTest>;
}

export const RECIPE_BEGIN = '// docs/orms.md recipe: begin';
export const RECIPE_END = '// docs/orms.md recipe: end';

/** The recipe blocks of a source file: the lines strictly between each pair of marker lines. */
export function recipesOf(file: string): string[] {
  const lines = readFileSync(file, 'utf8').split('\n');
  const blocks: string[] = [];
  for (let begin = lines.indexOf(RECIPE_BEGIN); begin >= 0; begin = lines.indexOf(RECIPE_BEGIN, begin + 1)) {
    const end = lines.indexOf(RECIPE_END, begin);
    if (end <= begin + 1) throw new Error(`${file}: "${RECIPE_BEGIN}" without a recipe and "${RECIPE_END}" after it`);
    blocks.push(lines.slice(begin + 1, end).join('\n'));
  }
  if (blocks.length === 0) throw new Error(`${file}: no recipe between "${RECIPE_BEGIN}" and "${RECIPE_END}"`);
  return blocks;
}

/** The version of `pkg` installed at the top of node_modules, where the tests import it from. */
export function installedVersion(pkg: string): string {
  return (JSON.parse(readFileSync(join(ROOT, 'node_modules', pkg, 'package.json'), 'utf8')) as { version: string })
    .version;
}

/** Wraps an executor to record what it resolved to. */
function recording(execute: FenceExecutor, seen: unknown[]): FenceExecutor {
  return async (sql, params) => {
    const n = await execute(sql, params);
    seen.push(n);
    return n;
  };
}

class Rollback extends Error {}

/** An error's message and those of its causes. */
function messages(err: unknown): string {
  const out: string[] = [];
  for (let e = err; e instanceof Error && out.length < 5; e = e.cause) out.push(e.message);
  return out.join(' <- ');
}

async function repaid(db: TestDatabase, loanId: string): Promise<{ repaid: number | undefined; payments: number }> {
  const [loans] = (await db.knex.raw('SELECT repaid_cents AS repaid FROM loans WHERE id = ?', [loanId])) as unknown as [
    Array<{ repaid: number }>,
  ];
  const [payments] = (await db.knex.raw('SELECT COUNT(*) AS n FROM payments WHERE loan_id = ?', [
    loanId,
  ])) as unknown as [Array<{ n: number }>];
  return { repaid: loans[0]?.repaid, payments: Number(payments[0]?.n) };
}

/** withWriteGrant's work: one payment and the fence, through the ORM's adapter, in one ORM transaction. */
function pay(orm: OrmUnderTest, loanId: string, amount: number): (grant: Grant) => Promise<void> {
  return (grant) =>
    orm.inTransaction(async (execute) => {
      await execute('INSERT INTO payments (loan_id, amount_cents) VALUES (?, ?)', [loanId, amount]);
      await grant.fence(execute);
    });
}

export function fenceSuite(options: SuiteOptions): void {
  const { db, name } = options;

  beforeAll(async () => {
    await createBusinessTables(db);
  });

  it(`docs/orms.md carries the ${name} recipe verbatim and the versions tested`, () => {
    const docs = readFileSync(DOCS, 'utf8');
    for (const file of options.recipes) {
      for (const recipe of recipesOf(file))
        expect(docs, `a recipe in ${file} differs from docs/orms.md`).toContain(recipe);
    }
    for (const pkg of options.packages) {
      expect(docs, `docs/orms.md should say which ${pkg} was tested`).toContain(`\`${pkg}@${installedVersion(pkg)}\``);
    }
  });

  describe.each([
    { flags: 'CLIENT_FOUND_ROWS', foundRows: true },
    { flags: 'no CLIENT_FOUND_ROWS', foundRows: false },
  ])(`grant.fence through ${name}, $flags`, ({ foundRows }) => {
    const p = foundRows ? 'fr' : 'nf';
    let orm: OrmUnderTest;

    beforeAll(async () => {
      orm = await options.connect({ foundRows });
    });

    afterAll(async () => {
      await orm?.close();
    });

    it('the connection has the flag it was given: a no-op UPDATE counts 1 matched row or 0 changed rows', async () => {
      await db.knex.raw('INSERT INTO loans (id, repaid_cents) VALUES (?, 0)', [`${p}-probe`]);
      const seen: number[] = [];
      const probe = 'UPDATE loans SET repaid_cents = repaid_cents WHERE id = ?';
      await orm.inTransaction(async (execute) => {
        seen.push(await execute(probe, [`${p}-probe`]));
      });
      expect(seen).toEqual([foundRows ? 1 : 0]);
    });

    it('the recipe under withWriteGrant commits when the grant is live, and that commit released the grant', async () => {
      const locks = createLockManager({ knex: db.knex });
      let held: Grant | undefined;
      await locks.withWriteGrant(`${p}-live`, (g) => orm.repay((held = g), `${p}-live`, 100));
      const grant = held!;
      expect(await repaid(db, `${p}-live`)).toEqual({ repaid: 100, payments: 1 });
      expect(await grantRow(db.knex, grant.id)).toMatchObject({ status: 2, released_by: 1 });
      expect(grant.settled).toBe(true);
      expect(await grant.release()).toBe(false);
      expect(await locks.tryAcquireWrite(`${p}-live`)).not.toBeNull();
      expect(await invariantViolations(db.knex)).toEqual([]);
    });

    it('the recipe: LockLostError and a rollback when the grant was force-released before the commit', async () => {
      const locks = createLockManager({ knex: db.knex });
      let held: Grant | undefined;
      const err = await locks
        .withWriteGrant(`${p}-lost`, async (g) => {
          expect(await locks.forceRelease((held = g).id)).toBe(true);
          await orm.repay(g, `${p}-lost`, 100);
        })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      const grant = held!;
      expect(err).toBeInstanceOf(LockLostError);
      expect(grant.signal.aborted).toBe(true);
      // Both business statements ran before the fence; the ORM's rollback undid them.
      expect(await repaid(db, `${p}-lost`)).toEqual({ repaid: undefined, payments: 0 });
      expect(await grantRow(db.knex, grant.id)).toMatchObject({ status: 2, released_by: 3 });
      expect(await invariantViolations(db.knex)).toEqual([]);
    });

    it('the recipe: a business error rolls back, the grant is released and the lock is free again', async () => {
      const locks = createLockManager({ knex: db.knex });
      let held: Grant | undefined;
      const err = await locks
        .withWriteGrant(`${p}-error`, (g) => orm.repay((held = g), `${p}-error`, -5))
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      const grant = held!;
      expect(err).toBeInstanceOf(Error);
      expect(err).not.toBeInstanceOf(LockLostError);
      // The server's refusal, perhaps wrapped by the ORM (Drizzle keeps it as the cause).
      expect(messages(err)).toMatch(/payment_positive|check constraint/i);
      expect(await repaid(db, `${p}-error`)).toEqual({ repaid: undefined, payments: 0 });
      expect(await grantRow(db.knex, grant.id)).toMatchObject({ status: 2, released_by: 1 });
      expect(grant.settled).toBe(true);
      expect(await locks.tryAcquireWrite(`${p}-error`)).not.toBeNull();
      expect(await invariantViolations(db.knex)).toEqual([]);
    });

    it('the executor runs on the ORM transaction: it resolves to 2, and a rollback after it leaves the grant live', async () => {
      const locks = createLockManager({ knex: db.knex });
      const grant = await locks.acquireRead(`${p}-inside`);
      const seen: unknown[] = [];
      const rollback = new Rollback('roll back after the fence');
      const err = await orm
        .inTransaction(async (execute) => {
          await grant.fence(recording(execute, seen));
          throw rollback;
        })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toBe(rollback);
      expect(seen).toEqual([2]);
      // Had the fence run on another connection (autocommit), the grant would be released now.
      expect(await grantRow(db.knex, grant.id)).toMatchObject({ status: 0 });
      expect(await grant.release()).toBe(true);
      expect(await invariantViolations(db.knex)).toEqual([]);
    });

    it('a conflict the server reports in the transaction reaches the caller where isConflict() finds it', async () => {
      const err = await orm
        .inTransaction(async (execute) => {
          await execute('CALL signal_deadlock()', []);
        })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toBeDefined();
      // Also where the ORM wrapped the server's error (Drizzle, Sequelize, Prisma): isConflict() looks inside.
      expect(isConflict(err)).toBe(true);
    });

    it('withWriteGrant and the adapter: the payment and the release commit together', async () => {
      const locks = createLockManager({ knex: db.knex });
      let held: Grant | undefined;
      await locks.withWriteGrant(`${p}-g-live`, (grant) => {
        held = grant;
        return pay(orm, `${p}-g-live`, 7)(grant);
      });
      expect((await repaid(db, `${p}-g-live`)).payments).toBe(1);
      expect(await grantRow(db.knex, held!.id)).toMatchObject({ status: 2, released_by: 1 });
      expect(held!.settled).toBe(true);
      expect(await locks.tryAcquireWrite(`${p}-g-live`)).not.toBeNull();
      expect(await invariantViolations(db.knex)).toEqual([]);
    });

    it('withWriteGrant: LockLostError and nothing written when the grant was force-released before the fence', async () => {
      const locks = createLockManager({ knex: db.knex });
      let held: Grant | undefined;
      const err = await locks
        .withWriteGrant(`${p}-g-lost`, async (grant) => {
          held = grant;
          expect(await locks.forceRelease(grant.id)).toBe(true);
          await pay(orm, `${p}-g-lost`, 7)(grant);
        })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(LockLostError);
      expect((await repaid(db, `${p}-g-lost`)).payments).toBe(0);
      expect(await grantRow(db.knex, held!.id)).toMatchObject({ status: 2, released_by: 3 });
      expect(await invariantViolations(db.knex)).toEqual([]);
    });

    it('withWriteGrant: a business error rolls back and the grant is released', async () => {
      const locks = createLockManager({ knex: db.knex });
      let held: Grant | undefined;
      const err = await locks
        .withWriteGrant(`${p}-g-error`, async (grant) => {
          held = grant;
          await orm.inTransaction(async (execute) => {
            await execute('INSERT INTO payments (loan_id, amount_cents) VALUES (?, ?)', [`${p}-g-error`, 7]);
            await execute('INSERT INTO payments (loan_id, amount_cents) VALUES (?, ?)', [`${p}-g-error`, -7]);
            await grant.fence(execute);
          });
        })
        .catch((e: unknown) => e);
      expect(messages(err)).toMatch(/payment_positive|check constraint/i);
      expect((await repaid(db, `${p}-g-error`)).payments).toBe(0);
      expect(await grantRow(db.knex, held!.id)).toMatchObject({ status: 2, released_by: 1 });
      expect(await locks.tryAcquireWrite(`${p}-g-error`)).not.toBeNull();
      expect(await invariantViolations(db.knex)).toEqual([]);
    });

    it('withWriteGrant verifies the commit: a fence whose transaction rolled back leaves the grant live, then released', async () => {
      const locks = createLockManager({ knex: db.knex });
      let held: Grant | undefined;
      const rollback = new Rollback('roll back after the fence');
      await locks.withWriteGrant(`${p}-g-undone`, async (grant) => {
        held = grant;
        const err = await orm
          .inTransaction(async (execute) => {
            await grant.fence(execute);
            throw rollback;
          })
          .catch((e: unknown) => e);
        expect(err).toBe(rollback);
        // What a withWriteGrant that assumed the commit would leave behind, until the reaper.
        expect(await grantRow(db.knex, grant.id)).toMatchObject({ status: 0 });
      });
      expect(await grantRow(db.knex, held!.id)).toMatchObject({ status: 2, released_by: 1 });
      expect(held!.settled).toBe(true);
      expect(await locks.tryAcquireWrite(`${p}-g-undone`)).not.toBeNull();
      expect(await invariantViolations(db.knex)).toEqual([]);
    });

    it('the adapter refuses the client (not a transaction) with InvalidOptionsError, before anything is written', () => {
      if (orm.adaptClient === undefined) return;
      expect(() => orm.adaptClient!()).toThrow(InvalidOptionsError);
    });

    it('the executor resolves to 0 when the grant is lost', async () => {
      const locks = createLockManager({ knex: db.knex });
      const grant = await locks.acquireRead(`${p}-gone`);
      await locks.forceRelease(grant.id);
      const seen: unknown[] = [];
      const err = await orm
        .inTransaction((execute) => grant.fence(recording(execute, seen)))
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(LockLostError);
      expect(seen).toEqual([0]);
      expect(await grantRow(db.knex, grant.id)).toMatchObject({ status: 2, released_by: 3 });
      expect(await invariantViolations(db.knex)).toEqual([]);
    });
  });

  describe(`withWriteGrant through ${name}: a COMMIT whose reply is lost is settled from the grant row`, () => {
    let proxy: FaultProxy;
    let orm: OrmUnderTest;

    beforeAll(async () => {
      const front = await proxyFor(db.url);
      proxy = front.proxy;
      orm = await options.connect({ foundRows: true, url: front.url.toString() });
    });

    afterAll(async () => {
      await orm?.close().catch(() => undefined);
      await proxy?.closeWhenClientsLeft();
    });

    it('the server committed, its reply was lost: resolves undefined, the payment written once, the grant released by it', async () => {
      const locks = createLockManager({ knex: db.knex, resolveTimeoutMs: 10_000 });
      let held: Grant | undefined;
      let cut: Promise<string> | undefined;
      const value = await locks.withWriteGrant('cut-reply', (grant) => {
        held = grant;
        cut = proxy.armOnce(/^\s*COMMIT/i, 'before-reply');
        return pay(orm, 'cut-reply', 7)(grant).then(() => 'paid');
      });
      expect(await cut).toMatch(/COMMIT/i);
      expect(value).toBeUndefined();
      expect((await repaid(db, 'cut-reply')).payments).toBe(1);
      expect(await grantRow(db.knex, held!.id)).toMatchObject({ status: 2, released_by: 1 });
      expect(held!.settled).toBe(true);
      expect(await invariantViolations(db.knex)).toEqual([]);
    });

    it('the COMMIT never reached the server: ConnectionLostError, nothing written, the grant released', async () => {
      const locks = createLockManager({ knex: db.knex, resolveTimeoutMs: 10_000 });
      let held: Grant | undefined;
      const err = await locks
        .withWriteGrant('cut-commit', (grant) => {
          held = grant;
          void proxy.armOnce(/^\s*COMMIT/i, 'before-forward');
          return pay(orm, 'cut-commit', 7)(grant);
        })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConnectionLostError);
      expect((await repaid(db, 'cut-commit')).payments).toBe(0);
      expect(await grantRow(db.knex, held!.id)).toMatchObject({ status: 2, released_by: 1 });
      expect(await invariantViolations(db.knex)).toEqual([]);
    });
  });
}
