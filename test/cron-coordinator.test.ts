// node-cron's run coordinator: one task scheduled every second on 4 processes (real node-cron, real server)
// runs each of 10 fires exactly once (negative control: without the coordinator each fire runs on every
// process). shouldRun answers at once and claims a fire's key once: an instance asking after the first run
// released it does not run it again (negative control: a coordinator that only takes and releases the lock
// runs it twice). onComplete keeps the grant until lockAtLeastFor on the database clock; a crashed
// instance's grant goes to the reaper; and the rows one-fire keys leave go with the purge.
// covers: src/cron/index.ts, src/lock/scheduled/lock-at-least.ts
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type { RunCoordinator } from 'node-cron';
import { describe, expect, it } from 'vitest';
import { databaseUrl } from '../harness/database.js';
import { createLockManager, InvalidOptionsError, InvalidResourceIdError, type Grant } from '../src/index.js';
import { checkLockCounts, purgeReleasedGrants, reapStaleGrants } from '../src/admin/index.js';
import { query, withConnection } from '../src/sql/connection.js';
import { purgeIdleGates, purgeIdleResources } from '../src/sql/purge.js';
import { createRunCoordinator, fireResourceId } from '../src/cron/index.js';
import { resourceKey } from '../src/lock/durable/resource-id.js';
import { useTestDatabase } from './support/db.js';
import { backdate, invariantViolations, resourceRows, snapshot } from './support/state.js';

const db = useTestDatabase(import.meta.filename);
const REPO = join(import.meta.dirname, '..');
const INSTANCES = 4;
const FIRES = 10;

interface Instance {
  proc: ChildProcess;
  ready: Promise<void>;
  /** Resolves with the events it printed (missed and skipped fires) once it exits. */
  exited: Promise<{ code: number | null; events: Array<Record<string, string>>; stderr: string }>;
}

function startInstance(name: string, coordinator: 'on' | 'off'): Instance {
  const proc = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/cron-worker.ts'], {
    cwd: REPO,
    env: { ...process.env, MYSQL_URL: databaseUrl(db.url, db.name), INSTANCE: name, COORDINATOR: coordinator },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let onReady!: () => void;
  const ready = new Promise<void>((resolve) => (onReady = resolve));
  proc.stdout!.on('data', (d: Buffer) => {
    stdout += d.toString();
    if (stdout.includes('"ready":true')) onReady();
  });
  proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<{ code: number | null; events: Array<Record<string, string>>; stderr: string }>(
    (resolve) =>
      proc.on('close', (code) => {
        const events = stdout
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l) as Record<string, string>);
        resolve({ code, events, stderr });
      }),
  );
  return { proc, ready, exited };
}

async function runsByFire(): Promise<Map<string, string[]>> {
  const [rows] = (await db.knex.raw('SELECT fire, instance FROM cron_runs ORDER BY fire, instance')) as unknown as [
    Array<{ fire: string; instance: string }>,
  ];
  const byFire = new Map<string, string[]>();
  for (const r of rows) byFire.set(r.fire, [...(byFire.get(r.fire) ?? []), r.instance]);
  return byFire;
}

/**
 * Starts the instances, and once all are scheduled records the runs of the next FIRES fires (every
 * instance had its task scheduled for each of them), then stops the instances once two more fires have
 * come, so that every instance has decided on the last one counted. Returns, per fire, the instances
 * that ran it, how many reported it missed (a heartbeat more than a second late: node-cron's
 * tolerance, not the coordinator's decision) and how many were refused by the coordinator.
 */
