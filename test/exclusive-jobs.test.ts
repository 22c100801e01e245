// Exclusive jobs: runExclusive runs a job on one instance and answers the others at once; a run paused past
// lockAtMostFor commits nothing once the reaper has released its grant (negative control: the same job under
// a plain grant, its transaction committed without a fence, commits and runs twice); lockAtLeastFor keeps the
// grant after a fast run until that long after the grant on the database clock (control: without it, the next
// instance runs at once). Bad options: a typed error, nothing written.
// covers: src/lock/manager/exclusive-call.ts, src/lock/scheduled/exclusive.ts, src/lock/scheduled/lock-at-least.ts
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { databaseUrl } from '../harness/database.js';
import { createLockManager, DEFAULTS, InvalidOptionsError, InvalidResourceIdError } from '../src/index.js';
import { Exclusive } from '../src/decorators/index.js';
import { fromKnex } from '../src/adapters/index.js';
import { reapStaleGrants } from '../src/admin/index.js';
import { useTestDatabase } from './support/db.js';
import { invariantViolations, snapshot } from './support/state.js';

const db = useTestDatabase(import.meta.filename);
const REPO = join(import.meta.dirname, '..');
const AT_MOST_MS = 1_500;

async function effects(job: string): Promise<string[]> {
  const [rows] = (await db.knex.raw('SELECT tag FROM job_effects WHERE tag LIKE ? ORDER BY tag', [
    `${job}:%`,
  ])) as unknown as [Array<{ tag: string }>];
  return rows.map((r) => r.tag);
}

async function table(): Promise<void> {
  await db.knex.raw('CREATE TABLE IF NOT EXISTS job_effects (tag VARCHAR(64) PRIMARY KEY) ENGINE=InnoDB');
}

/** The grants of a resource, oldest first, with how long each was held on the database clock. */
async function grantsOf(
  resource: string,
): Promise<Array<{ owner: string; status: number; releasedBy: number | null; heldUs: number | null }>> {
  const [rows] = (await db.knex.raw(
    `SELECT owner, status, released_by, TIMESTAMPDIFF(MICROSECOND, create_time, released_at) AS held_us
       FROM t_lock_log WHERE resource_id = ? ORDER BY id`,
    [Buffer.from(resource)],
  )) as unknown as [Array<{ owner: string; status: number; released_by: number | null; held_us: string | null }>];
  return rows.map((r) => ({
    owner: r.owner,
    status: Number(r.status),
    releasedBy: r.released_by === null ? null : Number(r.released_by),
    heldUs: r.held_us === null ? null : Number(r.held_us),
  }));
}

interface Child {
  proc: ChildProcess;
  taken: Promise<void>;
  exited: Promise<{ code: number | null; last: unknown; stderr: string }>;
}

