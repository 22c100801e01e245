// Options checked when a manager is made: a typed error naming the option, before anything could
// reach a database. The knex instance is real and never connects (it has no connection settings).
// Bad options of the calls that do reach one are in test/validation.test.ts, which checks that
// nothing changed.
// covers: src/options/resolve.ts, src/options/validators.ts, src/options/keys.ts
import knexFactory from 'knex';
import { afterAll, describe, expect, it } from 'vitest';
import { createLockManager, InvalidOptionsError } from '../../src/index.js';

const knex = knexFactory({ client: 'mysql2' });
afterAll(() => knex.destroy());

describe('createLockManager options', () => {
  it('createLockManager validates once, naming the option', () => {
    const bad: Array<[unknown, RegExp]> = [
      [undefined, /knex instance/],
      [{}, /^knex must be a knex instance/],
      [{ knex: knex, staleAfterMs: 0 }, /^staleAfterMs must be an integer from 1/],
      [{ knex: knex, owner: '' }, /^owner must be well-formed text of 1 to 255 characters/],
      [{ knex: knex, owner: 'o'.repeat(256) }, /^owner/],
      [{ knex: knex, backoffMinMs: 50, backoffMaxMs: 10 }, /^backoffMinMs \(50\) must not exceed backoffMaxMs/],
      [{ knex: knex, writerIntentMs: -5 }, /^writerIntentMs/],
      [{ knex: knex, stale: 5 }, /^stale: unknown option of createLockManager/],
    ];
    for (const [options, message] of bad) {
      expect(() => createLockManager(options as never)).toThrow(InvalidOptionsError);
      expect(() => createLockManager(options as never)).toThrow(message);
    }
  });
});
