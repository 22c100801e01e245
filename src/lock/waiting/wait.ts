import { LockAbortedError } from '../../errors.js';
import { onAbort } from '../../sql/abort.js';
import type { LockMode } from '../../types.js';

/**
 * Waiting acquirers of this process, one FIFO queue per resource.
 *
 * Only the head of a queue polls the database (with jittered backoff); the others sleep until they
 * become head. A grant of the resource released in this process wakes the head at once, so a local
 * hand-over costs one acquire round trip instead of a backoff interval, and 32 waiters put the load
 * of one poller on the database instead of 32. When the head is granted a read lock and the next
 * waiter also wants one, the next waiter tries at once as well (readers share).
 *
 * The queue only orders this process's waiters; between processes the database decides, and the
 * writer-intent mark (w_wait_until) keeps a stream of readers from starving a writer.
 */
class WaitQueue {
  readonly tickets: Ticket[] = [];
  constructor(
    readonly key: string,
    readonly owner: Map<string, WaitQueue>,
  ) {}
}

/**
 * The wait queues of one lock manager, so one database's waiters never queue behind another's
 * waiters for an equal resource id.
 */
export class WaitQueues {
  readonly #queues = new Map<string, WaitQueue>();

  /** Joins the local queue of a resource at its tail. */
  join(resourceHex: string, mode: LockMode): Ticket {
    let queue = this.#queues.get(resourceHex);
    if (!queue) this.#queues.set(resourceHex, (queue = new WaitQueue(resourceHex, this.#queues)));
    const ticket = new Ticket(queue, mode);
    queue.tickets.push(ticket);
    if (ticket.isHead) ticket.markHead();
    return ticket;
  }

  /**
   * Called when a grant of the resource ended in this process: the first waiter tries again at
   * once. Only the first: a released read grant cannot unblock waiting readers, so waking them all
   * would only send doomed attempts. When the first waiter is granted a read lock, it kicks the
   * readers behind it (see `Ticket.leave`).
   */
  wake(resourceHex: string): void {
    this.#queues.get(resourceHex)?.tickets[0]?.kick();
  }

  /** Whether a waiter of this manager is queued for the resource. */
  has(resourceHex: string): boolean {
    return this.#queues.has(resourceHex);
  }

  /** Waiters queued in this manager, by resource (hex); for tests and diagnostics. */
  get size(): number {
    return this.#queues.size;
  }
}

/**
 * Full-jitter exponential backoff, a random delay in [min, cap], where cap doubles per attempt up to
 * `maxMs` but never exceeds half the time already waited. A lock held for H ms is then seen free at
 * most ~H/2 late (on average ~H/4), whatever `maxMs` is, at the price of a few more polls for short
 * waits: with the local queue only one waiter per process and resource polls, so that stays cheap.
 */
export function backoffDelay(attempt: number, minMs: number, maxMs: number, waitedMs = Infinity): number {
  const cap = Math.max(minMs, Math.min(maxMs, minMs * 2 ** Math.min(attempt, 30), waitedMs / 2));
  return minMs + Math.random() * (cap - minMs);
}

/** A place in a resource's local queue. Call `leave()` exactly once, in a finally block. */
export class Ticket {
  readonly #queue: WaitQueue;
  readonly mode: LockMode;
  #wakeUp: (() => void) | null = null;
  /** Set when this ticket became head because the previous head was granted a write lock: wait for its release. */
  #behindWriter: number | null = null;
  #left = false;
  #wasHead = false;
  /** +1 whenever this waiter is told that trying again may now succeed (a local release, a reader granted ahead). */
  #kicks = 0;

  constructor(queue: WaitQueue, mode: LockMode) {
    this.#queue = queue;
    this.mode = mode;
  }

  /** This waiter's kick counter; pass it to `pause()` to skip the pause when it was kicked since. */
  get epoch(): number {
    return this.#kicks;
  }

  /** @internal Trying again may succeed now: ends a pause at once (and a pause that starts after it). */
  kick(): void {
    this.#kicks++;
    this.wake();
  }

