// The operator API: list, history, stats, forceRelease with a reason, onLockLost, `await using`,
// and migrations 004 and 005 applied to a database at an earlier schema.
// covers: src/lock/manager/operator-calls.ts, src/sql/operate.ts, src/sql/release-note.ts, src/sql/inspect.ts
import type { Knex } from 'knex';
import { describe, expect, it } from 'vitest';
import * as m004 from '../migrations/004_release_notes.js';
import * as m008 from '../migrations/008_resource_gate.js';
import * as m010 from '../migrations/010_permits.js';
import * as m005 from '../migrations/005_history_index.js';
import { frozen, MIGRATIONS } from '../migrations/index.js';
import {
  createLockManager,
  InvalidOptionsError,
  InvalidResourceIdError,
  LIMITS,
  LockLostError,
  type Grant,
  type LockLostInfo,
} from '../src/index.js';
import { migrate, reapStaleGrants } from '../src/admin/index.js';
import { historyQuery, listQuery } from '../src/sql/operate.js';
import { TEST_PROCEDURES, useTestDatabase } from './support/db.js';
import { backdate, snapshot } from './support/state.js';

const db = useTestDatabase(import.meta.filename);
const at003 = useTestDatabase(`${import.meta.filename}-at003`, { migrate: false });
const direct003 = useTestDatabase(`${import.meta.filename}-direct003`, { migrate: false });

async function rows<T>(k: Knex, sql: string, params: unknown[] = []): Promise<T[]> {
  return ((await k.raw(sql, params as Knex.RawBinding[])) as unknown as [T[]])[0];
}

/** Releases every live grant, so each test starts from no holders (the log keeps its history). */
async function releaseAll(): Promise<void> {
  const locks = createLockManager({ knex: db.knex, owner: 'cleanup' });
  for (;;) {
    const { grants } = await locks.list({ limit: 1000 });
    if (grants.length === 0) return;
    for (const g of grants) await locks.forceRelease(g.id, { reason: 'test cleanup' });
  }
}

/** A promise of the first `n` calls of an onLockLost hook, and the calls seen so far. */
function lostRecorder() {
  const calls: Array<{ grant: Grant; info: LockLostInfo }> = [];
  const waiters: Array<() => void> = [];
  const hook = (grant: Grant, info: LockLostInfo): void => {
    calls.push({ grant, info });
    for (const w of waiters.splice(0)) w();
  };
  const atLeast = (n: number): Promise<void> =>
    new Promise((resolve) => {
      const look = (): void => (calls.length >= n ? resolve() : void waiters.push(look));
      look();
    });
  return { calls, hook, atLeast };
}

