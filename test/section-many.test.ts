// runSection over several resources (src/lock/sections/section-run.ts), the core the multi-resource API calls:
// the rows are taken in the order of their bytes in one transaction, one log row per resource, one
// commit; targets out of order are refused; a timeout on one resource leaves none held.
// covers: src/lock/sections/section-run.ts, src/lock/sections/section-attempt.ts
import { describe, expect, it } from 'vitest';
import { createLockManager, InvalidOptionsError, LockTimeoutError } from '../src/index.js';
import type { LockContext } from '../src/lock/context/lock-context.js';
import { resourceKey } from '../src/lock/durable/resource-id.js';
import { EnclosingFences } from '../src/lock/context/enclosing-fences.js';
import { runSection, type SectionTarget } from '../src/lock/sections/section-run.js';
import { WaitQueues } from '../src/lock/waiting/wait.js';
import { resolveManagerOptions } from '../src/options.js';
import { useTestDatabase } from './support/db.js';
import { invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);

/** A lock context as a manager builds one. */
function context(): LockContext {
  const options = resolveManagerOptions({ knex: db.knex, owner: 'many' });
  return {
    knex: db.knex,
    options,
    policy: { retries: options.deadlockRetries, resolveTimeoutMs: options.resolveTimeoutMs },
    queues: new WaitQueues(),
    scopes: new EnclosingFences(),
    ownerBytes: Buffer.from(options.owner),
    acquirePath: { statements: false },
    sections: {},
    fences: {},
  };
}

const target = (resourceId: string, mode: 'write' | 'read'): SectionTarget => ({
  resourceId,
  resource: resourceKey(resourceId),
  mode,
});
const options = { waitMs: 1_000, signal: undefined, isolationLevel: undefined, history: true };

describe('runSection over several resources', () => {
  it('takes every row in one transaction, logs one row per resource and commits once', async () => {
    const ctx = context();
    const targets = [target('m-a', 'write'), target('m-b', 'read')];
    const ids = await runSection(
      ctx,
      targets,
      async (_trx, grants) => grants.map((g) => [g.resourceId, g.mode]),
      options,
    );
    expect(ids).toEqual([
      ['m-a', 'write'],
      ['m-b', 'read'],
    ]);
    const locks = createLockManager({ knex: db.knex });
    for (const id of ['m-a', 'm-b'])
      expect((await locks.history(id)).grants.map((g) => g.releasedBy)).toEqual(['section']);
    await expect(runSection(ctx, [...targets].reverse(), async () => 1, options)).rejects.toBeInstanceOf(
      InvalidOptionsError,
    );
  });

  it('a timeout on the second resource leaves the first free', async () => {
    const ctx = context();
    const locks = createLockManager({ knex: db.knex });
    const durable = await locks.acquireWrite('m-d');
    let ran = false;
    await expect(
      runSection(ctx, [target('m-c', 'write'), target('m-d', 'write')], async () => void (ran = true), {
        ...options,
        waitMs: 300,
      }),
    ).rejects.toBeInstanceOf(LockTimeoutError);
    expect(ran).toBe(false);
    const free = await locks.tryAcquireWrite('m-c');
    expect(free).not.toBeNull();
    await free!.release();
    await durable.release();
    expect(await invariantViolations(db.knex)).toEqual([]);
  });
});
