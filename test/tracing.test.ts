// The diagnostics_channel tracing channels, seen by a real subscriber while the lock runs against a
// real server: what each channel reports, on success and failure, and that nothing is built while
// nobody listens.
// covers: src/contract/channels.ts, src/observability/tracing-entry.ts, src/lock/sections/section-traces.ts
import diagnostics from 'node:diagnostics_channel';
import { afterEach, describe, expect, it } from 'vitest';
import { createLockManager, LockLostError, LockTimeoutError } from '../src/index.js';
import { reapStaleGrants } from '../src/admin/index.js';
import {
  CHANNELS,
  type AcquireContext,
  type FenceContext,
  type LostContext,
  type ReapContext,
  type ReleaseContext,
} from '../src/observability/tracing-entry.js';
import { acquireChannel, isTraced, traced } from '../src/contract/channels.js';
import { useTestDatabase } from './support/db.js';
import { backdate } from './support/state.js';

const db = useTestDatabase(import.meta.filename);

type Event = { channel: string; event: string; context: Record<string, unknown> };

/** Subscribes to every channel, records each event with a copy of its context at that moment. */
function record() {
  const events: Event[] = [];
  const undo: Array<() => void> = [];
  for (const name of [CHANNELS.acquire, CHANNELS.fence, CHANNELS.release, CHANNELS.reap]) {
    const tc = diagnostics.tracingChannel<unknown, Record<string, unknown>>(name);
    const on = (event: string) => (context: Record<string, unknown>) =>
      void events.push({ channel: name, event, context: { ...context } });
    const handlers = {
      start: on('start'),
      end: on('end'),
      asyncStart: on('asyncStart'),
      asyncEnd: on('asyncEnd'),
      error: on('error'),
    };
    tc.subscribe(handlers);
    undo.push(() => tc.unsubscribe(handlers));
  }
  const lost: LostContext[] = [];
  const onLost = (m: unknown): void => void lost.push(m as LostContext);
  diagnostics.subscribe(CHANNELS.lost, onLost);
  undo.push(() => diagnostics.unsubscribe(CHANNELS.lost, onLost));
  return {
    events,
    lost,
    /** The completed calls on a channel: the context as asyncEnd (or error) left it. */
    finished<C>(channel: string): C[] {
      return events.filter((e) => e.channel === channel && e.event === 'asyncEnd').map((e) => e.context as C);
    },
    stop: () => undo.forEach((u) => u()),
  };
}

let recorder: ReturnType<typeof record> | undefined;
afterEach(() => {
  recorder?.stop();
  recorder = undefined;
});

