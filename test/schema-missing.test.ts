// Using the lock before migrate() says so, with a typed error, instead of a raw driver error.
// covers: src/errors.ts, src/error-base.ts, src/errors-setup.ts, src/sql/schema-version.ts
import { describe, expect, it } from 'vitest';
import { createLockManager, SchemaMissingError } from '../src/index.js';
import { reapStaleGrants } from '../src/admin/index.js';
import { useTestDatabase } from './support/db.js';

const db = useTestDatabase(import.meta.filename, { migrate: false });

describe('before migrate()', () => {
  it('acquire, inspect and the reaper throw SchemaMissingError naming the fix', async () => {
    const locks = createLockManager({ knex: db.knex });
    for (const call of [() => locks.tryAcquireWrite('x'), () => locks.inspect('x'), () => reapStaleGrants(db.knex)]) {
      const err = await call().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(SchemaMissingError);
      expect((err as SchemaMissingError).code).toBe('ERR_RWLOCK_SCHEMA_MISSING');
      expect((err as Error).message).toMatch(/run migrate\(db\)/);
    }
  });
});