describe('list()', () => {
  it('lists live grants across resources oldest first, with filters, on the database clock', async () => {
    await releaseAll();
    const a = createLockManager({ knex: db.knex, owner: 'svc-a', staleAfterMs: 60_000 });
    const b = createLockManager({ knex: db.knex, owner: 'svc-b' });
    const w1 = (await a.tryAcquireWrite('list:loan-1'))!;
    const r1 = (await b.tryAcquireRead('list:loan-2'))!;
    const r2 = (await a.tryAcquireRead('list:loan-2'))!;
    const w2 = (await b.tryAcquireWrite('other:stock-9'))!;
    await backdate(db.knex, w1.id, 120_000); // the oldest, and stale at a 60 s cutoff
    await w2.extend(600_000); // backdated too, but under a lease: not stale
    await backdate(db.knex, w2.id, 90_000);

    const { grants, next } = await a.list();
    expect(next).toBeNull();
    expect(grants.map((g) => g.id)).toEqual([w1.id, w2.id, r1.id, r2.id]);
    expect(grants[0]).toMatchObject({
      id: w1.id,
      resourceId: 'list:loan-1',
      mode: 'write',
      owner: 'svc-a',
      stale: true,
      writerWaiting: false,
      leaseUntil: null,
    });
    expect(grants[0]!.ageMs).toBeGreaterThanOrEqual(120_000);
    expect(grants[0]!.createTime).toBeInstanceOf(Date);
    expect(grants[1]).toMatchObject({ id: w2.id, stale: false, leaseUntil: expect.any(Date) });
    expect(grants[2]).toMatchObject({ id: r1.id, mode: 'read', owner: 'svc-b', stale: false });

    expect((await a.list({ mode: 'read' })).grants.map((g) => g.id)).toEqual([r1.id, r2.id]);
    expect((await a.list({ owner: 'svc-b' })).grants.map((g) => g.id)).toEqual([w2.id, r1.id]);
    expect((await a.list({ owner: 'SVC-B' })).grants).toEqual([]);
    expect((await a.list({ owner: 'svc-b ' })).grants).toEqual([]);
    expect((await a.list({ resourcePrefix: 'list:' })).grants.map((g) => g.id)).toEqual([w1.id, r1.id, r2.id]);
    expect((await a.list({ staleOnly: true })).grants.map((g) => g.id)).toEqual([w1.id]);
    // `stale` is the reaper's own test: with the same cutoff it reaps exactly the grants flagged.
    const reaped = await reapStaleGrants(db.knex, { staleAfterMs: 60_000 });
    expect(reaped.grants.map((g) => g.id)).toEqual([w1.id]);
    await releaseAll();
  });

  it('pages by cursor: every live grant exactly once, also when grant times tie', async () => {
    await releaseAll();
    const locks = createLockManager({ knex: db.knex });
    const grants: Grant[] = [];
    for (let i = 0; i < 7; i++) grants.push((await locks.tryAcquireWrite(`page-${i}`))!);
    // Three grants at the very same microsecond: the cursor must carry the id, not only the time.
    await db.knex.raw(
      'UPDATE t_lock_log SET create_time = (SELECT t FROM (SELECT create_time AS t FROM t_lock_log WHERE id = ?) x) WHERE id IN (?, ?)',
      [grants[2]!.id, grants[3]!.id, grants[4]!.id],
    );
    const seen: number[] = [];
    let after: number | undefined;
    let pages = 0;
    do {
      const page = await locks.list({ limit: 2, ...(after === undefined ? {} : { after }) });
      seen.push(...page.grants.map((g) => g.id));
      after = page.next ?? undefined;
      pages++;
      if (page.next !== null) expect(page.next).toBe(page.grants.at(-1)!.id);
    } while (after !== undefined);
    expect(pages).toBe(4);
    expect(seen).toEqual(grants.map((g) => g.id));
    await releaseAll();
  });

  it('marks the grants of a resource a writer is waiting for', async () => {
    await releaseAll();
    const locks = createLockManager({ knex: db.knex, writerIntentMs: 60_000 });
    const reader = (await locks.tryAcquireRead('wait-here'))!;
    const bystander = (await locks.tryAcquireRead('no-wait'))!;
    const controller = new AbortController();
    const writer = locks
      .acquireWrite('wait-here', { waitMs: 60_000, signal: controller.signal })
      .catch((e: unknown) => e);
    await expect
      .poll(async () => (await locks.list()).grants.find((g) => g.id === reader.id)?.writerWaiting, { timeout: 20_000 })
      .toBe(true);
    expect((await locks.list()).grants.find((g) => g.id === bystander.id)?.writerWaiting).toBe(false);
    expect((await locks.stats()).waitingWriters).toBe(1);
    controller.abort();
    expect(await writer).toMatchObject({ name: 'AbortError' });
    await releaseAll();
  });

  it('matches owner exactly: trailing spaces count, as every other byte does', async () => {
    await releaseAll();
    const grants = new Map<string, number>();
    for (const owner of ['own', 'own ', 'own  ', ' own', 'own\t']) {
      grants.set(
        owner,
        (await createLockManager({ knex: db.knex, owner }).tryAcquireWrite(`exact:${JSON.stringify(owner)}`))!.id,
      );
    }
    const locks = createLockManager({ knex: db.knex });
    for (const [owner, id] of grants)
      expect(
        (await locks.list({ owner })).grants.map((g) => g.id),
        JSON.stringify(owner),
      ).toEqual([id]);
    expect((await locks.list({ owner: 'own   ' })).grants).toEqual([]);
    // The negative control: the collated comparison alone (PAD SPACE) lets 'own' match 'own ' and 'own  '.
    const { sql, params } = listQuery(
      {
        mode: undefined,
        owner: Buffer.from('own'),
        staleOnly: false,
        resourcePrefix: undefined,
        limit: 100,
        after: undefined,
      },
      600_000,
    );
    const padded = await rows<{ id: number }>(
      db.knex,
      sql.replace(' AND CAST(l.owner AS BINARY) = ?', ''),
      params.filter((_, i) => i !== 2),
    );
    expect(padded.map((r) => Number(r.id)).sort((x, y) => x - y)).toEqual([
      grants.get('own'),
      grants.get('own '),
      grants.get('own  '),
    ]);
    await releaseAll();
  });

  it('reads live grants through the (status, create_time) index, not the log (EXPLAIN)', async () => {
    await bulkReleasedGrants('bulk-', 1_000_000);
    const filter = {
      mode: undefined,
      owner: undefined,
      staleOnly: false,
      resourcePrefix: undefined,
      limit: 100,
      after: undefined,
    };
    const first = listQuery(filter, 600_000);
    expect(await logAccess(first.sql, first.params)).toEqual({ type: 'ref', key: 'ix_lock_log_status_time' });
    const paged = listQuery({ ...filter, staleOnly: true }, 600_000, { id: 1, days: 739000, us: 0 });
    expect(await logAccess(paged.sql, paged.params)).toEqual({ type: 'range', key: 'ix_lock_log_status_time' });
    // The check catches a full scan: the same statement with the live test replaced by one on a column no index leads with.
    const scan = listQuery(filter, 600_000);
    expect(await logAccess(scan.sql.replace('l.status = 0', 'l.version >= 0'), scan.params)).toMatchObject({
      type: 'ALL',
    });
    // The exact owner test stays usable by an index on owner, should one be added (the optimizer
    // lists it among the keys it can use); its byte comparison alone could not.
    const byOwner = listQuery({ ...filter, owner: Buffer.from('nobody-owns-this') }, 600_000);
    expect(await logAccess(byOwner.sql, byOwner.params)).toMatchObject({ key: 'ix_lock_log_status_time' });
    await db.knex.raw('ALTER TABLE t_lock_log ADD INDEX ix_test_owner (owner)');
    try {
      expect(await usableKeys(byOwner.sql, byOwner.params)).toContain('ix_test_owner');
      const bytesOnly = byOwner.sql.replace('l.owner = CONVERT(? USING utf8mb4) COLLATE utf8mb4_bin AND ', '');
      expect(
        await usableKeys(
          bytesOnly,
          byOwner.params.filter((_, i) => i !== 1),
        ),
      ).not.toContain('ix_test_owner');
    } finally {
      await db.knex.raw('ALTER TABLE t_lock_log DROP INDEX ix_test_owner');
    }
  });
});

