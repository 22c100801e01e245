import { setTimeout as sleep } from 'node:timers/promises';
import type { LockContext } from '../context/lock-context.js';
import {
  DatabaseUnreachableError,
  InvalidOptionsError,
  LockAbortedError,
  LockTimeoutError,
  TransactionConflictError,
} from '../../errors.js';
import { isConflict, withConnection, type ConnectionWait } from '../../sql/connection.js';
import { conflictBackoffMs, unreachablePauseMs, waitedOut } from '../../sql/retry.js';
import { checkSchemaVersion } from '../../sql/schema-version.js';
import { detectSectionServer, type SectionServer } from '../../sql/section.js';
import { backoffDelay, type Ticket } from '../waiting/wait.js';
import { healStale } from '../durable/heal-stale.js';
import { onAbort } from '../../sql/abort.js';
import { attempt, type Outcome } from './section-attempt.js';
import { SectionTraces } from './section-traces.js';
import type { SectionOptions, SectionTarget, SectionWork } from './section-types.js';

export { SectionGrant } from './section-grant.js';
export type { SectionOptions, SectionTarget, SectionWork } from './section-types.js';

/**
 * Runs `work` as one one-commit section over `targets`, which the caller gives ALREADY SORTED by
 * `resource` bytes (Buffer.compare) and distinct: every section takes its rows in that one order,
 * so two sections never deadlock on each other. Throws InvalidOptionsError, with nothing done,
 * when they are not.
 *
 * In one transaction on one pooled connection: every target's gate is taken (shared by a reader
 * where the topology certifies shared locks, exclusive otherwise), then its lock row (a guarded
 * UPDATE; a shared reader reads the row without locking it, deciding on the same guard), one
 * `t_lock_log` row per target is written granted and released (`released_by = section`),
 * `work(trx, grants)` runs, and the transaction commits once. The counts never change, so nothing
 * is left held by a section that fails, times out, is aborted or whose process dies: its
 * transaction rolls back.
 *
 * Waiting: another section's lock is waited on in the take itself, ended at the deadline of
 * `waitMs` (LockTimeoutError) or by `signal` (LockAbortedError) with a KILL QUERY from a connection
 * of its own, awaited (see SectionWaits). A durable holder refuses the take: the transaction
 * rolls back (a writer first marks its writer intent, in a commit of its own, as a durable writer
 * does) and the section tries again with the durable acquire's backoff, woken early by a release in
 * this process. No connection to be had: tried again after growing pauses until the deadline
 * (DatabaseUnreachableError). A deadlock or certification conflict rolls the whole section back and
 * runs it again, `work` included (up to `deadlockRetries`, then TransactionConflictError). A
 * connection lost before the COMMIT was sent: ConnectionLostError. A COMMIT whose reply was lost is
 * settled by the first target's token: committed (the value is returned) or certainly not
 * (ConnectionLostError).
 */
export async function runSection<T>(
  ctx: LockContext,
  targets: readonly SectionTarget[],
  work: SectionWork<T>,
  options: SectionOptions,
): Promise<T> {
  checkTargets(targets);
  const { waitMs, signal } = options;
  if (signal?.aborted) throw new LockAbortedError(signal.reason);
  const traces = new SectionTraces(ctx, targets, waitMs);
  try {
    return await waitAndRun(ctx, targets, work, options, traces);
  } catch (err) {
    traces.failed(err);
    throw err;
  }
}

