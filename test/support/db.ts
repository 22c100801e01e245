// A database of its own for one test file, migrated, dropped afterwards.
import { randomBytes } from 'node:crypto';
import { basename } from 'node:path';
import type { Knex } from 'knex';
import { afterAll, beforeAll, inject } from 'vitest';
import { connectKnex, createDatabase, dropDatabase, type KnexSettings } from '../../harness/database.js';
import { migrate } from '../../src/index.js';

export interface TestDatabase {
  readonly url: string;
  readonly name: string;
  /** The file's knex instance (mysql2 default flags). */
  readonly knex: Knex;
  /** Another knex on the same database; closed after the file. */
  connect(settings?: KnexSettings): Knex;
}

export function serverUrl(): string {
  return inject('mysqlUrl');
}

export function useTestDatabase(file: string, options: { migrate?: boolean } = {}): TestDatabase {
  const name = `rwl_${basename(file).replace(/\.test\.ts$/, '').replace(/[^A-Za-z0-9]/g, '_').slice(0, 40)}_${randomBytes(3).toString('hex')}`;
  const extra: Knex[] = [];
  let main: Knex | undefined;
  const url = serverUrl();
  beforeAll(async () => {
    await createDatabase(url, name);
    main = connectKnex(url, name, { poolMax: 20 });
    if (options.migrate !== false) await migrate(main);
  });
  afterAll(async () => {
    await Promise.all([main, ...extra].map((k) => k?.destroy()));
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
