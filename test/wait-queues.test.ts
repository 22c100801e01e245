// Wait queues belong to a lock manager: a waiter on one database never queues behind a waiter for
// the same resource id on another.
// covers: src/lock/waiting/wait.ts, src/lock/context/lock-context.ts
import { describe, expect, it } from 'vitest';
import { createLockManager } from '../src/index.js';
import { useTestDatabase } from './support/db.js';

const a = useTestDatabase(`${import.meta.filename}-a`);
const b = useTestDatabase(`${import.meta.filename}-b`);

describe('wait queues', () => {
  it('a waiter for an id on database A does not hold back an acquirer of the same id on database B', async () => {
    const onA = createLockManager({ knex: a.knex });
    const onB = createLockManager({ knex: b.knex });
    const held = await onA.acquireWrite('same-id');
    const waiting = onA.acquireWrite('same-id', { waitMs: 60_000 });
    // B's lock is free: granted on its first attempt, which a shared queue would have put behind A's waiter.
    const onBGrant = await onB.acquireWrite('same-id', { waitMs: 60_000 });
    expect(onBGrant.resourceId).toBe('same-id');
    await onBGrant.release();
    await held.release();
    await (await waiting).release();
  });
});
