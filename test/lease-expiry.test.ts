// A lease expires as the caller chose: a grant taken with a lease (leaseMs, permits with a lease,
// runExclusive's lockAtMostFor, node-cron's ttlMs) turns stale DEFAULTS.leaseGraceMs after its lease
// runs out, whatever the manager's staleAfterMs; a grant without one keeps the cutoff. Each form's
// holder is a real process, SIGKILLed; another takes the resource with no reaper and the default
// cutoff, never before the lease and the grace have passed on the database clock (negative control: a
// heal that judges by age alone, the verdict of the former rule on a young grant, leaves a dead node's
// job held). A holder paused past its lease commits nothing once the resource was taken elsewhere.
// covers: src/sql/decision.ts, src/sql/heal.ts, src/lock/durable/heal-stale.ts, src/lock/durable/lease.ts
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { databaseUrl } from '../harness/database.js';
import { createLockManager, DEFAULTS, type Grant, type LockManager } from '../src/index.js';
import { reapStaleGrants } from '../src/admin/index.js';
import { testSwitches } from '../src/test-switches.js';
import { useTestDatabase } from './support/db.js';
import { backdate, invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);
const REPO = join(import.meta.dirname, '..');
/** How often the survivor tries. */
const PERIOD_MS = 200;
/**
 * What the bounds allow beyond the lease, the grace and one period: the replies a busy 2-core
 * machine may be slow with (the holder's grant reaching it before its lease is first set, one try).
 */
const SLACK_MS = 2_000;

interface Child {
  proc: ChildProcess;
  taken: Promise<number>;
  exited: Promise<{ code: number | null; last: unknown; stderr: string }>;
}

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  testSwitches.heal.ageOnly = false;
});

