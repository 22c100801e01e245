// A database of its own for one test file, migrated, dropped afterwards.
import { randomBytes } from 'node:crypto';
import { basename } from 'node:path';
import type { Knex } from 'knex';
import { afterAll, beforeAll, inject } from 'vitest';
import { connectKnex, createDatabase, dropDatabase, type KnexSettings } from '../../harness/database.js';
import { migrate } from '../../src/admin/index.js';

export interface TestDatabase {
  readonly url: string;
  readonly name: string;
  /** The file's knex instance (mysql2 default flags). */
  readonly knex: Knex;
  /** Another knex on the same database; closed after the file. */
  connect(settings?: KnexSettings): Knex;
}

/**
 * RWLOCK_TEST_PROCEDURES=off migrates every test database without stored procedures, so the whole
 * suite runs the plain-statement acquire ('auto' managers find no procedure).
 */
export const TEST_PROCEDURES = process.env.RWLOCK_TEST_PROCEDURES !== 'off';

/**
 * What carries the COMMIT of `withWriteLock`'s (or `withReadLock`'s) transaction: the fence and the
 * COMMIT in one call where procedures are (migration 015), knex's own COMMIT after the fence without.
 */
export const FENCED_COMMIT = TEST_PROCEDURES ? /^CALL rwlock_fence_commit\(/ : /^COMMIT/i;

export function serverUrl(): string {
  return inject('mysqlUrl');
}

/** `procedures` overrides the lane's choice, for tests of the procedure itself. */
export function useTestDatabase(file: string, options: { migrate?: boolean; procedures?: boolean } = {}): TestDatabase {
  const name = `rwl_${basename(file)
    .replace(/\.test\.ts$/, '')
    .replace(/[^A-Za-z0-9]/g, '_')
    .slice(0, 40)}_${randomBytes(3).toString('hex')}`;
  const extra: Knex[] = [];
  let main: Knex | undefined;
  const url = serverUrl();
  beforeAll(async () => {
    await createDatabase(url, name);
    main = connectKnex(url, name, { poolMax: 20 });
    if (options.migrate !== false) await migrate(main, { procedures: options.procedures ?? TEST_PROCEDURES });
  });
  afterAll(async () => {
    const pools = [main, ...extra].filter((k): k is Knex => k !== undefined);
    const leaks = (await Promise.all(pools.map((k) => lentAfterUse(k)))).filter((l) => l !== null);
    await Promise.all(pools.map((k) => destroyBounded(k, name)));
    await dropDatabase(url, name);
    // A connection still lent once every test of the file has ended was taken by a call that never
    // gave it back: a leak, which in an application exhausts the pool. Fail the file.
    if (leaks.length > 0) throw new Error(`[db] ${name}: connection leak: ${leaks.join('; ')}`);
  });
  return {
    url,
    name,
    get knex(): Knex {
      if (!main) throw new Error('database not ready: use it inside tests or hooks');
      return main;
    },
    connect(settings?: KnexSettings): Knex {
      const k = connectKnex(url, name, settings);
      extra.push(k);
      return k;
    },
  };
}

interface PoolCounts {
  numUsed(): number;
  numPendingAcquires(): number;
  numPendingCreates(): number;
}

function poolOf(k: Knex): PoolCounts | undefined {
  return (k.client as { pool?: PoolCounts }).pool;
}

/**
 * Null once no connection of `k`'s pool is lent, else what is still lent after LENT_BOUND_MS. The
 * file's tests have all ended: what a call hands back in its own finally is back within a few
 * event-loop turns, and a test's timers (a holder released after its hold) within a few seconds.
 */
const LENT_BOUND_MS = 10_000;
async function lentAfterUse(k: Knex): Promise<string | null> {
  const pool = poolOf(k);
  if (!pool) return null;
  const until = performance.now() + LENT_BOUND_MS;
  while (pool.numUsed() > 0 && performance.now() < until) await new Promise((r) => setTimeout(r, 50));
  const used = pool.numUsed();
  return used === 0 ? null : `${used} pool connection(s) still lent ${LENT_BOUND_MS} ms after the file's last test`;
}

/**
 * knex's destroy waits for every connection the pool lent to come back. One that never does is a
 * leak, which fails the file (lentAfterUse), not a reason to hang its teardown for the whole hook
 * timeout: after DESTROY_BOUND_MS the pool's counts are printed and the teardown goes on (the
 * database is dropped all the same; a leaked connection holds no lock once its server thread is idle).
 */
const DESTROY_BOUND_MS = 15_000;
async function destroyBounded(k: Knex, database: string): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const bounded = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), DESTROY_BOUND_MS)));
  const outcome = await Promise.race([k.destroy().then(() => 'destroyed' as const), bounded]);
  clearTimeout(timer);
  if (outcome === 'late') {
    const pool = poolOf(k);
    console.warn(
      `[db] ${database}: a knex pool did not close within ${DESTROY_BOUND_MS} ms: ` +
        `${pool?.numUsed()} connections still lent, ${pool?.numPendingAcquires()} acquires and ${pool?.numPendingCreates()} creates pending`,
    );
  }
}