function digits(): string {
  return Array.from({ length: 10 }, (_, i) => (i === 0 ? 'SELECT 0 d' : `SELECT ${i}`)).join(' UNION ALL ');
}

/** 20,000 released grants of resources `${prefix}0` to `${prefix}19999`, so the optimizer has a log worth avoiding. */
async function bulkReleasedGrants(prefix: string, tokenBase: number): Promise<void> {
  await db.knex.raw(
    `INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token, released_at, released_by)
    SELECT CONVERT(CONCAT(?, n) USING binary), 0, 2, UTC_TIMESTAMP(6) - INTERVAL n SECOND, 1, 'bulk', UNHEX(LPAD(HEX(? + n), 32, '0')), UTC_TIMESTAMP(6), 1
      FROM (SELECT a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d AS n
              FROM (${digits()}) a, (${digits()}) b, (${digits()}) c, (${digits()}) e, (SELECT 0 d UNION ALL SELECT 1) f) nums`,
    [prefix, tokenBase],
  );
  await db.knex.raw('ANALYZE TABLE t_lock_log');
}

/** How the log (alias `l`) is read by `sql`, from its tabular plan. */
async function logAccess(sql: string, params: unknown[]): Promise<{ type: string; key: string | null }> {
  // The tabular plan: MySQL names its format (its default may be another), MariaDB has only this one.
  const plan = await rows<{ table: string; type: string; key: string | null }>(
    db.knex,
    `EXPLAIN FORMAT=TRADITIONAL ${sql}`,
    params,
  ).catch(() => rows<{ table: string; type: string; key: string | null }>(db.knex, `EXPLAIN ${sql}`, params));
  const row = plan.find((p) => p.table === 'l');
  if (!row) throw new Error(`no plan row for the log in ${JSON.stringify(plan)}`);
  return { type: row.type, key: row.key };
}

