// maintenance: true runs the reaper's sweep inside the application: stale grants of resources that no
// one asks for again are reaped with no reaper process, one sweep at a time across managers (each
// sweep holds the write grant of MAINTENANCE_RESOURCE), and close() stops it. Control: sweeps run
// without that grant overlap.
// covers: src/lock/scheduled/maintenance.ts, src/admin/reap-and-purge.ts
import { afterEach, describe, expect, it } from 'vitest';
import { createLockManager, InvalidOptionsError, type LockManager } from '../src/index.js';
import { MAINTENANCE_RESOURCE } from '../src/options.js';
import { testSwitches } from '../src/test-switches.js';
import { useTestDatabase } from './support/db.js';
import { backdate, grantRow, invariantViolations } from './support/state.js';

const db = useTestDatabase(import.meta.filename);
const CUTOFF_MS = 60_000;
const managers: LockManager[] = [];

afterEach(async () => {
  endWatch?.();
  endWatch = undefined;
  await Promise.all(managers.splice(0).map((m) => m.close()));
  testSwitches.maintenance.during = undefined;
  testSwitches.maintenance.refused = undefined;
  testSwitches.maintenance.noGate = false;
});

function sweeper(owner: string, staleAfterMs = CUTOFF_MS): LockManager {
  const m = createLockManager({ knex: db.knex, owner, staleAfterMs, maintenance: { intervalMs: 100, retentionMs: 0 } });
  managers.push(m);
  return m;
}

/** A grant that a crashed process left on a resource no one asks for again, older than the cutoff. */
async function abandoned(resource: string): Promise<number> {
  const dead = createLockManager({ knex: db.knex, owner: 'crashed' });
  const grant = (await dead.tryAcquireWrite(resource))!;
  await backdate(db.knex, grant.id, 11 * 60_000);
  return grant.id;
}

/**
 * Counts sweeps running at once: each sweep stays open until another manager's sweep is refused
 * the grant (one at a time) or another sweep runs beside it (the control), or the test ends.
 */
function watchSweeps(): { most: () => number; sweeps: () => number; refusals: () => number } {
  let active = 0;
  let most = 0;
  let sweeps = 0;
  let refusals = 0;
  let done = false;
  const waiters = new Set<() => void>();
  const wakeAll = (): void => {
    for (const w of waiters) w();
    waiters.clear();
  };
  testSwitches.maintenance.refused = () => {
    refusals++;
    wakeAll();
  };
  testSwitches.maintenance.during = async () => {
    sweeps++;
    most = Math.max(most, ++active);
    wakeAll();
    const before = refusals;
    while (!done && active < 2 && refusals === before) await new Promise<void>((resolve) => waiters.add(resolve));
    active--;
  };
  endWatch = () => {
    done = true;
    wakeAll();
  };
  return { most: () => most, sweeps: () => sweeps, refusals: () => refusals };
}
let endWatch: (() => void) | undefined;

describe('maintenance: true', () => {
  it('reaps stale grants with no reaper process, one sweep at a time across two managers', async () => {
    const ids = [await abandoned('nobody-a'), await abandoned('nobody-b')];
    const watch = watchSweeps();
    sweeper('sweeper-1');
    sweeper('sweeper-2');
    await expect.poll(() => watch.sweeps(), { timeout: 30_000 }).toBeGreaterThanOrEqual(4);
    for (const id of ids) expect(await grantRow(db.knex, id)).toMatchObject({ status: 2, released_by: 2 });
    expect(watch.most()).toBe(1);
    expect(watch.refusals()).toBeGreaterThanOrEqual(1);
    expect(await invariantViolations(db.knex)).toEqual([]);
  });

  it('negative control: sweeps without the maintenance grant run two at a time', async () => {
    testSwitches.maintenance.noGate = true;
    const watch = watchSweeps();
    sweeper('ungated-1');
    sweeper('ungated-2');
    await expect.poll(() => watch.most(), { timeout: 30_000 }).toBe(2);
  });

  it('a sweeper that died holding the sweep’s grant does not stop the sweeps, even with selfHeal: false', async () => {
    const dead = createLockManager({ knex: db.knex, owner: 'dead-sweeper' });
    const gate = (await dead.tryAcquireWrite(MAINTENANCE_RESOURCE))!;
    await backdate(db.knex, gate.id, 11 * 60_000);
    const watch = watchSweeps();
    const m = createLockManager({
      knex: db.knex,
      owner: 'no-heal-sweeper',
      staleAfterMs: CUTOFF_MS,
      selfHeal: false,
      maintenance: { intervalMs: 100, retentionMs: 0 },
    });
    managers.push(m);
    await expect.poll(() => watch.sweeps(), { timeout: 30_000 }).toBeGreaterThanOrEqual(1);
    expect(await grantRow(db.knex, gate.id)).toMatchObject({ status: 2, released_by: 2 });
  });

  it('uses the manager’s cutoff: a grant younger than it is left for a later sweep', async () => {
    const id = await abandoned('young-for-an-hour');
    const watch = watchSweeps();
    sweeper('hour-cutoff', 3_600_000);
    sweeper('hour-cutoff-2', 3_600_000);
    await expect.poll(() => watch.sweeps(), { timeout: 30_000 }).toBeGreaterThanOrEqual(2);
    expect(await grantRow(db.knex, id)).toMatchObject({ status: 0 });
    await db.knex.raw('UPDATE t_lock_log SET status = 2 WHERE id = ?', [id]);
    await db.knex.raw("UPDATE t_read_write_lock SET w_count = 0 WHERE resource_id = 'young-for-an-hour'");
  });

  it('close() waits for the sweep in progress, and no sweep starts after it', async () => {
    let release: (() => void) | undefined;
    let inSweep: (() => void) | undefined;
    const entered = new Promise<void>((resolve) => (inSweep = resolve));
    let sweeps = 0;
    testSwitches.maintenance.during = () => {
      sweeps++;
      inSweep?.();
      return new Promise<void>((resolve) => (release = resolve));
    };
    const m = createLockManager({ knex: db.knex, maintenance: { intervalMs: 100, retentionMs: 0 } });
    await entered;
    let closed = false;
    const closing = m.close().then(() => (closed = true));
    // The sweep still holds its grant: close() has not resolved.
    expect((await m.inspect(MAINTENANCE_RESOURCE).catch(() => null)) ?? null).toBeNull(); // closed: refused
    expect(closed).toBe(false);
    release!();
    await closing;
    expect(sweeps).toBe(1);
    const { live } = await createLockManager({ knex: db.knex }).inspect(MAINTENANCE_RESOURCE);
    expect(live).toEqual({ write: 0, read: 0 });
  });

  it('its options are validated, with nothing started', () => {
    for (const [maintenance, message] of [
      [{ intervalMs: 10 }, /^maintenance\.intervalMs must be an integer from 100/],
      [{ retentionMs: -1 }, /^maintenance\.retentionMs must be an integer from 0/],
      [{ every: 1 }, /unknown option of maintenance/],
      ['yes', /options of maintenance must be an object/],
    ] as const)
      expect(() => createLockManager({ knex: db.knex, maintenance: maintenance as never })).toThrow(
        expect.objectContaining({ name: InvalidOptionsError.name, message: expect.stringMatching(message) }),
      );
  });
});