function startChild(script: string, env: Record<string, string>): Child {
  const proc = spawn(process.execPath, ['--import', 'tsx', script], {
    cwd: REPO,
    env: { ...process.env, MYSQL_URL: databaseUrl(db.url, db.name), ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.push(proc);
  let stdout = '';
  let stderr = '';
  let onTaken!: (id: number) => void;
  const taken = new Promise<number>((resolve) => (onTaken = resolve));
  proc.stdout!.on('data', (d: Buffer) => {
    stdout += d.toString();
    const line = stdout.split('\n').find((l) => l.includes('"taken":true'));
    if (line) onTaken(Number((JSON.parse(line) as { id?: number }).id ?? 0));
  });
  proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<{ code: number | null; last: unknown; stderr: string }>((resolve) =>
    proc.on('close', (code) => {
      const last = stdout.trim().split('\n').at(-1) ?? '';
      resolve({ code, last: last.startsWith('{') ? JSON.parse(last) : last, stderr });
    }),
  );
  void exited.then((e) => {
    if (e.code !== null && e.code !== 0) onTaken(Number.NaN);
  });
  return { proc, taken, exited };
}

/** A grant's times on the database clock, in ms since the epoch. */
async function times(id: number): Promise<{ created: number; leaseUntil: number | null; status: number }> {
  const [[row]] = (await db.knex.raw(
    `SELECT TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', create_time) AS c,
            TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', lease_until) AS l, status
       FROM t_lock_log WHERE id = ?`,
    [id],
  )) as unknown as [[{ c: string | number; l: string | number | null; status: number }]];
  return {
    created: Number(row.c) / 1000,
    leaseUntil: row.l === null ? null : Number(row.l) / 1000,
    status: row.status,
  };
}

async function dbNow(): Promise<number> {
  const [[row]] = (await db.knex.raw(
    "SELECT TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', UTC_TIMESTAMP(6)) AS n",
  )) as unknown as [[{ n: string | number }]];
  return Number(row.n) / 1000;
}

/** Tries every PERIOD_MS until `attempt` gives a grant id, or `deadline` (database clock) passes. */
async function tryUntil(attempt: () => Promise<number | null>, deadline: number): Promise<number | null> {
  for (;;) {
    const id = await attempt();
    if (id !== null) return id;
    if ((await dbNow()) > deadline) return null;
    await new Promise((resolve) => setTimeout(resolve, PERIOD_MS));
  }
}

/** The id of a grant the survivor took, released at once; null when it took none. */
async function released(grant: Grant | null): Promise<number | null> {
  if (grant === null) return null;
  expect(await grant.release()).toBe(true);
  return grant.id;
}

interface Form {
  form: 'write' | 'permit' | 'exclusive' | 'cron';
  leaseMs: number;
  resource: (name: string) => string;
  attempt: (locks: LockManager, name: string) => Promise<number | null>;
}

const FORMS: Form[] = [
  {
    form: 'write',
    leaseMs: 1_500,
    resource: (n) => n,
    attempt: async (locks, n) => released(await locks.tryAcquireWrite(n)),
  },
  {
    form: 'permit',
    leaseMs: 1_500,
    resource: (n) => n,
    attempt: async (locks, n) => released(await locks.tryAcquirePermit(n, { permits: 1 })),
  },
  {
    form: 'exclusive',
    leaseMs: 3_000,
    resource: (n) => n,
    attempt: async (locks, n) => {
      const r = await locks.runExclusive(n, async (_trx, grant) => grant.id, { lockAtMostFor: 3_000 });
      return r.ran ? r.value : null;
    },
  },
  {
    form: 'cron',
    leaseMs: 2_000,
    resource: (n) => `cron:${n}`,
    attempt: async (locks, n) => released(await locks.tryAcquireWrite(`cron:${n}`)),
  },
];

describe('a lease expires as the caller chose (no reaper, the default staleAfterMs)', () => {
  it.each(FORMS)(
    '$form: a SIGKILLed holder’s resource is taken elsewhere after its lease and the grace, never before',
    async ({ form, leaseMs, resource, attempt }) => {
      const name = `killed-${form}`;
      const child = startChild('test/fixtures/lease-holder.ts', {
        FORM: form,
        RESOURCE: name,
        LEASE_MS: String(leaseMs),
      });
      const dead = await child.taken;
      expect(dead, (await Promise.race([child.exited, Promise.resolve(null)]))?.stderr).toBeGreaterThan(0);
      child.proc.kill('SIGKILL');
      await child.exited;
      const survivor = createLockManager({ knex: db.knex, owner: 'survivor' });
      const held = await times(dead);
      const next = await tryUntil(
        () => attempt(survivor, name),
        held.created + leaseMs + DEFAULTS.leaseGraceMs + SLACK_MS + PERIOD_MS,
      );
      expect(next, `${form}: the resource is still held`).not.toBeNull();
      const after = await times(next!);
      const dying = await times(dead);
      // The lease the dead holder last wrote, then the grace: never taken before both have passed.
      expect(dying.leaseUntil).not.toBeNull();
      expect(after.created).toBeGreaterThanOrEqual(dying.leaseUntil! + DEFAULTS.leaseGraceMs);
      // Its lease was what the caller chose: at most the lease past the grant, and for the job lockAtMostFor.
      expect(dying.leaseUntil! - dying.created).toBeLessThanOrEqual(leaseMs + SLACK_MS);
      expect(after.created - dying.created).toBeLessThanOrEqual(leaseMs + DEFAULTS.leaseGraceMs + PERIOD_MS + SLACK_MS);
      expect(dying.status).toBe(2); // released, by the survivor's heal
      const { grants } = await survivor.history(resource(name), { limit: 5 });
      expect(grants.find((g) => g.id === dead)).toMatchObject({ releasedBy: 'reaper', releaser: 'survivor' });
      await survivor.close();
      expect(await invariantViolations(db.knex)).toEqual([]);
    },
  );

  it('negative control: a heal that judges by age alone leaves the dead node’s job held past lockAtMostFor', async () => {
    const name = 'killed-control';
    const child = startChild('test/fixtures/lease-holder.ts', { FORM: 'exclusive', RESOURCE: name, LEASE_MS: '3000' });
    const dead = await child.taken;
    expect(dead).toBeGreaterThan(0);
    child.proc.kill('SIGKILL');
    await child.exited;
    testSwitches.heal.ageOnly = true;
    const survivor = createLockManager({ knex: db.knex, owner: 'survivor' });
    const held = await times(dead);
    const attempt = FORMS.find((f) => f.form === 'exclusive')!.attempt;
    expect(
      await tryUntil(() => attempt(survivor, name), held.created + 3_000 + DEFAULTS.leaseGraceMs + SLACK_MS),
    ).toBeNull();
    testSwitches.heal.ageOnly = false;
    // The rule itself, from the reaper with its default cutoff: the grant is stale, and reaped.
    expect((await reapStaleGrants(db.knex)).grants.map((g) => g.id)).toEqual([dead]);
    await survivor.close();
  });
});

describe('a grant without a lease keeps the cutoff; a lease may take it past the cutoff', () => {
  it('an unleased grant is stale at the cutoff, a leased one however old is not until its lease ends', async () => {
    const locks = createLockManager({ knex: db.knex, staleAfterMs: 60_000 });
    const plain = (await locks.tryAcquireWrite('no-lease'))!;
    const leased = (await locks.tryAcquireWrite('long-lease'))!;
    expect(await leased.extend(600_000)).toBe(true);
    expect((await locks.inspect('no-lease')).holders[0]!.stale).toBe(false);
    await backdate(db.knex, plain.id, 61_000);
    await backdate(db.knex, leased.id, 3_600_000);
    expect((await locks.inspect('no-lease')).holders[0]!.stale).toBe(true);
    expect((await locks.inspect('long-lease')).holders[0]!.stale).toBe(false);
    const reaped = await reapStaleGrants(db.knex, { staleAfterMs: 60_000 });
    expect(reaped.grants.map((g) => g.id)).toEqual([plain.id]);
    expect(await leased.release()).toBe(true);
    await locks.close();
  });
});

describe('a holder paused past its lease', () => {
  it('commits nothing once its job ran elsewhere (no reaper, the default staleAfterMs)', async () => {
    await db.knex.raw('CREATE TABLE IF NOT EXISTS job_effects (tag VARCHAR(64) PRIMARY KEY) ENGINE=InnoDB');
    const job = 'paused-lease';
    const child = startChild('test/fixtures/exclusive-pause-worker.ts', { JOB: job, AT_MOST_MS: '1500', FENCE: 'on' });
    await child.taken;
    child.proc.kill('SIGSTOP');
    const parent = createLockManager({ knex: db.knex, owner: 'parent' });
    try {
      const paused = (await parent.inspect(job)).holders[0]!.id;
      const held = await times(paused);
      const ran = await tryUntil(
        async () => {
          const r = await parent.runExclusive(
            job,
            async (trx, grant) => {
              await trx.raw('INSERT INTO job_effects (tag) VALUES (?)', [`${job}:parent`]);
              return grant.id;
            },
            { lockAtMostFor: 1_500 },
          );
          return r.ran ? r.value : null;
        },
        held.created + 1_500 + DEFAULTS.leaseGraceMs + PERIOD_MS + SLACK_MS,
      );
      expect(ran).not.toBeNull();
      expect((await times(ran!)).created).toBeGreaterThanOrEqual(
        (await times(paused)).leaseUntil! + DEFAULTS.leaseGraceMs,
      );
    } finally {
      child.proc.kill('SIGCONT');
    }
    child.proc.stdin!.write('go\n');
    const run = await child.exited;
    expect(run.code, run.stderr).toBe(0);
    expect(run.last).toEqual({ outcome: 'error: LockLostError' });
    const [rows] = (await db.knex.raw('SELECT tag FROM job_effects WHERE tag LIKE ? ORDER BY tag', [
      `${job}:%`,
    ])) as unknown as [Array<{ tag: string }>];
    expect(rows.map((r) => r.tag)).toEqual([`${job}:parent`]);
    await parent.close();
    expect(await invariantViolations(db.knex)).toEqual([]);
  });
});