/** The keys the optimizer could use to read the log (alias `l`) in `sql`. */
async function usableKeys(sql: string, params: unknown[]): Promise<string[]> {
  const plan = await rows<{ table: string; possible_keys: string | null }>(
    db.knex,
    `EXPLAIN FORMAT=TRADITIONAL ${sql}`,
    params,
  ).catch(() => rows<{ table: string; possible_keys: string | null }>(db.knex, `EXPLAIN ${sql}`, params));
  return (plan.find((p) => p.table === 'l')?.possible_keys ?? '').split(',');
}

describe('history()', () => {
  it("gives a resource's grants newest first with how each ended, when, hold time and an operator's reason", async () => {
    const locks = createLockManager({ knex: db.knex, owner: 'app' });
    const operator = createLockManager({ knex: db.knex, owner: 'ops/alice' });
    const id = 'hist:loan-7';
    const byHolder = (await locks.tryAcquireWrite(id))!;
    await byHolder.release();
    const reaped = (await locks.tryAcquireWrite(id))!;
    await backdate(db.knex, reaped.id, 120_000);
    expect((await reapStaleGrants(db.knex, { staleAfterMs: 60_000 })).grants.map((g) => g.id)).toEqual([reaped.id]);
    const forced = (await locks.tryAcquireRead(id))!;
    expect(await operator.forceRelease(forced.id, { reason: 'stuck after deploy 🚑' })).toBe(true);
    const live = (await locks.tryAcquireRead(id))!;
    await locks.tryAcquireWrite('hist:other');

    const { grants, next } = await locks.history(id);
    expect(next).toBeNull();
    expect(grants.map((g) => [g.id, g.releasedBy])).toEqual([
      [live.id, null],
      [forced.id, 'operator'],
      [reaped.id, 'reaper'],
      [byHolder.id, 'holder'],
    ]);
    expect(grants[0]).toMatchObject({ mode: 'read', owner: 'app', releasedAt: null, releaser: null, reason: null });
    expect(grants[1]).toMatchObject({
      mode: 'read',
      releasedAt: expect.any(Date),
      releaser: 'ops/alice',
      reason: 'stuck after deploy 🚑',
    });
    expect(grants[2]).toMatchObject({ mode: 'write', releaser: null, reason: null });
    expect(grants[2]!.heldMs).toBeGreaterThanOrEqual(120_000);
    for (const g of grants) expect(g.heldMs).toBeGreaterThanOrEqual(0);

    const first = await locks.history(id, { limit: 3 });
    expect(first.next).toBe(reaped.id);
    const rest = await locks.history(id, { limit: 3, before: first.next! });
    expect(rest).toEqual({ grants: [expect.objectContaining({ id: byHolder.id })], next: null });
    expect(await locks.history('hist:never-used')).toEqual({ grants: [], next: null });
    await releaseAll();
  });

  it("reads a resource's grants through its index on resource_id, not by scanning the log (EXPLAIN)", async () => {
    await bulkReleasedGrants('hbulk-', 2_000_000);
    const resource = Buffer.from('hbulk-1234');
    // The indexes the plan reads the log through (MySQL may intersect it with the primary key for a later page).
    const keys = async (q: { sql: string; params: unknown[] }): Promise<string[]> =>
      ((await logAccess(q.sql, q.params)).key ?? '').split(',');
    const first = historyQuery(resource, 50, undefined);
    expect(await keys(first)).toContain('ix_lock_log_resource');
    expect(await keys(historyQuery(resource, 50, 5_000_000))).toContain('ix_lock_log_resource');
    // The check catches a scan: the schema without the index (migration 005 undone).
    await m005.down(db.knex);
    try {
      expect(await keys(first)).not.toContain('ix_lock_log_resource');
    } finally {
      await m005.up(db.knex);
    }
    expect(await keys(first)).toContain('ix_lock_log_resource');
  });
});

