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
    await Promise.all([main, ...extra].map((k) => (k ? destroyBounded(k, name) : undefined)));
    await dropDatabase(url, name);
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

/**
 * knex's destroy waits for every connection the pool lent to come back. One that never does is a
 * leak to report, not a reason to hang the file's teardown for its whole hook timeout: after
 * DESTROY_BOUND_MS the pool's counts are printed and the teardown goes on (the database is dropped
 * all the same; a leaked connection holds no lock once its server thread is idle).
 */
const DESTROY_BOUND_MS = 15_000;
async function destroyBounded(k: Knex, database: string): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const bounded = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), DESTROY_BOUND_MS)));
  const outcome = await Promise.race([k.destroy().then(() => 'destroyed' as const), bounded]);
  clearTimeout(timer);
  if (outcome === 'late') {
    const pool = (
      k.client as { pool?: { numUsed(): number; numPendingAcquires(): number; numPendingCreates(): number } }
    ).pool;
    console.warn(
      `[db] ${database}: a knex pool did not close within ${DESTROY_BOUND_MS} ms: ` +
        `${pool?.numUsed()} connections still lent, ${pool?.numPendingAcquires()} acquires and ${pool?.numPendingCreates()} creates pending`,
    );
  }
}