async function tenFires(
  coordinator: 'on' | 'off',
): Promise<Array<{ fire: string; ran: string[]; missed: number; notElected: number }>> {
  await db.knex.raw('CREATE TABLE IF NOT EXISTS cron_runs (fire VARCHAR(32), instance VARCHAR(16)) ENGINE=InnoDB');
  await db.knex.raw('DELETE FROM cron_runs');
  const instances = Array.from({ length: INSTANCES }, (_, i) => startInstance(`i${i + 1}`, coordinator));
  let results: Awaited<Instance['exited']>[];
  let first = 0;
  try {
    await Promise.all(instances.map((i) => i.ready));
    first = (Math.floor(Date.now() / 1000) + 1) * 1000;
    const after = new Date(first + (FIRES + 1) * 1000).toISOString();
    await expect
      .poll(async () => [...(await runsByFire()).keys()].some((fire) => fire >= after), { timeout: 45_000 })
      .toBe(true);
  } finally {
    for (const i of instances) i.proc.kill('SIGTERM');
    results = await Promise.all(instances.map((i) => i.exited));
  }
  for (const r of results) expect(r.code, r.stderr).toBe(0);
  const events = results.flatMap((r) => r.events);
  expect(events.filter((e) => 'failed' in e || e.reason === 'coordinator-error')).toEqual([]);
  const byFire = await runsByFire();
  return Array.from({ length: FIRES }, (_, k) => {
    const fire = new Date(first + k * 1000).toISOString();
    return {
      fire,
      ran: byFire.get(fire) ?? [],
      missed: events.filter((e) => e.missed === fire).length,
      notElected: events.filter((e) => e.skipped === fire && e.reason === 'not-elected').length,
    };
  });
}