describe('stats()', () => {
  it("counts live grants by mode, stale, leased, the oldest age and the last hour's forced releases", async () => {
    await releaseAll();
    const locks = createLockManager({ knex: db.knex, staleAfterMs: 60_000 });
    const before = await locks.stats();
    expect(before).toMatchObject({
      live: { write: 0, read: 0 },
      stale: 0,
      leased: 0,
      waitingWriters: 0,
      oldestAgeMs: null,
      staleAfterMs: 60_000,
    });
    const w = (await locks.tryAcquireWrite('stats-1'))!;
    await locks.tryAcquireRead('stats-2');
    const leased = (await locks.tryAcquireRead('stats-2'))!;
    await leased.extend(600_000);
    await backdate(db.knex, w.id, 300_000);
    const s = await locks.stats();
    expect(s).toMatchObject({ live: { write: 1, read: 2 }, stale: 1, leased: 1, waitingWriters: 0 });
    expect(s.oldestAgeMs).toBeGreaterThanOrEqual(300_000);
    await reapStaleGrants(db.knex, { staleAfterMs: 60_000 });
    await locks.forceRelease(leased.id, { reason: 'stats test' });
    const after = await locks.stats();
    expect(after.lastHour.reaped - before.lastHour.reaped).toBe(1);
    // releaseAll() in earlier tests released as an operator too: count the difference.
    expect(after.lastHour.operator - before.lastHour.operator).toBe(1);
    expect(after.live).toEqual({ write: 0, read: 1, permit: 0 });
    await releaseAll();
  });
});

