import type { Knex } from 'knex';
import type { DurableGrant } from '../durable/grant.js';
import { keepLeaseAhead } from '../durable/lease.js';
import { purgeReleasedGrants, reapStaleGrants } from '../../admin/reap-and-purge.js';
import { LIMITS, MAINTENANCE_RESOURCE } from '../../options.js';
import { testSwitches } from '../../test-switches.js';

/** What a sweep needs of its manager: one attempt at a write grant. */
export interface MaintenanceSteps {
  knex: Knex;
  owner: string;
  staleAfterMs: number;
  intervalMs: number;
  retentionMs: number;
  tryWrite(resourceId: string): Promise<DurableGrant | null>;
  /**
   * Releases the resource's stale grants as a self-healing acquire does, even with `selfHeal:
   * false`: a sweeper that died holding the sweep's grant must not stop every sweep after it.
   */
  heal(resourceId: string): Promise<boolean>;
}

/** How long the sweep's grant is kept ahead while it runs: a live sweeper is never healed away. */
const SWEEP_LEASE_MS = 60_000;

/**
 * `maintenance: true`: the reaper's sweep in-process. Every `intervalMs` (from the end of one sweep;
 * the first at once), one attempt at the write grant of MAINTENANCE_RESOURCE: refused, another
 * process sweeps now and this one waits for its next turn; granted, `reapStaleGrants` with the
 * manager's `staleAfterMs`, then `purgeReleasedGrants` (unless `retentionMs` is 0), the grant's
 * lease kept ahead meanwhile, then the grant released. A sweeper that dies leaves its grant, which
 * goes stale after the cutoff and is healed by the next process's attempt (even with `selfHeal:
 * false`). A failed sweep is a process warning, once per distinct message in a row. Its timers do
 * not keep the process alive.
 */
export class MaintenanceLoop {
  readonly #steps: MaintenanceSteps;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #stopped = false;
  #lastWarning: string | undefined;

  constructor(steps: MaintenanceSteps) {
    this.#steps = steps;
    this.#schedule(0);
  }

  /** Stops the loop: no sweep starts from now on, and the one running (if any) is waited for. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running;
  }

  #schedule(ms: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#running = this.#sweep().finally(() => {
        this.#running = undefined;
        this.#schedule(this.#steps.intervalMs);
      });
    }, ms);
    this.#timer.unref();
  }

  async #sweep(): Promise<void> {
    const s = this.#steps;
    try {
      let gate = testSwitches.maintenance.noGate ? undefined : await s.tryWrite(MAINTENANCE_RESOURCE);
      if (gate === null && (await s.heal(MAINTENANCE_RESOURCE))) gate = await s.tryWrite(MAINTENANCE_RESOURCE);
      if (gate === null) {
        testSwitches.maintenance.refused?.();
        return;
      }
      const keepAlive =
        gate === undefined
          ? undefined
          : keepLeaseAhead(gate, Math.max(LIMITS.minLeaseMs, Math.min(SWEEP_LEASE_MS, s.staleAfterMs)));
      try {
        await keepAlive?.first;
        await testSwitches.maintenance.during?.();
        const reap = await reapStaleGrants(s.knex, { staleAfterMs: s.staleAfterMs });
        if (s.retentionMs > 0) await purgeReleasedGrants(s.knex, { retentionMs: s.retentionMs });
        if (reap.failed > 0) this.#warn(`maintenance sweep could not reap: ${reap.problems.join('; ')}`);
        else this.#lastWarning = undefined;
      } finally {
        keepAlive?.stop();
        await gate?.release();
      }
    } catch (err) {
      this.#warn(`maintenance sweep failed: ${(err as Error).message ?? String(err)}`);
    }
  }

  #warn(message: string): void {
    if (message === this.#lastWarning) return;
    this.#lastWarning = message;
    process.emitWarning(`mysql-rwlock (${this.#steps.owner}): ${message}`, { type: 'MysqlRwlockWarning' });
  }
}
