// A campaign: wait for the name's write grant, lead under it as a term, and after the term ends
// campaign again (with a new grant, so a higher term) until closed.
import { acquire, tryOnce, type Target } from '../durable/durable-acquire.js';
import type { LockContext } from '../context/lock-context.js';
import {
  DatabaseUnreachableError,
  ConnectionLostError,
  LeadershipError,
  LockAbortedError,
  LockOutcomeUnknownError,
  LockTimeoutError,
  TransactionConflictError,
} from '../../errors.js';
import { withConnection } from '../../sql/connection.js';
import { inspectResource } from '../../sql/inspect.js';
import { laterGrantExists } from '../../sql/leader.js';
import type { DurableGrant } from '../durable/grant.js';
import { leaderChannel, nextCampaignNumber, type LeaderEvent } from './channel.js';
import type { ResolvedCampaignOptions } from './campaign-options.js';
import { RunningTerm, type Term, type TermEnd } from './term.js';

/** The leader callback: called with each term this process leads. */
export type LeadWork = (term: Term) => unknown;

/** What `locks.campaign()` returns. */
export interface Campaign {
  /** The name campaigned for. */
  readonly name: string;
  /** The term this process leads in now, or null while it campaigns (or after close). */
  readonly term: Term | null;
  /**
   * Ends the current term (its signal aborts, its grant is released, so a waiting campaigner
   * leads at once) and campaigns again once another term leads or a lease has passed. Resolves
   * once the grant is released; at once when not leading.
   */
  resign(): Promise<void>;
  /**
   * Ends the campaign: the current term ends as with `resign()`, no new one begins. Resolves once
   * the grant is released and the leader callback has settled; rejects with a LeadershipError
   * (`'work-stuck'`) when the callback has not settled within `stopTimeoutMs` (nothing held all
   * the same). Idempotent.
   */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** Errors a campaign cannot get past by trying again: they end it. */
function isFatal(err: unknown): boolean {
  return !(
    err instanceof DatabaseUnreachableError ||
    err instanceof ConnectionLostError ||
    err instanceof LockOutcomeUnknownError ||
    err instanceof TransactionConflictError ||
    err instanceof LockTimeoutError
  );
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

export class RunningCampaign implements Campaign {
  readonly name: string;
  readonly #ctx: LockContext;
  readonly #t: Target;
  readonly #lead: LeadWork;
  readonly #o: ResolvedCampaignOptions;
  readonly #closing = new AbortController();
  #term: RunningTerm | null = null;
  /** The callbacks of terms that ended and have not settled, which `close()` waits for. */
  readonly #work = new Set<Promise<unknown>>();
  #loop: Promise<void> = Promise.resolve();
  #closed: Promise<void> | undefined;
  readonly #onEnd: () => void;
  /** This campaign's number on the leader channel. */
  readonly #number = nextCampaignNumber();

  constructor(ctx: LockContext, t: Target, lead: LeadWork, o: ResolvedCampaignOptions, onEnd: () => void) {
    this.#ctx = ctx;
    this.#t = t;
    this.name = t.resourceId;
    this.#lead = lead;
    this.#o = o;
    this.#onEnd = onEnd;
  }

  get term(): Term | null {
    return this.#term;
  }

  /**
   * The first attempt, made before the caller gets the handle, so that a name held as a
   * semaphore or by readers is refused to the caller with nothing held; then the loop.
   */
  async begin(): Promise<this> {
    const first = await tryOnce(this.#ctx, this.#t);
    if (first === null) await this.#refuseReaders();
    this.#publish('campaigning', null);
    this.#loop = this.#run(first);
    return this;
  }

  /** A message on the leader channel, built only when someone listens. */
  #publish(event: LeaderEvent['event'], term: number | null, how?: TermEnd): void {
    if (!leaderChannel.hasSubscribers) return;
    const message: LeaderEvent = {
      name: this.name,
      campaign: this.#number,
      owner: this.#ctx.options.owner,
      event,
      term,
    };
    if (how !== undefined) message.how = how;
    leaderChannel.publish(message);
  }

  /** Readers hold the name: it is no leader's name. Nothing of ours is held when this is asked. */
  async #refuseReaders(): Promise<void> {
    const state = await withConnection(this.#ctx.knex, (conn) =>
      inspectResource(conn, this.#t.resourceId, this.#t.resource, 0),
    );
    if (state.live.read > 0 && state.permitLimit === null)
      throw new LeadershipError(this.#t.resourceId, 'name-in-use', null);
  }

  #report(error: unknown): void {
    const hook = this.#o.onError;
    try {
      if (hook) return hook(error);
    } catch {
      // a hook that throws is reported below like any other error
    }
    const text = error instanceof Error ? error.message : String(error);
    process.emitWarning(`campaign for ${JSON.stringify(this.name)}: ${text}`, { type: 'MysqlRwlockWarning' });
  }

  async #run(first: DurableGrant | null): Promise<void> {
    let grant = first;
    const stop = this.#closing.signal;
    while (!stop.aborted) {
      try {
        grant ??= await this.#waitForGrant();
        if (grant === null) break;
        const taken = grant;
        grant = null;
        const how = await this.#leadIn(taken);
        if (how === 'resigned') await this.#stepAside(taken.id);
        else if (how === 'failed' || how === 'expired') await sleep(this.#o.renewEveryMs, stop);
      } catch (err) {
        grant = null;
        if (stop.aborted) break;
        this.#report(err);
        if (isFatal(err)) break;
        await sleep(this.#o.renewEveryMs, stop);
      }
    }
    this.#publish('stopped', null);
    this.#onEnd();
  }

  /** Waits for the grant in chunks of a lease, asking between them whether readers took the name. */
  async #waitForGrant(): Promise<DurableGrant | null> {
    for (;;) {
      try {
        return await acquire(this.#ctx, this.#t, this.#o.leaseMs, this.#closing.signal);
      } catch (err) {
        if (err instanceof LockAbortedError && this.#closing.signal.aborted) return null;
        if (!(err instanceof LockTimeoutError)) throw err;
        await this.#refuseReaders();
      }
    }
  }

  /** Leases `grant`, runs the callback under it as a term, and resolves with how the term ended. */
  async #leadIn(grant: DurableGrant): Promise<TermEnd> {
    const leasedAt = performance.now();
    let leased: boolean;
    try {
      leased = await grant.extend(this.#o.leaseMs);
    } catch (err) {
      // Not leased: give it back rather than leave an unleased grant to the stale cutoff.
      await grant.release().catch(() => undefined);
      throw err;
    }
    if (!leased) return 'lost';
    const term = new RunningTerm(grant, this.#o, leasedAt, (err) => this.#report(err));
    this.#term = term;
    term.start();
    if (this.#closing.signal.aborted) void term.end('closed');
    this.#publish('elected', term.id);
    const work = (async () => this.#lead(term))();
    this.#work.add(work);
    work.then(
      () => this.#work.delete(work),
      (err: unknown) => {
        this.#work.delete(work);
        if (!term.signal.aborted) {
          this.#report(new LeadershipError(this.name, 'work-failed', term.id, { cause: err }));
          void term.end('failed');
        }
      },
    );
    const how = await term.ended;
    this.#term = null;
    this.#publish('ended', term.id, how);
    return how;
  }

  /**
   * After a resignation, stay out until another term has begun (a waiting campaigner took over) or a
   * lease has passed (nobody else campaigns): otherwise this process, which released the grant a
   * moment ago, would usually take it again before anyone else asked.
   */
  async #stepAside(resignedTerm: number): Promise<void> {
    const until = performance.now() + this.#o.leaseMs;
    const stop = this.#closing.signal;
    while (!stop.aborted && performance.now() < until) {
      const taken = await withConnection(this.#ctx.knex, (conn) =>
        laterGrantExists(conn, this.#t.resource, resignedTerm),
      ).catch(() => false);
      if (taken) return;
      await sleep(Math.min(this.#o.renewEveryMs, this.#ctx.options.backoffMaxMs * 2), stop);
    }
  }

  async resign(): Promise<void> {
    await this.#term?.end('resigned');
  }

  close(): Promise<void> {
    this.#closed ??= (async () => {
      this.#closing.abort();
      await this.#term?.end('closed');
      await this.#loop;
      const pending = [...this.#work];
      if (pending.length === 0) return;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const settled = await Promise.race([
        Promise.allSettled(pending).then(() => true),
        new Promise<false>((resolve) => {
          timer = setTimeout(() => resolve(false), this.#o.stopTimeoutMs);
        }),
      ]);
      clearTimeout(timer);
      if (!settled) throw new LeadershipError(this.name, 'work-stuck', null);
    })();
    return this.#closed;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