describe('forceRelease(grantId, { reason })', () => {
  it('notes who and why with the release, once; a second call releases nothing and notes nothing', async () => {
    const app = createLockManager({ knex: db.knex });
    const operator = createLockManager({ knex: db.knex, owner: 'cli:bob@host' });
    const g = (await app.tryAcquireWrite('force-1'))!;
    expect(await operator.forceRelease(g.id, { reason: 'deadlocked job' })).toBe(true);
    expect(await operator.forceRelease(g.id, { reason: 'again' })).toBe(false);
    const notes = await rows<{ released_by: number; releaser: string; reason: string }>(
      db.knex,
      'SELECT released_by, releaser, reason FROM t_lock_release_note WHERE grant_id = ?',
      [g.id],
    );
    expect(notes).toEqual([{ released_by: 3, releaser: 'cli:bob@host', reason: 'deadlocked job' }]);
    expect(await operator.forceRelease(999_999_999, { reason: 'no such grant' })).toBe(false);
    expect(await g.release()).toBe(false);
  });

  it('refuses a bad reason or option with InvalidOptionsError and changes nothing', async () => {
    const locks = createLockManager({ knex: db.knex });
    const g = (await locks.tryAcquireWrite('force-bad'))!;
    const before = await snapshot(db.knex);
    const notesBefore = await rows(db.knex, 'SELECT * FROM t_lock_release_note ORDER BY grant_id');
    const bad: Array<[unknown, RegExp]> = [
      [{ reason: '' }, /^reason must be well-formed text of 1 to 500 characters/],
      [{ reason: 'x'.repeat(LIMITS.maxReasonChars + 1) }, /^reason must be/],
      [{ reason: 42 }, /^reason must be .* got 42/],
      [{ reason: 'bad \ud800' }, /^reason must be well-formed/],
      [{ why: 'typo' }, /^why: unknown option of forceRelease/],
      ['a reason', /^options of forceRelease must be an object/],
    ];
    for (const [options, message] of bad) {
      const err = await locks.forceRelease(g.id, options as { reason: string }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, String(options)).toBeInstanceOf(InvalidOptionsError);
      expect((err as Error).message).toMatch(message);
    }
    expect(await snapshot(db.knex)).toBe(before);
    expect(await rows(db.knex, 'SELECT * FROM t_lock_release_note ORDER BY grant_id')).toEqual(notesBefore);
    // The limit is in characters, as the column counts them: 500 four-byte characters fit.
    expect(await locks.forceRelease(g.id, { reason: '🚑'.repeat(LIMITS.maxReasonChars) })).toBe(true);
    expect((await locks.history('force-bad')).grants[0]!.reason).toBe('🚑'.repeat(LIMITS.maxReasonChars));
  });

  it('list() and history() refuse bad options with a typed error', async () => {
    const locks = createLockManager({ knex: db.knex });
    const bad: Array<[() => Promise<unknown>, RegExp, typeof InvalidOptionsError | typeof InvalidResourceIdError]> = [
      [() => locks.list({ limit: 0 }), /^limit must be an integer from 1 to 10000/, InvalidOptionsError],
      [() => locks.list({ limit: 10_001 }), /^limit/, InvalidOptionsError],
      [
        () => locks.list({ mode: 'exclusive' as 'write' }),
        /^mode must be 'write', 'read' or 'permit'/,
        InvalidOptionsError,
      ],
      [() => locks.list({ after: -1 }), /^after must be an integer/, InvalidOptionsError],
      [() => locks.list({ after: 999_999_999 }), /^after: there is no grant 999999999/, InvalidOptionsError],
      [
        () => locks.list({ staleOnly: 'yes' as unknown as boolean }),
        /^staleOnly must be true or false/,
        InvalidOptionsError,
      ],
      [() => locks.list({ owner: '' }), /^owner must be/, InvalidOptionsError],
      [() => locks.list({ resourcePrefix: 'x'.repeat(256) }), /256 bytes/, InvalidResourceIdError],
      [() => locks.list({ limt: 5 } as object), /^limt: unknown option of list/, InvalidOptionsError],
      [() => locks.history('', {}), /empty/, InvalidResourceIdError],
      [() => locks.history('x', { before: 1.5 }), /^before must be an integer/, InvalidOptionsError],
    ];
    for (const [call, message, type] of bad) {
      const err = await call().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(type);
      expect((err as Error).message).toMatch(message);
    }
  });
});

