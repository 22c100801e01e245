import type { LockContext } from '../context/lock-context.js';
import {
  isConflict,
  isConnectionLost,
  privilegeError,
  withConnection,
  type ConnectionWait,
} from '../../sql/connection.js';
import { agedSql, BUSY, reapCandidates, STALE_SQL } from '../../sql/reap.js';
import { resourceStaleness } from '../../sql/heal.js';
import { DatabaseUnreachableError, LockAbortedError, LockTimeoutError } from '../../errors.js';
import { testSwitches } from '../../test-switches.js';
import { DEFAULTS } from '../../options.js';

/**
 * How long a look that found no stale grant holds: until the first live grant's stale time, but
 * never past `DEFAULTS.leaseGraceMs`. Any grant's stale time can move earlier after the look: every
 * lease is set by an extension after the grant was taken (an unleased grant, stale at the cutoff,
 * turns stale `leaseGraceMs` after a short lease set a moment later), and an extension may shorten
 * a lease. None can turn stale sooner than the grace after the extension that set its lease.
 */
export function rememberedMs(nextInMs: number | null): number {
  return Math.min(nextInMs ?? DEFAULTS.leaseGraceMs, DEFAULTS.leaseGraceMs);
}

/** The reason a self-healing acquire notes with each grant it releases (`history()`'s `reason`). */
export const HEAL_REASON = 'self-healed by an acquire: stale (its lease run out, or past the cutoff without one)';

/** The reaper's test with the lease left out: the defect `testSwitches.heal.ageOnly` plants. */
const AGE_ONLY_SQL = agedSql();

interface HealState {
  /**
   * Per resource (hex), the `performance.now()` before which no live grant of it can be stale: the
   * first of them turns stale no sooner, and a lease set or shortened after the look turns its
   * grant stale no sooner than `DEFAULTS.leaseGraceMs` after it was set (see `rememberedMs`).
   */
  notBefore: Map<string, number>;
  /** Turned off for the manager when its user lacks a privilege the heal needs (warned once). */
  off: boolean;
  /** The last warning given: the same failure again (a resource whose counts disagree) is not repeated. */
  warned: string | undefined;
}

const states = new WeakMap<LockContext, HealState>();
/** Resources remembered per manager at most: past it the memory starts again (a look-up more, never a heal less). */
const MAX_REMEMBERED = 10_000;

function stateOf(ctx: LockContext): HealState {
  let s = states.get(ctx);
  if (s === undefined) {
    s = { notBefore: new Map(), off: false, warned: undefined };
    states.set(ctx, s);
  }
  return s;
}

/**
 * After a refused attempt: releases the resource's stale grants as the reaper would (the reaper's
 * test on the database clock, each grant locked and checked again live, stale and at the version
 * read, released as `reaper` with a note naming this manager and HEAL_REASON, its counts given
 * back, one transaction), so that the caller's next attempt, in the same call, can be granted.
 * True when it released one. Every row is taken NOWAIT: a row another transaction holds (a
 * committing fence, another heal or reap) ends the heal at once with nothing released, so a try
 * still answers at once. Off with the manager's `selfHeal: false`, unless `always` (the
 * maintenance sweep's own grant, which no reaper may be left to free).
 *
 * A failure is not the caller's: the attempt was refused, and that is its answer. A missing
 * privilege (the note's INSERT, which a user given an older version's `app` grants lacks) turns
 * healing off for the manager with one process warning; any other unexpected error is a process
 * warning too (not repeated while it stays the same).
 */
export async function healStale(
  ctx: LockContext,
  resource: Buffer,
  wait: ConnectionWait,
  always = false,
): Promise<boolean> {
  if (!ctx.options.selfHeal && !always) return false;
  const s = stateOf(ctx);
  const key = resource.toString('hex');
  const notBefore = s.notBefore.get(key);
  if (s.off || (notBefore !== undefined && performance.now() < notBefore)) return false;
  const staleUs = ctx.options.staleAfterMs * 1000;
  const staleSql = testSwitches.heal.ageOnly ? AGE_ONLY_SQL : STALE_SQL;
  try {
    return await withConnection(
      ctx.knex,
      async (conn) => {
        const seen = await resourceStaleness(conn, resource, staleUs, staleSql);
        if (seen.stale.length === 0) {
          if (s.notBefore.size >= MAX_REMEMBERED) s.notBefore.clear();
          const wait = testSwitches.heal.rememberToCutoff
            ? Math.min(seen.nextInMs ?? ctx.options.staleAfterMs, ctx.options.staleAfterMs)
            : rememberedMs(seen.nextInMs);
          s.notBefore.set(key, performance.now() + wait);
          return false;
        }
        s.notBefore.delete(key);
        const reaped = await reapCandidates(conn, seen.stale, staleUs, {
          nowait: true,
          note: { releaser: ctx.ownerBytes, reason: Buffer.from(HEAL_REASON, 'utf8') },
          staleSql,
        });
        return reaped !== BUSY && reaped.length > 0;
      },
      wait,
    );
  } catch (err) {
    // The caller's wait ended while the heal waited for a pool connection: the caller's answer.
    if (err instanceof LockAbortedError || err instanceof LockTimeoutError) throw err;
    const denied = privilegeError(err, ctx.acquirePath.statements ? 'app-no-procedures' : 'app');
    if (denied) {
      s.off = true;
      warn(s, `self-healing is off for manager ${ctx.options.owner}: ${denied.message}`);
    } else if (!(err instanceof DatabaseUnreachableError || isConnectionLost(err) || isConflict(err))) {
      warn(s, `a self-healing acquire failed, nothing was released: ${(err as Error).message ?? String(err)}`);
    }
    return false;
  }
}

function warn(s: HealState, message: string): void {
  if (message === s.warned) return;
  s.warned = message;
  process.emitWarning(`mysql-rwlock: ${message}`, { type: 'MysqlRwlockWarning' });
}
