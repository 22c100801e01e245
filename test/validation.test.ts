// Property 7 (docs/guarantees.md): bad input gets a typed error naming the problem, and nothing in the
// database changes.
// covers: src/options/resolve.ts, src/options/validators.ts, src/options.ts, src/options/keys.ts, src/lock/durable/resource-id.ts
import { describe, expect, it } from 'vitest';
import { createLockManager, InvalidOptionsError, InvalidResourceIdError } from '../src/index.js';
import {
  checkLockCounts,
  migrate,
  reapStaleGrants,
  purgeReleasedGrants,
  repairLockCounts,
} from '../src/admin/index.js';
import { useTestDatabase } from './support/db.js';
import { snapshot } from './support/state.js';
import { BAD_RESOURCE_IDS } from './support/bad-resource-ids.js';

const db = useTestDatabase(import.meta.filename);

const badIds = BAD_RESOURCE_IDS;

describe('bad resource ids', () => {
  it.each(badIds)(
    '%s: every entry point throws InvalidResourceIdError and writes nothing',
    async (_name, id, message) => {
      const locks = createLockManager({ knex: db.knex });
      const before = await snapshot(db.knex);
      const anyId = id as string;
      const calls: Array<() => Promise<unknown>> = [
        () => locks.tryAcquireWrite(anyId),
        () => locks.tryAcquireRead(anyId),
        () => locks.acquireWrite(anyId, { waitMs: 10 }),
        () => locks.acquireRead(anyId),
        () => locks.withWriteLock(anyId, async () => 1),
        () => locks.withReadLock(anyId, async () => 1),
        () => locks.inspect(anyId),
      ];
      for (const call of calls) {
        const err = await call().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(InvalidResourceIdError);
        expect((err as InvalidResourceIdError).code).toBe('ERR_RWLOCK_INVALID_RESOURCE_ID');
        expect((err as Error).message).toMatch(message);
      }
      expect(await snapshot(db.knex)).toBe(before);
    },
  );

  it('accepts exactly 255 bytes', async () => {
    const locks = createLockManager({ knex: db.knex });
    const g = await locks.tryAcquireWrite('é'.repeat(127) + 'x');
    expect(g!.resourceId).toHaveLength(128);
    await g!.release();
  });

  it('ids that differ only in case or trailing space are distinct locks', async () => {
    const locks = createLockManager({ knex: db.knex });
    const ids = ['Loan-7', 'loan-7', 'loan-7 ', 'loan-7  ', ' loan-7', 'LOAN-7'];
    const grants = await Promise.all(ids.map((id) => locks.tryAcquireWrite(id)));
    expect(grants.every((g) => g !== null)).toBe(true);
    for (const id of ids) expect((await locks.inspect(id)).live.write).toBe(1);
    await Promise.all(grants.map((g) => g!.release()));
  });
});