  /**
   * A writer is head when it is first in the queue; a reader when only readers are ahead of it
   * (readers share, so a run of readers at the front all try at once).
   */
  get isHead(): boolean {
    for (const ticket of this.#queue.tickets) {
      if (ticket === this) return true;
      if (this.mode === 'write' || ticket.mode === 'write') return false;
    }
    return false;
  }

  /**
   * Once, for a head promoted right after the previous head was granted a conflicting lock: the
   * kick counter at promotion, to pause on until that grant is released. Null otherwise.
   */
  takeBehindWriter(): number | null {
    const value = this.#behindWriter;
    this.#behindWriter = null;
    return value;
  }

  /** @internal */
  markHead(): void {
    this.#wasHead = true;
  }

  /** @internal */
  wake(): void {
    const wake = this.#wakeUp;
    this.#wakeUp = null;
    wake?.();
  }

  /** @internal Made head by an earlier waiter leaving, which was granted `previousGranted` (or nothing). */
  promote(previousGranted: LockMode | null): void {
    if (this.#wasHead) return;
    this.#wasHead = true;
    if (previousGranted === 'write' || (previousGranted === 'read' && this.mode === 'write'))
      this.#behindWriter = this.#kicks;
    this.wake();
  }

  /**
   * Resolves true once this ticket is the head of its queue, false when `deadline` (on the
   * `performance.now()` clock) passes first; rejects with LockAbortedError when `signal` aborts.
   */
  async untilHead(deadline: number, signal: AbortSignal | undefined): Promise<boolean> {
    // A timer may fire a little before its time: sleep again until the deadline has truly passed.
    for (let left = deadline - performance.now(); ; left = deadline - performance.now()) {
      const head = await this.#sleep(() => this.isHead, Math.max(0, left), signal, true);
      if (head) {
        this.#wasHead = true;
        return true;
      }
      if (performance.now() >= deadline) return false;
    }
  }

  /**
   * As head: waits `ms`, or less when a grant of the resource is released in this process (also one
   * released since `seenEpoch`, e.g. during the attempt that just failed); rejects on abort.
   */
  async pause(ms: number, signal: AbortSignal | undefined, seenEpoch: number): Promise<void> {
    await this.#sleep(() => this.#kicks !== seenEpoch, ms, signal, false);
  }

  #sleep(done: () => boolean, ms: number, signal: AbortSignal | undefined, falseOnTimeout: boolean): Promise<boolean> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(new LockAbortedError(signal.reason));
        return;
      }
      if (done()) {
        resolve(true);
        return;
      }
      const finish = (): void => {
        clearTimeout(timer);
        unsubscribe?.();
        if (this.#wakeUp === wake) this.#wakeUp = null;
      };
      const wake = (): void => {
        if (!done()) {
          this.#wakeUp = wake; // spurious: keep sleeping
          return;
        }
        finish();
        resolve(true);
      };
      const aborted = (): void => {
        finish();
        reject(new LockAbortedError(signal?.reason));
      };
      const timer = setTimeout(() => {
        finish();
        resolve(!falseOnTimeout || done());
      }, ms);
      this.#wakeUp = wake;
      const unsubscribe = signal ? onAbort(signal, aborted) : undefined;
    });
  }

  /** Leaves the queue; `granted` is the mode this waiter was granted, or null. Promotes the next waiter. */
  leave(granted: LockMode | null): void {
    if (this.#left) return;
    this.#left = true;
    const queue = this.#queue;
    const index = queue.tickets.indexOf(this);
    if (index >= 0) queue.tickets.splice(index, 1);
    if (queue.tickets.length === 0) {
      if (queue.owner.get(queue.key) === queue) queue.owner.delete(queue.key);
      return;
    }
    for (const ticket of queue.tickets) {
      if (!ticket.isHead) break;
      // newly at the front: promote; readers already at the front: a reader just got in, so can they
      if (granted === 'read' && ticket.mode === 'read' && ticket.#wasHead) ticket.kick();
      else ticket.promote(granted);
    }
  }
}
