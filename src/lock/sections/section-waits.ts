import type { LockContext } from '../context/lock-context.js';
import { LockAbortedError, type RwLockError } from '../../errors.js';
import {
  acquirePooled,
  isLockWaitTimeout,
  query,
  type ConnectionWait,
  type PoolClient,
  type RawConnection,
} from '../../sql/connection.js';
import { onAbort } from '../../sql/abort.js';
import { testSwitches } from '../../test-switches.js';

/**
 * Runs `run` on a pool connection of a section's own, handed back to the pool after it, unless an
 * interruption that could not send its KILL destroyed it (see `SectionWaits`).
 */
export async function onSectionConnection<R>(
  ctx: LockContext,
  wait: ConnectionWait,
  run: (conn: RawConnection, waits: SectionWaits) => Promise<R>,
): Promise<R> {
  const client = ctx.knex.client as unknown as PoolClient;
  const conn = await acquirePooled(client, wait);
  const waits = new SectionWaits(ctx, conn);
  try {
    return await run(conn, waits);
  } finally {
    // A destroyed connection fails the pool's check at its next checkout and is discarded there. Its
    // statement has failed by now: closing it also makes the pool's own close of it (a QUIT) fail at
    // once instead of waiting for a reply on a dead socket, which would keep its pool slot forever.
    if (waits.poisoned) (conn as { destroy?: () => void }).destroy?.();
    await client.releaseConnection(conn);
  }
}

/**
 * How long a section's statement may run, at least, before its deadline interrupts it: a statement
 * that waits for no one takes a few milliseconds, so one sent just before the deadline (or with
 * `waitMs: 0`) is not interrupted for its own work; a wait on another transaction's lock ends at most
 * this long after the deadline.
 */
export const STATEMENT_GRACE_MS = 100;

/**
 * Ends a section's waits on other transactions' locks at its deadline (LockTimeoutError) or when
 * its signal aborts (LockAbortedError), whatever the server's lock wait timeout (whole seconds, kept
 * as a backstop). An interruption sends `KILL QUERY` for the section's server thread on a connection
 * opened for that alone (not from the pool, which may be full of waiting sections) and waits for its
 * reply before the section's connection is used again or handed back to the pool. So the KILL can
 * reach only the section's own statement: if that statement had already ended, the KILL finds the
 * thread idle, and the servers clear a KILL QUERY at the start of the thread's next command. (The
 * interruption before this one sent KILL QUERY through the pool without waiting for it; it ran when
 * a pool connection came free, by which time the section's connection could be running someone
 * else's query.) When no connection can be had for the KILL, the section's connection is destroyed
 * instead, never to be reused, so that the caller is still answered at once.
 */
export class SectionWaits {
  #interrupted: RwLockError | undefined;
  #killed: Promise<void> = Promise.resolve();
  #poisoned = false;

  constructor(
    readonly ctx: LockContext,
    readonly conn: RawConnection,
  ) {}

  /** True once the connection was destroyed by an interruption (no KILL could be sent). */
  get poisoned(): boolean {
    return this.#poisoned;
  }

  /** The error an interruption ended the section with, if one did. */
  interruption(): RwLockError | undefined {
    return this.#interrupted;
  }

  /**
   * Runs `statement`, ended by the deadline and the signal. `sent`, for a statement sent later than
   * `statement` is called (a take armed for knex's BEGIN): whether it has gone; one interrupted
   * before it went needs no KILL, as it is then never sent.
   */
  async run<R>(
    statement: () => Promise<R>,
    deadline: number,
    signal: AbortSignal | undefined,
    timeout: () => RwLockError,
    sent: () => boolean = () => true,
  ): Promise<R> {
    // Aborted before this statement is sent: nothing of the section's runs on the connection, so no
    // KILL. One sent now would land on whatever the connection runs when it arrives: the section's
    // ROLLBACK, or the statement of the pool's next borrower once the section has handed it back.
    if (signal?.aborted) this.#interrupted ??= new LockAbortedError(signal.reason);
    if (this.#interrupted) {
      await this.#killed;
      throw this.#interrupted;
    }
    // A statement sent near the deadline still gets its own work's time: one attempt, even at waitMs 0.
    const due = performance.now() + Math.max(STATEMENT_GRACE_MS, deadline - performance.now());
    let timer: NodeJS.Timeout | undefined;
    // Node's timers count whole milliseconds of the event loop's clock: one may fire up to a
    // millisecond before performance.now() reaches its time (6.2 ms for a 7 ms timer, seen): armed
    // again until due, so a wait never ends before its deadline.
    const arm = (): void => {
      const left = due - performance.now();
      if (left > 0) timer = setTimeout(arm, left);
      else this.#interrupt(timeout(), sent);
    };
    arm();
    const unsubscribe = signal
      ? onAbort(signal, () => this.#interrupt(new LockAbortedError(signal.reason), sent))
      : undefined;
    let failure: { err: unknown } | undefined;
    let result: R | undefined;
    try {
      result = await statement();
    } catch (err) {
      failure = { err };
    } finally {
      clearTimeout(timer);
      unsubscribe?.();
    }
    if (this.#interrupted) {
      // Nothing more is sent on this connection until the KILL was answered.
      await this.#killed;
      throw this.#interrupted;
    }
    if (failure) {
      // The server's own bound (whole seconds) ended the wait first.
      if (isLockWaitTimeout(failure.err)) throw timeout();
      throw failure.err;
    }
    return result as R;
  }

  #interrupt(err: RwLockError, sent: () => boolean): void {
    if (this.#interrupted) return;
    this.#interrupted = err;
    if (!sent()) return;
    const threadId = this.conn.threadId;
    if (testSwitches.section.killThroughPool) {
      // The negative control: the interruption before this one, which reached other users' queries.
      if (threadId !== null) void this.ctx.knex.raw('KILL QUERY ?', [threadId]).catch(() => undefined);
      return;
    }
    this.#killed = killQuery(this.ctx, threadId).then((answered) => {
      if (answered) return;
      // No KILL could be sent: the socket itself, so the statement fails now (mysql2's destroy()
      // only half-closes it); the connection is never reused.
      this.#poisoned = true;
      (this.conn as { stream?: { destroy(): void } }).stream?.destroy();
    });
  }
}

/** `KILL QUERY` of a server thread, on a connection opened for it and closed after: true once answered. */
async function killQuery(ctx: LockContext, threadId: number | null): Promise<boolean> {
  if (threadId === null) return false;
  const client = ctx.knex.client as unknown as {
    acquireRawConnection(): Promise<RawConnection>;
    destroyRawConnection(conn: RawConnection): Promise<void>;
  };
  let killer: RawConnection | undefined;
  try {
    killer = await client.acquireRawConnection();
    await query(killer, 'KILL QUERY ?', [threadId]);
    testSwitches.section.onKill?.(threadId);
    return true;
  } catch {
    return false;
  } finally {
    if (killer) await client.destroyRawConnection(killer).catch(() => undefined);
  }
}