describe('bad options', () => {
  const cases: Array<[string, (locks: ReturnType<typeof createLockManager>) => Promise<unknown>, RegExp]> = [
    ['negative waitMs', (l) => l.acquireWrite('opt', { waitMs: -1 }), /^waitMs must be an integer/],
    ['NaN waitMs', (l) => l.acquireRead('opt', { waitMs: Number.NaN }), /^waitMs .* got NaN/],
    ['fractional waitMs', (l) => l.acquireWrite('opt', { waitMs: 1.5 }), /^waitMs .* got 1.5/],
    ['Infinity waitMs', (l) => l.acquireWrite('opt', { waitMs: Number.POSITIVE_INFINITY }), /^waitMs/],
    ['string waitMs', (l) => l.acquireWrite('opt', { waitMs: '100' as unknown as number }), /^waitMs .* got "100"/],
    [
      'unknown acquire option',
      (l) => l.acquireWrite('opt', { timeout: 5 } as never),
      /^timeout: unknown option of acquireWrite/,
    ],
    [
      'unknown withLock option',
      (l) => l.withReadLock('opt', async () => 1, { wait: 5 } as never),
      /^wait: unknown option of withReadLock/,
    ],
    ['bad signal', (l) => l.acquireWrite('opt', { signal: {} as AbortSignal }), /^signal must be an AbortSignal/],
    [
      'bad isolation level',
      (l) => l.withWriteLock('opt', async () => 1, { isolationLevel: 'snapshot' as never }),
      /^isolationLevel must be one of/,
    ],
    ['work not a function', (l) => l.withWriteLock('opt', 'nope' as never), /^work: withWriteLock needs a function/],
    ['options not an object', (l) => l.acquireWrite('opt', 5 as never), /must be an object/],
    ['forceRelease of a non-id', (l) => l.forceRelease(-3), /^grantId must be an integer/],
    [
      'options passed to a one-shot try',
      (l) => Reflect.apply(l.tryAcquireWrite, l, ['opt', { waitMs: 100 }]) as Promise<unknown>,
      /^tryAcquireWrite takes no options .* use acquireWrite\(id, \{ waitMs \}\)/,
    ],
    [
      'options passed to tryAcquireRead',
      (l) => Reflect.apply(l.tryAcquireRead, l, ['opt', {}]) as Promise<unknown>,
      /^tryAcquireRead takes no options/,
    ],
  ];

  it.each(cases)('%s: InvalidOptionsError naming the option, nothing written', async (_name, call, message) => {
    const locks = createLockManager({ knex: db.knex });
    const before = await snapshot(db.knex);
    const err = await call(locks).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(InvalidOptionsError);
    expect((err as InvalidOptionsError).code).toBe('ERR_RWLOCK_INVALID_OPTIONS');
    expect((err as Error).message).toMatch(message);
    expect(await snapshot(db.knex)).toBe(before);
  });

  it('reapStaleGrants, purgeReleasedGrants and migrate refuse bad options without touching anything', async () => {
    const before = await snapshot(db.knex);
    await expect(reapStaleGrants(db.knex, { staleAfterMs: -1 })).rejects.toThrow(/^staleAfterMs must be an integer/);
    await expect(reapStaleGrants(db.knex, { staleAfterMs: 1.5 })).rejects.toBeInstanceOf(InvalidOptionsError);
    await expect(reapStaleGrants(db.knex, { cutoff: 5 } as never)).rejects.toThrow(
      /^cutoff: unknown option of reapStaleGrants/,
    );
    await expect(purgeReleasedGrants(db.knex, { retentionMs: 0 })).rejects.toThrow(/^retentionMs/);
    await expect(migrate(db.knex, { wait: 1 } as never)).rejects.toThrow(/^wait: unknown option of migrate/);
    expect(await snapshot(db.knex)).toBe(before);
  });
  // One rule for every option parser: null is never "the default" (list({ limit: null }) once was, while
  // list({ after: null }) was refused); leaving the option out is.
  it('refuses null for every option of every call alike, naming it, with nothing written', async () => {
    const locks = createLockManager({ knex: db.knex });
    const before = await snapshot(db.knex);
    const nulled: Array<[string, () => unknown]> = [
      ['limit', () => locks.list({ limit: null as never })],
      ['after', () => locks.list({ after: null as never })],
      ['owner', () => locks.list({ owner: null as never })],
      ['before', () => locks.history('opt', { before: null as never })],
      ['limit', () => locks.history('opt', { limit: null as never })],
      ['reason', () => locks.forceRelease(1, { reason: null as never })],
      ['waitMs', () => locks.acquireWrite('opt', { waitMs: null as never })],
      ['leaseMs', () => locks.withWriteLock('opt', async () => 1, { leaseMs: null as never })],
      ['staleAfterMs', () => reapStaleGrants(db.knex, { staleAfterMs: null as never })],
      ['batchSize', () => purgeReleasedGrants(db.knex, { batchSize: null as never })],
      ['limit', () => checkLockCounts(db.knex, { limit: null as never })],
      ['limit', () => repairLockCounts(db.knex, { limit: null as never })],
      ['waitMs', () => migrate(db.knex, { waitMs: null as never })],
      ['owner', () => createLockManager({ knex: db.knex, owner: null as never })],
      ['onLockLost', () => createLockManager({ knex: db.knex, onLockLost: null as never })],
    ];
    for (const [name, call] of nulled) {
      const err = await Promise.resolve()
        .then(call)
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err, name).toBeInstanceOf(InvalidOptionsError);
      expect((err as Error).message, name).toBe(
        `${name} must not be null, got null: leave it out (or undefined) for its default`,
      );
    }
    // Left out, each takes its default.
    await expect(locks.list({ limit: undefined })).resolves.toHaveProperty('grants');
    expect(await snapshot(db.knex)).toBe(before);
  });
});