describe('onLockLost', () => {
  it('is called once when the fence refuses the commit, with who released it', async () => {
    const lost = lostRecorder();
    const locks = createLockManager({ knex: db.knex, onLockLost: lost.hook });
    const operator = createLockManager({ knex: db.knex });
    let grantId = 0;
    const err = await locks
      .withWriteLock('lost-fence', async (_trx, grant) => {
        grantId = grant.id;
        await operator.forceRelease(grant.id, { reason: 'test' });
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LockLostError);
    await lost.atLeast(1);
    expect(lost.calls.map((c) => [c.grant.id, c.info])).toEqual([
      [grantId, { releasedBy: 'operator', detectedBy: 'fence' }],
    ]);
  });

  it('is called once when a lease extension finds the grant reaped, and not again on later calls', async () => {
    const lost = lostRecorder();
    const locks = createLockManager({ knex: db.knex, onLockLost: lost.hook });
    const g = (await locks.tryAcquireWrite('lost-extend'))!;
    await backdate(db.knex, g.id, 120_000);
    await reapStaleGrants(db.knex, { staleAfterMs: 60_000 });
    expect(await g.extend(1000)).toBe(false);
    expect(lost.calls.map((c) => c.info)).toEqual([{ releasedBy: 'reaper', detectedBy: 'extend' }]);
    expect(g.signal.aborted).toBe(true);
    expect(await g.extend(1000)).toBe(false);
    expect(await g.release()).toBe(false);
    await expect(g.fence(async () => 0)).rejects.toBeInstanceOf(LockLostError);
    expect(lost.calls).toHaveLength(1);
  });

  it('is called once when a release finds the grant gone; never for a grant its holder released', async () => {
    const lost = lostRecorder();
    const locks = createLockManager({ knex: db.knex, onLockLost: lost.hook });
    const operator = createLockManager({ knex: db.knex });
    const g = (await locks.tryAcquireRead('lost-release'))!;
    await operator.forceRelease(g.id);
    expect(await g.release()).toBe(false);
    expect(await g.release()).toBe(false);
    expect(lost.calls.map((c) => [c.grant, c.info])).toEqual([[g, { releasedBy: 'operator', detectedBy: 'release' }]]);
    // The other direction: a holder's own release, a fenced commit, an extension racing nothing.
    const own = (await locks.tryAcquireWrite('lost-none'))!;
    expect(await own.extend(1000)).toBe(true);
    expect(await own.release()).toBe(true);
    expect(await own.release()).toBe(false);
    await locks.withReadLock('lost-none', async () => undefined);
    expect(lost.calls).toHaveLength(1);
  });

  it('a hook that throws is reported as a process warning and does not change what the caller sees', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error): void => void warnings.push(w);
    process.on('warning', onWarning);
    try {
      const locks = createLockManager({
        knex: db.knex,
        onLockLost: () => {
          throw new Error('hook bug');
        },
      });
      const g = (await locks.tryAcquireWrite('lost-throw'))!;
      await createLockManager({ knex: db.knex }).forceRelease(g.id);
      expect(await g.release()).toBe(false);
      await expect.poll(() => warnings.map((w) => w.message)).toEqual([`onLockLost threw for grant ${g.id}: hook bug`]);
      expect(warnings[0]!.name).toBe('MysqlRwlockWarning');
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('must be a function', () => {
    expect(() => createLockManager({ knex: db.knex, onLockLost: 'log' as unknown as () => void })).toThrow(
      /^onLockLost must be a function/,
    );
  });
});

describe('await using', () => {
  it('releases the grant when the scope ends, also when the scope throws', async () => {
    const locks = createLockManager({ knex: db.knex });
    {
      await using grant = await locks.acquireWrite('using-1', { waitMs: 1000 });
      expect((await locks.inspect('using-1')).holders.map((h) => h.id)).toEqual([grant.id]);
    }
    expect((await locks.inspect('using-1')).live.write).toBe(0);
    const thrown = await (async () => {
      await using _grant = await locks.acquireRead('using-1');
      throw new Error('business failure');
    })().catch((e: unknown) => e);
    expect((thrown as Error).message).toBe('business failure');
    expect((await locks.inspect('using-1')).live.read).toBe(0);
  });

  it('is idempotent: a grant released in the scope, or lost, is left alone', async () => {
    const locks = createLockManager({ knex: db.knex });
    {
      await using grant = await locks.acquireWrite('using-2');
      expect(await grant.release()).toBe(true);
    }
    {
      await using grant = await locks.acquireWrite('using-2');
      await createLockManager({ knex: db.knex }).forceRelease(grant.id);
    }
    const log = await rows<{ released_by: number }>(
      db.knex,
      "SELECT released_by FROM t_lock_log WHERE resource_id = 'using-2' ORDER BY id",
    );
    expect(log.map((r) => r.released_by)).toEqual([1, 3]);
  });

  it('a release that fails at scope exit is thrown, not swallowed', async () => {
    const own = db.connect({ poolMax: 2 });
    // The release is sent again while no connection can be had, for resolveTimeoutMs: 1 s of it shows the same.
    const locks = createLockManager({ knex: own, resolveTimeoutMs: 1000 });
    const err = await (async () => {
      await using _grant = await locks.acquireWrite('using-3');
      await own.destroy(); // the release at scope exit has no database to talk to
    })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect((await createLockManager({ knex: db.knex }).inspect('using-3')).live.write).toBe(1);
    await releaseAll();
  });
});

describe('migrations 004 and 005', () => {
  it('migrate() upgrades a database at schema 003 with live grants to 004', async () => {
    // The 003 schema as its migrations create it, and as a migrated database rolled back to it.
    for (const m of MIGRATIONS.slice(0, 3)) await m.up(direct003.knex);
    await migrate(at003.knex);
    // Granted before the rollback: this release's clients refuse a schema short of CLIENT_NEEDS.
    const app = createLockManager({ knex: at003.knex });
    const held = (await app.tryAcquireWrite('upgrade-me'))!;
    await frozen('016_writer_intent_gate').down(at003.knex);
    await m010.down(at003.knex);
    await m008.down(at003.knex);
    await m004.down(at003.knex);
    await at003.knex.raw(
      "DELETE FROM rwlock_migrations WHERE name IN ('004_release_notes', '008_resource_gate', '010_permits', '016_writer_intent_gate')",
    );
    const tables = async (k: Knex, name: string): Promise<string[]> =>
      (
        await rows<{ t: string }>(
          k,
          "SELECT TABLE_NAME AS t FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME LIKE 't\\_%' ORDER BY 1",
          [name],
        )
      ).map((r) => r.t);
    expect(await tables(at003.knex, at003.name)).toEqual(['t_lock_log', 't_read_write_lock']);
    expect(await tables(at003.knex, at003.name)).toEqual(await tables(direct003.knex, direct003.name));

    expect(await migrate(at003.knex)).toEqual({
      applied: ['004_release_notes', '008_resource_gate', '010_permits', '016_writer_intent_gate'],
      repaired: [],
    });
    expect(await tables(at003.knex, at003.name)).toEqual([
      't_lock_gate',
      't_lock_log',
      't_lock_release_note',
      't_read_write_lock',
    ]);
    expect(
      await createLockManager({ knex: at003.knex, owner: 'ops' }).forceRelease(held.id, { reason: 'after upgrade' }),
    ).toBe(true);
    expect((await app.history('upgrade-me')).grants).toEqual([
      expect.objectContaining({ id: held.id, releasedBy: 'operator', releaser: 'ops', reason: 'after upgrade' }),
    ]);
    expect(await migrate(at003.knex)).toEqual({ applied: [], repaired: [] });
  });

  it('migrate() adds the history index to a database at schema 004 with live grants, once, in place', async () => {
    const indexes = async (): Promise<string[]> =>
      (
        await rows<{ i: string }>(
          db.knex,
          "SELECT DISTINCT INDEX_NAME AS i FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 't_lock_log' ORDER BY 1",
          [db.name],
        )
      )
        .map((r) => r.i)
        .sort();
    await m005.down(db.knex);
    await db.knex.raw("DELETE FROM rwlock_migrations WHERE name = '005_history_index'");
    expect(await indexes()).not.toContain('ix_lock_log_resource');
    const app = createLockManager({ knex: db.knex });
    const held = (await app.tryAcquireWrite('upgrade-005'))!;
    expect(await migrate(db.knex, { procedures: TEST_PROCEDURES })).toEqual({
      applied: ['005_history_index'],
      repaired: [],
    });
    expect(await indexes()).toEqual([
      'PRIMARY',
      'ix_lock_log_resource',
      'ix_lock_log_status_time',
      'uk_lock_log_token',
    ]);
    expect((await app.history('upgrade-005')).grants.map((g) => g.id)).toEqual([held.id]);
    expect(await held.release()).toBe(true);
    expect(await migrate(db.knex, { procedures: TEST_PROCEDURES })).toEqual({ applied: [], repaired: [] });
  });
});