async function waitAndRun<T>(
  ctx: LockContext,
  targets: readonly SectionTarget[],
  work: SectionWork<T>,
  options: SectionOptions,
  traces: SectionTraces,
): Promise<T> {
  const { waitMs, signal } = options;
  const startedAt = performance.now();
  const deadline = startedAt + waitMs;
  const first = targets[0]!;
  const wait: ConnectionWait = {
    what: 'a section',
    deadline,
    ...(signal ? { signal } : {}),
    timeout: (why, on) => new LockTimeoutError(first.resourceId, first.mode, waitMs, on, why),
  };
  const { backoffMinMs, backoffMaxMs } = ctx.options;
  let ticket: Ticket | undefined;
  let conflicts = 0;
  let reached = false;
  let unreachable = 0;
  let lastUnreachable: DatabaseUnreachableError | undefined;
  try {
    for (let n = 0; ;) {
      if (signal?.aborted) throw new LockAbortedError(signal.reason);
      const seen = ticket?.epoch ?? 0;
      let outcome: Outcome<T>;
      try {
        await checkSchemaVersion(ctx.knex, wait);
        const server = await sectionServer(ctx, wait);
        outcome = await attempt(ctx, server, targets, work, options, deadline, traces);
        reached = true;
        unreachable = 0;
      } catch (err) {
        if (err instanceof LockTimeoutError && err.waitedFor === 'server' && lastUnreachable)
          throw new LockTimeoutError(first.resourceId, first.mode, waitMs, 'server', lastUnreachable);
        if (err instanceof DatabaseUnreachableError) {
          lastUnreachable = err;
          // Nothing was sent: try again after a growing pause, up to the deadline.
          const remaining = deadline - performance.now();
          if (remaining <= 0)
            throw new LockTimeoutError(first.resourceId, first.mode, waitMs, reached ? 'lock' : 'server', err);
          await pauseFor(Math.min(remaining, unreachablePauseMs(unreachable++)), signal);
          if (await waitedOut(deadline))
            throw new LockTimeoutError(first.resourceId, first.mode, waitMs, reached ? 'lock' : 'server', err);
          continue;
        }
        if (!isConflict(err)) throw err;
        if (++conflicts > ctx.policy.retries) throw new TransactionConflictError('the section', conflicts, err);
        await sleep(conflictBackoffMs(conflicts));
        continue;
      }
      if ('value' in outcome) {
        for (const t of targets) ctx.queues.wake(t.resource.toString('hex'));
        return outcome.value;
      }
      // The missing rows were created: decide again at once.
      if ('created' in outcome) continue;
      const t = outcome.refused;
      // Held by a crashed holder's stale grant: it frees itself here, and the section decides again.
      if (await healStale(ctx, t.resource, wait)) continue;
      const remaining = deadline - performance.now();
      if (remaining <= 0) throw new LockTimeoutError(t.resourceId, t.mode, waitMs);
      ticket ??= ctx.queues.join(t.resource.toString('hex'), t.mode);
      if (ticket.epoch !== seen) {
        n = 0;
        continue;
      }
      await ticket.pause(
        Math.min(remaining, backoffDelay(n++, backoffMinMs, backoffMaxMs, performance.now() - startedAt)),
        signal,
        seen,
      );
    }
  } finally {
    ticket?.leave(null);
  }
}

/** Sleeps `ms`, or rejects with LockAbortedError when `signal` aborts first. */
function pauseFor(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new LockAbortedError(signal.reason));
    const timer = setTimeout(() => {
      unsubscribe?.();
      resolve();
    }, ms);
    const unsubscribe = signal
      ? onAbort(signal, () => {
          clearTimeout(timer);
          reject(new LockAbortedError(signal.reason));
        })
      : undefined;
  });
}

function checkTargets(targets: readonly SectionTarget[]): void {
  if (targets.length === 0) throw new InvalidOptionsError('a section needs at least one resource');
  for (let i = 1; i < targets.length; i++)
    if (Buffer.compare(targets[i - 1]!.resource, targets[i]!.resource) >= 0)
      throw new InvalidOptionsError('the resources of a section must be distinct and sorted by their bytes');
}

function sectionServer(ctx: LockContext, wait: ConnectionWait): Promise<SectionServer> {
  const asked = (ctx.sections.server ??= withConnection(ctx.knex, detectSectionServer, wait));
  // A failed probe (server unreachable) is asked again by the next section.
  asked.catch(() => {
    if (ctx.sections.server === asked) ctx.sections.server = undefined;
  });
  return asked;
}