function startChild(job: string, fence: 'on' | 'off'): Child {
  const proc = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/exclusive-pause-worker.ts'], {
    cwd: REPO,
    env: {
      ...process.env,
      MYSQL_URL: databaseUrl(db.url, db.name),
      JOB: job,
      AT_MOST_MS: String(AT_MOST_MS),
      FENCE: fence,
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let onTaken!: () => void;
  const taken = new Promise<void>((resolve) => (onTaken = resolve));
  proc.stdout!.on('data', (d: Buffer) => {
    stdout += d.toString();
    if (stdout.includes('"taken":true')) onTaken();
  });
  proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<{ code: number | null; last: unknown; stderr: string }>((resolve) =>
    proc.on('close', (code) => {
      const last = stdout.trim().split('\n').at(-1) ?? '';
      resolve({ code, last: last.startsWith('{') ? JSON.parse(last) : last, stderr });
    }),
  );
  return { proc, taken, exited };
}

/**
 * Whether every live grant of the resource has a lease that has passed, with the grace after it, on
 * the database clock: then each is stale (src/sql/decision.ts, STALE_AT_SQL).
 */
async function leasePassed(resource: string): Promise<boolean> {
  const [[row]] = (await db.knex.raw(
    'SELECT COUNT(*) AS n, SUM(lease_until + INTERVAL ? MICROSECOND < UTC_TIMESTAMP(6)) AS passed FROM t_lock_log WHERE resource_id = ? AND status = 0',
    [DEFAULTS.leaseGraceMs * 1000, Buffer.from(resource)],
  )) as unknown as [[{ n: number; passed: string | null }]];
  return Number(row.n) > 0 && Number(row.passed) === Number(row.n);
}

/**
 * The child takes the job and is SIGSTOPped in its work; once its lease (lockAtMostFor) has passed on
 * the database clock, a reaper run releases its grant and the parent's run goes ahead; then the child
 * wakes and tries to commit.
 */
async function pausedPastAtMost(job: string, fence: 'on' | 'off') {
  await table();
  const child = startChild(job, fence);
  await child.taken;
  child.proc.kill('SIGSTOP');
  const parent = createLockManager({ knex: db.knex, owner: 'parent' });
  try {
    const refused = await parent.runExclusive(job, async () => 'ran', { lockAtMostFor: AT_MOST_MS });
    expect(refused).toEqual({ ran: false, heldBy: 'paused-child' });
    await expect.poll(() => leasePassed(job), { timeout: AT_MOST_MS + DEFAULTS.leaseGraceMs + 5_000 }).toBe(true);
    expect((await reapStaleGrants(db.knex, { staleAfterMs: 1_000 })).reaped).toBe(1);
    const next = await parent.runExclusive(
      job,
      async (trx) => {
        await trx.raw('INSERT INTO job_effects (tag) VALUES (?)', [`${job}:parent`]);
        return 'ran';
      },
      { lockAtMostFor: AT_MOST_MS },
    );
    expect(next).toEqual({ ran: true, value: 'ran' });
  } finally {
    child.proc.kill('SIGCONT');
  }
  child.proc.stdin!.write('go\n');
  const run = await child.exited;
  expect(run.code, run.stderr).toBe(0);
  return run.last;
}

describe('runExclusive', () => {
  it('runs the work in a fenced transaction and releases the grant in its commit', async () => {
    await table();
    const locks = createLockManager({ knex: db.knex, owner: 'a' });
    const result = await locks.runExclusive(
      'once',
      async (trx, grant) => {
        await trx.raw('INSERT INTO job_effects (tag) VALUES (?)', ['once:a']);
        return grant.resourceId;
      },
      { lockAtMostFor: 60_000 },
    );
    expect(result).toEqual({ ran: true, value: 'once' });
    expect(await effects('once')).toEqual(['once:a']);
    expect(await grantsOf('once')).toMatchObject([{ owner: 'a', status: 2, releasedBy: 1 }]);
  });

  it('answers { ran: false, heldBy } at once while another instance runs it, without waiting', async () => {
    const a = createLockManager({ knex: db.knex, owner: 'instance-a' });
    const b = createLockManager({ knex: db.knex, owner: 'instance-b' });
    let release!: () => void;
    const running = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const inWork = new Promise<void>((resolve) => (started = resolve));
    const first = a.runExclusive(
      'busy',
      async () => {
        started();
        await running;
        return 'a';
      },
      { lockAtMostFor: 60_000 },
    );
    await inWork;
    let ranB = false;
    const second = await b.runExclusive(
      'busy',
      async () => {
        ranB = true;
      },
      { lockAtMostFor: 60_000 },
    );
    expect(second).toEqual({ ran: false, heldBy: 'instance-a' });
    expect(ranB).toBe(false);
    release();
    expect(await first).toEqual({ ran: true, value: 'a' });
    expect(await b.runExclusive('busy', async () => 'b', { lockAtMostFor: 60_000 })).toEqual({ ran: true, value: 'b' });
  });

  it('{ grant: true } runs work(grant) for another ORM, fenced by grant.fence()', async () => {
    await table();
    const locks = createLockManager({ knex: db.knex });
    const result = await locks.runExclusive(
      'orm',
      (grant) =>
        db.knex.transaction(async (trx) => {
          await trx.raw('INSERT INTO job_effects (tag) VALUES (?)', ['orm:a']);
          await grant.fence(fromKnex(trx));
          return grant.id;
        }),
      { lockAtMostFor: 60_000, grant: true },
    );
    expect(result.ran).toBe(true);
    expect(await effects('orm')).toEqual(['orm:a']);
    expect(await grantsOf('orm')).toMatchObject([{ status: 2, releasedBy: 1 }]);
  });

  it('a run paused past lockAtMostFor commits nothing once the reaper released its grant; the next run goes ahead', async () => {
    const last = await pausedPastAtMost('paused', 'on');
    expect(last).toEqual({ outcome: 'error: LockLostError' });
    expect(await effects('paused')).toEqual(['paused:parent']);
    expect((await grantsOf('paused')).map((g) => [g.owner, g.releasedBy])).toEqual([
      ['paused-child', 2],
      ['parent', 1],
    ]);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('negative control: the same job under a plain grant, committed without a fence, commits late and runs twice', async () => {
    const last = await pausedPastAtMost('unfenced', 'off');
    expect(last).toEqual({ outcome: 'committed' });
    expect(await effects('unfenced')).toEqual(['unfenced:child', 'unfenced:parent']);
  });
});

describe('lockAtLeastFor', () => {
  const AT_LEAST_MS = 2_000;

  it('keeps the grant after a fast run until lockAtLeastFor has passed on the database clock', async () => {
    await table();
    const a = createLockManager({ knex: db.knex, owner: 'fast' });
    const b = createLockManager({ knex: db.knex, owner: 'late' });
    const options = { lockAtMostFor: 60_000, lockAtLeastFor: AT_LEAST_MS };
    const run = await a.runExclusive(
      'daily',
      async (trx) => {
        await trx.raw('INSERT INTO job_effects (tag) VALUES (?)', ['daily:fast']);
        return 'done';
      },
      options,
    );
    expect(run).toEqual({ ran: true, value: 'done' });
    expect(await effects('daily')).toEqual(['daily:fast']); // committed at once
    // An instance a little late for the same fire finds the job still held.
    expect(await b.runExclusive('daily', async () => 'again', options)).toEqual({ ran: false, heldBy: 'fast' });
    // The run's commit released the job's grant and handed the hold to a successor with the same grant
    // time (src/sql/hand-over.ts), released once lockAtLeastFor has passed.
    await expect.poll(async () => (await grantsOf('daily'))[1]?.status, { timeout: AT_LEAST_MS + 5_000 }).toBe(2);
    const [job, hold] = await grantsOf('daily');
    expect(job).toMatchObject({ owner: 'fast', releasedBy: 1 });
    expect(hold).toMatchObject({ owner: 'fast', releasedBy: 1 });
    console.log(`[jobs] lockAtLeastFor ${AT_LEAST_MS} ms: held ${hold!.heldUs! / 1000} ms on the database clock`);
    expect(hold!.heldUs).toBeGreaterThanOrEqual(AT_LEAST_MS * 1000);
    expect(await b.runExclusive('daily', async () => 'next', options)).toEqual({ ran: true, value: 'next' });
    // close() waits for b's hold after its run, so that no later test sees it end.
    await Promise.all([a.close(), b.close()]);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('negative control: without lockAtLeastFor the late instance runs the same fire again', async () => {
    const a = createLockManager({ knex: db.knex, owner: 'fast' });
    const b = createLockManager({ knex: db.knex, owner: 'late' });
    expect(await a.runExclusive('hourly', async () => 'done', { lockAtMostFor: 60_000 })).toEqual({
      ran: true,
      value: 'done',
    });
    expect(await b.runExclusive('hourly', async () => 'again', { lockAtMostFor: 60_000 })).toEqual({
      ran: true,
      value: 'again',
    });
  });
});

describe('runExclusive: bad input', () => {
  const work = async (): Promise<number> => 1;
  const cases: Array<[string, (l: ReturnType<typeof createLockManager>) => Promise<unknown>, RegExp]> = [
    ['no options', (l) => Reflect.apply(l.runExclusive, l, ['job', work]) as Promise<unknown>, /^lockAtMostFor/],
    ['no lockAtMostFor', (l) => l.runExclusive('job', work, {} as never), /^lockAtMostFor: runExclusive needs it/],
    ['negative lockAtMostFor', (l) => l.runExclusive('job', work, { lockAtMostFor: -1 }), /^lockAtMostFor must/],
    ['NaN lockAtMostFor', (l) => l.runExclusive('job', work, { lockAtMostFor: NaN }), /^lockAtMostFor must/],
    ['too large', (l) => l.runExclusive('job', work, { lockAtMostFor: 2 ** 31 }), /^lockAtMostFor must/],
    [
      'lockAtLeastFor above lockAtMostFor',
      (l) => l.runExclusive('job', work, { lockAtMostFor: 1_000, lockAtLeastFor: 1_001 }),
      /^lockAtLeastFor must be an integer from 0 to 1000/,
    ],
    ['leaseMs too small', (l) => l.runExclusive('job', work, { lockAtMostFor: 1_000, leaseMs: 1 }), /^leaseMs/],
    [
      'unknown option',
      (l) => l.runExclusive('job', work, { lockAtMostFor: 1_000, waitMs: 5 } as never),
      /^waitMs: unknown/,
    ],
    ['work not a function', (l) => l.runExclusive('job', 'work' as never, { lockAtMostFor: 1_000 }), /^work: /],
  ];
  it.each(cases)('%s: InvalidOptionsError naming the option, nothing written', async (_name, call, message) => {
    const locks = createLockManager({ knex: db.knex });
    const before = await snapshot(db.knex);
    const err = await call(locks).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(InvalidOptionsError);
    expect((err as Error).message).toMatch(message);
    expect(await snapshot(db.knex)).toBe(before);
  });

  it('an empty or too long job name: InvalidResourceIdError, as for any resource id, nothing written', async () => {
    const locks = createLockManager({ knex: db.knex });
    const before = await snapshot(db.knex);
    await expect(locks.runExclusive('', work, { lockAtMostFor: 1_000 })).rejects.toBeInstanceOf(InvalidResourceIdError);
    // With lockAtLeastFor too, the job holds its own resource only: the name's limit is any resource id's.
    await expect(
      locks.runExclusive('x'.repeat(256), work, { lockAtMostFor: 1_000, lockAtLeastFor: 1 }),
    ).rejects.toBeInstanceOf(InvalidResourceIdError);
    expect(await snapshot(db.knex)).toBe(before);
  });

  it('@Exclusive refuses a name no run could lock where the method is decorated, not at its runs', () => {
    const locks = createLockManager({ knex: db.knex });
    for (const [name, options] of [
      ['x'.repeat(256), { lockAtMostFor: 1_000 }],
      ['x'.repeat(256), { lockAtMostFor: 1_000, lockAtLeastFor: 1 }],
      ['', { lockAtMostFor: 1_000 }],
      ['\ud800', { lockAtMostFor: 1_000 }],
    ] as const)
      expect(() => Exclusive(name, { manager: locks, ...options })).toThrow(InvalidResourceIdError);
    // Control: the longest name that fits is decorated.
    expect(() => Exclusive('x'.repeat(255), { manager: locks, lockAtMostFor: 1_000 })).not.toThrow();
  });
});