describe('tracing channels', () => {
  it('acquire reports the grant, a busy try as null, and a timeout as its error', async () => {
    recorder = record();
    const locks = createLockManager({ knex: db.knex, owner: 'tracer' });
    const grant = await locks.tryAcquireWrite('tr-acquire');
    expect(await locks.tryAcquireRead('tr-acquire')).toBeNull();
    await expect(locks.acquireWrite('tr-acquire', { waitMs: 30 })).rejects.toBeInstanceOf(LockTimeoutError);
    expect(await grant!.release()).toBe(true);

    const acquires = recorder.finished<AcquireContext>(CHANNELS.acquire);
    expect(acquires).toEqual([
      expect.objectContaining({ resourceId: 'tr-acquire', mode: 'write', waitMs: 0, owner: 'tracer', result: grant }),
      expect.objectContaining({ resourceId: 'tr-acquire', mode: 'read', waitMs: 0, result: null }),
      expect.objectContaining({
        resourceId: 'tr-acquire',
        mode: 'write',
        waitMs: 30,
        error: expect.any(LockTimeoutError),
      }),
    ]);
    // Every call has a start before its end, on the same context object.
    expect(recorder.events.filter((e) => e.channel === CHANNELS.acquire && e.event === 'start')).toHaveLength(3);
    expect(recorder.events.filter((e) => e.channel === CHANNELS.acquire && e.event === 'error')).toHaveLength(1);
    expect(recorder.finished<ReleaseContext>(CHANNELS.release)).toEqual([
      expect.objectContaining({ grant, grantId: grant!.id, by: 'holder', result: true }),
    ]);
  });

  it('a section traces its take on the acquire channel and its commit on the fence channel, with section: true', async () => {
    recorder = record();
    const locks = createLockManager({ knex: db.knex, owner: 'tracer' });
    let seen: unknown;
    const id = await locks.withWriteLock(
      'tr-section',
      async (_trx, grant) => {
        seen = grant;
        return grant.id;
      },
      { section: true, waitMs: 1_000 },
    );
    expect(recorder.finished<AcquireContext>(CHANNELS.acquire)).toEqual([
      expect.objectContaining({ resourceId: 'tr-section', mode: 'write', waitMs: 1_000, section: true, result: seen }),
    ]);
    expect(recorder.finished<FenceContext>(CHANNELS.fence)).toEqual([
      expect.objectContaining({ grantId: id, resourceId: 'tr-section', mode: 'write', section: true }),
    ]);
    expect(recorder.finished<FenceContext>(CHANNELS.fence)[0]).not.toHaveProperty('error');
  });

  it('a section without history is traced as one with history, under grant id 0 (it has no grant row)', async () => {
    recorder = record();
    const locks = createLockManager({ knex: db.knex, owner: 'tracer' });
    const id = await locks.withWriteLock('tr-bare', async (_trx, grant) => grant.id, {
      section: true,
      history: false,
    });
    expect(id).toBe(0);
    expect(recorder.finished<AcquireContext>(CHANNELS.acquire)).toEqual([
      expect.objectContaining({
        resourceId: 'tr-bare',
        mode: 'write',
        section: true,
        result: expect.objectContaining({ id: 0 }),
      }),
    ]);
    expect(recorder.finished<FenceContext>(CHANNELS.fence)).toEqual([
      expect.objectContaining({ grantId: 0, resourceId: 'tr-bare', mode: 'write', section: true }),
    ]);
  });

  it('a fenced operation traces its acquire and its fence', async () => {
    recorder = record();
    const locks = createLockManager({ knex: db.knex });
    const id = await locks.withWriteLock('tr-fenced', async (_trx, grant) => grant.id);
    const acquires = recorder.finished<AcquireContext>(CHANNELS.acquire);
    expect(acquires).toEqual([expect.objectContaining({ resourceId: 'tr-fenced', mode: 'write', waitMs: 30_000 })]);
    expect(recorder.finished<FenceContext>(CHANNELS.fence)).toEqual([
      expect.objectContaining({ grantId: id, resourceId: 'tr-fenced', mode: 'write' }),
    ]);
    expect(recorder.finished<FenceContext>(CHANNELS.fence)[0]).not.toHaveProperty('error');
  });

  it('an operator release is traced, and the holder learns it lost the grant: fence error and a lost message', async () => {
    recorder = record();
    const locks = createLockManager({ knex: db.knex });
    const work = locks.withWriteLock('tr-lost', async (_trx, grant) => {
      expect(await locks.forceRelease(grant.id)).toBe(true);
      return grant.id;
    });
    await expect(work).rejects.toBeInstanceOf(LockLostError);
    const fences = recorder.finished<FenceContext>(CHANNELS.fence);
    expect(fences).toEqual([expect.objectContaining({ resourceId: 'tr-lost', error: expect.any(LockLostError) })]);
    const grantId = fences[0]!.grantId;
    expect(recorder.finished<ReleaseContext>(CHANNELS.release)).toContainEqual(
      expect.objectContaining({ grantId, by: 'operator', result: true }),
    );
    // Published after the fence's transaction has rolled back and who released it was read.
    await expect
      .poll(() => recorder!.lost)
      .toEqual([
        expect.objectContaining({
          grantId,
          resourceId: 'tr-lost',
          mode: 'write',
          releasedBy: 'operator',
          detectedBy: 'fence',
        }),
      ]);
  });

  it('reap reports its result, and a reaped holder learns it was the reaper', async () => {
    recorder = record();
    const locks = createLockManager({ knex: db.knex });
    const grant = await locks.tryAcquireRead('tr-reap');
    await backdate(db.knex, grant!.id, 3_600_000);
    const result = await reapStaleGrants(db.knex, { staleAfterMs: 60_000, batchSize: 7 });
    expect(recorder.finished<ReapContext>(CHANNELS.reap)).toEqual([
      expect.objectContaining({ staleAfterMs: 60_000, batchSize: 7, result }),
    ]);
    expect(result.grants.map((g) => g.id)).toEqual([grant!.id]);
    expect(await grant!.release()).toBe(false);
    expect(recorder.lost).toEqual([
      expect.objectContaining({ grantId: grant!.id, releasedBy: 'reaper', detectedBy: 'release', mode: 'read' }),
    ]);
  });

  it('with no subscriber nothing is built; a subscriber makes the same call traced (negative control)', async () => {
    expect(isTraced(acquireChannel)).toBe(false);
    let built = 0;
    const context = () => {
      built += 1;
      return { resourceId: 'x', mode: 'write' as const, waitMs: 0, owner: 'o' };
    };
    expect(await traced(acquireChannel, context, async () => 7)).toBe(7);
    expect(built).toBe(0);
    recorder = record();
    expect(isTraced(acquireChannel)).toBe(true);
    await traced(acquireChannel, context, async () => 7);
    expect(built).toBe(1);
    recorder.stop();
    recorder = undefined;
    expect(isTraced(acquireChannel)).toBe(false);
  });
});