describe('node-cron on 4 processes, every second', () => {
  it('runs each of 10 fires exactly once with the run coordinator', async () => {
    const fires = await tenFires('on');
    console.log(
      `[cron] coordinated: ${fires.map((f) => `${f.fire.slice(17, 19)}s→${f.ran.join('+') || '-'}`).join(' ')}; missed ${fires.reduce((n, f) => n + f.missed, 0)}`,
    );
    for (const f of fires) {
      expect(f.ran, f.fire).toHaveLength(1);
      // The other instances asked and were refused (or node-cron reported the fire missed there).
      expect(f.notElected + f.missed, f.fire).toBe(INSTANCES - 1);
    }
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('negative control: without the coordinator each fire runs on every process', async () => {
    const fires = await tenFires('off');
    console.log(
      `[cron] uncoordinated: runs per fire ${fires.map((f) => f.ran.length).join(',')}; missed ${fires.reduce((n, f) => n + f.missed, 0)}`,
    );
    for (const f of fires) expect(f.ran.length, f.fire).toBe(INSTANCES - f.missed);
    expect(fires.reduce((n, f) => n + f.ran.length, 0)).toBeGreaterThan(FIRES);
  });
});

/** A coordinator that only takes the lock and releases it: the lock alone, without the claimed-once check. */
function lockOnlyCoordinator(locks: ReturnType<typeof createLockManager>): RunCoordinator {
  const held = new Map<string, Grant>();
  return {
    async shouldRun(key) {
      const grant = await locks.tryAcquireWrite(`cron:${key}`);
      if (grant) held.set(key, grant);
      return grant !== null;
    },
    async onComplete(key) {
      await held.get(key)?.release();
    },
  };
}

describe('createRunCoordinator', () => {
  const KEY = 'report:2026-11-27T03:00:00.000Z';

  it('shouldRun takes the fire key with a lease of ttlMs, answers others at once, and a fire is claimed once', async () => {
    const [a, b, late] = ['a', 'b', 'late'].map((owner) =>
      createRunCoordinator(createLockManager({ knex: db.knex, owner })),
    );
    expect(await a!.shouldRun(KEY, 30_000)).toBe(true);
    const [[row]] = (await db.knex.raw(
      'SELECT TIMESTAMPDIFF(MICROSECOND, create_time, lease_until) AS lease_us FROM t_lock_log WHERE resource_id = ? AND status = 0',
      [Buffer.from(`cron:${KEY}`)],
    )) as unknown as [[{ lease_us: string }]];
    expect(Number(row.lease_us)).toBeGreaterThanOrEqual(30_000_000);
    expect(await b!.shouldRun(KEY, 30_000)).toBe(false);
    await a!.onComplete!(KEY);
    // An instance whose timer fired late asks after the run released the key: the fire has run.
    expect(await late!.shouldRun(KEY, 30_000)).toBe(false);
    expect(await late!.shouldRun('report:2026-11-27T03:00:01.000Z', 30_000)).toBe(true);
    await late!.onComplete!('report:2026-11-27T03:00:01.000Z');
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('negative control: the lock alone, taken and released, runs the late instance again', async () => {
    const key = 'report:2026-11-27T04:00:00.000Z';
    const a = lockOnlyCoordinator(createLockManager({ knex: db.knex }));
    const late = lockOnlyCoordinator(createLockManager({ knex: db.knex }));
    expect(await a.shouldRun(key, 30_000)).toBe(true);
    await a.onComplete!(key);
    expect(await late.shouldRun(key, 30_000)).toBe(true);
    await late.onComplete!(key);
  });

  it('onComplete keeps the grant until lockAtLeastFor has passed on the database clock', async () => {
    const key = 'slow:2026-11-27T05:00:00.000Z';
    const coordinator = createRunCoordinator(createLockManager({ knex: db.knex }), { lockAtLeastFor: 2_000 });
    expect(await coordinator.shouldRun(key, 30_000)).toBe(true);
    await coordinator.onComplete!(key);
    const locks = createLockManager({ knex: db.knex });
    expect((await locks.inspect(`cron:${key}`)).live.write).toBe(1);
    await expect.poll(async () => (await locks.inspect(`cron:${key}`)).live.write).toBe(0);
    const [[row]] = (await db.knex.raw(
      'SELECT released_by, TIMESTAMPDIFF(MICROSECOND, create_time, released_at) AS held_us FROM t_lock_log WHERE resource_id = ?',
      [Buffer.from(`cron:${key}`)],
    )) as unknown as [[{ released_by: number; held_us: string }]];
    console.log(`[cron] lockAtLeastFor 2000 ms: held ${Number(row.held_us) / 1000} ms on the database clock`);
    expect(Number(row.released_by)).toBe(1);
    expect(Number(row.held_us)).toBeGreaterThanOrEqual(2_000_000);
  });

  it("a crashed instance's grant (shouldRun, never onComplete) goes to the reaper", async () => {
    const key = 'crash:2026-11-27T06:00:00.000Z';
    const locks = createLockManager({ knex: db.knex });
    expect(await createRunCoordinator(locks).shouldRun(key, 1_000)).toBe(true);
    const grant = (await locks.inspect(`cron:${key}`)).holders[0]!;
    await backdate(db.knex, grant.id, 3_600_000);
    await expect
      .poll(async () => (await reapStaleGrants(db.knex, { staleAfterMs: 60_000 })).grants.map((g) => g.id))
      .toContain(grant.id);
  });

  it('a task name too long for a resource id runs its fires, each once, on a fixed-length id of its own', async () => {
    const name = 'n'.repeat(300);
    const keys = [`${name}:2026-11-27T07:00:00.000Z`, `${name}:2026-11-27T07:00:01.000Z`];
    const [a, b] = ['long-a', 'long-b'].map((owner) =>
      createRunCoordinator(createLockManager({ knex: db.knex, owner })),
    );
    for (const key of keys) {
      // Not vacuous: the id the coordinator would make of it as it stands is refused.
      expect(() => resourceKey(`cron:${key}`)).toThrow(InvalidResourceIdError);
      expect(await a!.shouldRun(key, 30_000)).toBe(true);
      expect(await b!.shouldRun(key, 30_000)).toBe(false);
      await a!.onComplete!(key);
      expect(await b!.shouldRun(key, 30_000)).toBe(false);
    }
    const ids = keys.map((key) => fireResourceId('cron:', key));
    expect(new Set(ids).size).toBe(2);
    for (const id of ids) {
      expect(id).toMatch(/^cron:sha256:[0-9a-f]{64}$/);
      // The fire's own grants: a's run, then b's ask after it, released unrun.
      const { grants } = await createLockManager({ knex: db.knex }).history(id);
      expect(grants.map((g) => g.owner).sort()).toEqual(['long-a', 'long-b']);
    }
    // A key that fits keeps its id as it was.
    expect(fireResourceId('cron:', KEY)).toBe(`cron:${KEY}`);
  });

  it('refuses bad options and a bad ttlMs with InvalidOptionsError, nothing written', async () => {
    const locks = createLockManager({ knex: db.knex });
    const before = await snapshot(db.knex);
    expect(() => createRunCoordinator(locks, { lockAtLeastFor: -1 })).toThrow(/^lockAtLeastFor must/);
    expect(() => createRunCoordinator(locks, { prefix: '' })).toThrow(/^prefix must/);
    expect(() => createRunCoordinator(locks, { ttl: 5 } as never)).toThrow(/^ttl: unknown option/);
    expect(() => createRunCoordinator({} as never)).toThrow(InvalidOptionsError);
    await expect(createRunCoordinator(locks).shouldRun('k', NaN)).rejects.toThrow(/^ttlMs must/);
    await expect(createRunCoordinator(locks).shouldRun('k', 0)).rejects.toBeInstanceOf(InvalidOptionsError);
    expect(await snapshot(db.knex)).toBe(before);
  });
});

describe('the rows one-fire keys leave', () => {
  const DAY_MS = 86_400_000;
  const gates = async (prefix: string): Promise<string[]> => {
    const [rows] = (await db.knex.raw('SELECT resource_id FROM t_lock_gate ORDER BY resource_id')) as unknown as [
      Array<{ resource_id: Buffer }>,
    ];
    return rows.map((r) => r.resource_id.toString('utf8')).filter((id) => id.startsWith(prefix));
  };

  it('go with the purge after the retention period: the log rows and the resource rows nothing holds', async () => {
    const locks = createLockManager({ knex: db.knex });
    const coordinator = createRunCoordinator(locks, { prefix: 'purge:' });
    const fires = ['t:2026-11-01T00:00:00.000Z', 't:2026-11-01T00:00:01.000Z', 't:2026-11-01T00:00:02.000Z'];
    for (const key of fires) {
      expect(await coordinator.shouldRun(key, 30_000)).toBe(true);
      await coordinator.onComplete!(key);
    }
    // A key still held, and one used again since, keep their rows; a fresh key keeps its history.
    const held = await locks.acquireWrite('purge:held');
    const again = await locks.acquireWrite('purge:again');
    await again.release();
    await db.knex.raw(
      `UPDATE t_lock_log SET create_time = create_time - INTERVAL 2 DAY,
         released_at = released_at - INTERVAL 2 DAY WHERE resource_id LIKE 'purge:%'`,
    );
    const fresh = await locks.acquireWrite('purge:again');
    await fresh.release();
    const result = await purgeReleasedGrants(db.knex, { retentionMs: DAY_MS });
    expect(result).toEqual({ purged: 4, resources: 3 });
    const left = (await resourceRows(db.knex)).filter((r) => r.resource.startsWith('purge:')).map((r) => r.resource);
    expect(left).toEqual(['purge:again', 'purge:held']);
    // The fires' gates went with their resource rows; the two ids still in use keep theirs.
    expect(await gates('purge:')).toEqual(['purge:again', 'purge:held']);
    expect((await locks.history('purge:again')).grants.map((g) => g.id)).toEqual([fresh.id]);
    expect((await locks.inspect('purge:held')).holders.map((h) => h.id)).toEqual([held.id]);
    expect(await held.release()).toBe(true);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('a purge racing acquires of the same key leaves the counts right and every acquire granted', async () => {
    const locks = createLockManager({ knex: db.knex });
    let stop = false;
    let rowsPurged = 0;
    const purging = (async () => {
      while (!stop) rowsPurged += (await purgeReleasedGrants(db.knex, { retentionMs: 1 })).resources;
    })();
    try {
      for (let i = 0; i < 100; i++) {
        const grant = await locks.tryAcquireWrite('purge:race');
        expect(grant, `attempt ${i}`).not.toBeNull();
        // A resource row deleted under a live grant would leave its release nothing to give back.
        expect(await grant!.release(), `release ${i}`).toBe(true);
        // Pacing, not a wait for a condition: released rows older than the 1 ms retention let the purge in between.
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
    } finally {
      stop = true;
      await purging;
    }
    console.log(`[cron] the key's resource row was purged and created again ${rowsPurged} times`);
    expect(await invariantViolations(db.knex)).toEqual([]);
    expect((await checkLockCounts(db.knex)).disagreements).toEqual([]);
  });

  /** Runs `body` while another transaction holds `id`'s gate, as an acquire or a section in flight does. */
  const whileGateHeld = <T>(id: string, body: () => Promise<T>): Promise<T> =>
    db.knex.transaction(async (trx) => {
      await trx.raw('SELECT 1 FROM t_lock_gate WHERE resource_id = ? FOR UPDATE', [id]);
      return body();
    });
  /** A released grant of `id` created and released two days ago. */
  const oldGrant = async (id: string): Promise<void> => {
    await (await createLockManager({ knex: db.knex }).acquireRead(id)).release();
    await db.knex.raw(
      `UPDATE t_lock_log SET create_time = create_time - INTERVAL 2 DAY,
         released_at = released_at - INTERVAL 2 DAY WHERE resource_id = ?`,
      [id],
    );
  };

  it('leaves a gate that another transaction holds for a later purge, without waiting for it', async () => {
    const id = 'purge:gate-held';
    await oldGrant(id);
    expect(await gates(id)).toEqual([id]);
    // The old grant and the idle resource row go; the held gate stays, and the purge returned while it was held.
    const result = await whileGateHeld(id, () => purgeReleasedGrants(db.knex, { retentionMs: DAY_MS }));
    expect(result).toEqual({ purged: 1, resources: 1 });
    expect(await gates(id)).toEqual([id]);
    // While a purge holds the gate (between its take and its commit), a try of the free id answers null
    // (api.md, rule 1); the refused try leaves the id as idle as it found it.
    const locks = createLockManager({ knex: db.knex });
    expect(await whileGateHeld(id, () => locks.tryAcquireWrite(id))).toBeNull();
    // Nothing holds it now: the purge of idle gates deletes it.
    expect(await withConnection(db.knex, (conn) => purgeIdleGates(conn, [Buffer.from(id)]))).toBe(1);
    expect(await gates(id)).toEqual([]);
    // Used again, the id makes its gate and rows anew, as on first use.
    const grant = await locks.tryAcquireWrite(id);
    expect(grant).not.toBeNull();
    expect(await gates(id)).toEqual([id]);
    expect(await grant!.release()).toBe(true);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('negative control: taking the gates without SKIP LOCKED waits for the holder (1205 within a 1 s lock wait)', async () => {
    const id = 'purge:gate-held-control';
    await oldGrant(id);
    await db.knex.raw('DELETE FROM t_read_write_lock WHERE resource_id = ?', [id]);
    const err = await whileGateHeld(id, () =>
      withConnection(db.knex, async (conn) => {
        await query(conn, 'SET SESSION innodb_lock_wait_timeout = 1');
        try {
          return await purgeIdleGates(conn, [Buffer.from(id)], false);
        } finally {
          await query(conn, 'SET SESSION innodb_lock_wait_timeout = DEFAULT');
        }
      }).then(
        () => undefined,
        (e: unknown) => e,
      ),
    );
    expect((err as { errno?: number } | undefined)?.errno).toBe(1205);
    expect(await gates(id)).toEqual([id]);
  });

  it("keeps a held resource's row (negative control: deleted without the guard, its holder's release finds nothing)", async () => {
    const locks = createLockManager({ knex: db.knex });
    const purgeRows = (id: string) => withConnection(db.knex, (conn) => purgeIdleResources(conn, [Buffer.from(id)]));
    const guarded = await locks.acquireWrite('purge:guarded');
    expect(await purgeRows('purge:guarded')).toBe(0);
    expect(await guarded.release()).toBe(true);
    expect(await purgeRows('purge:guarded')).toBe(0); // its grant is still in the log
    const unguarded = await locks.acquireWrite('purge:unguarded');
    await db.knex.raw("DELETE FROM t_read_write_lock WHERE resource_id = 'purge:unguarded'");
    expect((await checkLockCounts(db.knex)).disagreements).toMatchObject([
      { resourceId: 'purge:unguarded', rowMissing: true },
    ]);
    expect(await unguarded.release()).toBe(false);
    await db.knex.raw("UPDATE t_lock_log SET status = 2 WHERE resource_id = 'purge:unguarded'");
  });
});
