// One term of leadership: the leased write grant a campaign won, its renewal, its fence and its end.
import { translate } from '../../sql/connection.js';
import { LockInvariantError, LockLostError } from '../../errors.js';
import { TERM_FENCE_SQL, TERM_FENCED_ROWS, termFenceParams } from '../../sql/leader.js';
import type { FenceExecutor } from '../../contract/api.js';
import type { DurableGrant } from '../durable/grant.js';
import type { ResolvedCampaignOptions } from './campaign-options.js';

/** How a term ended, as its campaign saw it. */
export type TermEnd =
  /** `resign()`: released by its leader, a waiting campaigner leads at once. */
  | 'resigned'
  /** `close()` of the campaign (or of its manager): released by its leader. */
  | 'closed'
  /** The leader callback failed: released by its leader. */
  | 'failed'
  /** A renewal or a fence found the grant released by someone else, or its lease run out. */
  | 'lost'
  /** No renewal succeeded within the lease: the term ended here before the database could end it. */
  | 'expired';

/**
 * What the leader callback is given: the term it leads in. `id` is the term's write grant id, a
 * fencing token that strictly increases from term to term of a name on one database server.
 */
export interface Term {
  /** The name campaigned for (the write grant's resource id). */
  readonly name: string;
  /** The term: its write grant's id. A later term of the name has a higher one. */
  readonly id: number;
  /** The owner of the manager that leads. */
  readonly owner: string;
  /**
   * Aborted when the term ends: lost, not renewed within its lease, `resign()`, `close()`. The
   * leader's work must stop; its fenced commits are refused from then on.
   */
  readonly signal: AbortSignal;
  /**
   * The term's fence, for a business transaction on any driver or ORM (an adapter of
   * `mysql-rwlock/adapters`, or any `(sql, params) => affected rows`). Run it as the last statement
   * before the caller's COMMIT: the transaction may commit only while this term leads, and the term
   * goes on leading after it. When the term no longer leads it throws LockLostError (nothing sent,
   * if this process already knows) and the caller must roll back.
   */
  fence(execute: FenceExecutor): Promise<void>;
}

/** A term as its campaign runs it: the renewal, the local deadline, the end. */
export class RunningTerm implements Term {
  readonly name: string;
  readonly id: number;
  readonly owner: string;
  readonly grant: DurableGrant;
  readonly #controller = new AbortController();
  readonly #o: ResolvedCampaignOptions;
  readonly #report: (error: unknown) => void;
  /** When the lease granted by the last renewal that succeeded runs out, on this process's monotonic clock. */
  #deadline: number;
  #deadlineTimer: ReturnType<typeof setTimeout> | undefined;
  #renewTimer: ReturnType<typeof setInterval> | undefined;
  #renewing = false;
  #ending: Promise<TermEnd> | undefined;
  #endResolve!: (how: TermEnd) => void;
  /** Resolves with how the term ended, once its grant was released (or found released). */
  readonly ended: Promise<TermEnd>;

  constructor(grant: DurableGrant, o: ResolvedCampaignOptions, leasedAt: number, report: (error: unknown) => void) {
    this.grant = grant;
    this.name = grant.resourceId;
    this.id = grant.id;
    this.owner = grant.owner;
    this.#o = o;
    this.#report = report;
    this.#deadline = leasedAt + o.leaseMs;
    this.ended = new Promise((resolve) => {
      this.#endResolve = resolve;
    });
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** Starts the renewal and the deadline: the term leads from now until `end`. */
  start(): void {
    this.#armDeadline();
    this.#renewTimer = setInterval(() => this.#renew(), this.#o.renewEveryMs);
    this.#renewTimer.unref();
  }

  async fence(execute: FenceExecutor): Promise<void> {
    if (this.#controller.signal.aborted) throw new LockLostError(this.id, 'its term ended');
    let changed: unknown;
    try {
      changed = await execute(TERM_FENCE_SQL, termFenceParams(this.id, this.grant.ref.resource, this.grant.ref.token));
    } catch (err) {
      throw translate(err);
    }
    if (changed === TERM_FENCED_ROWS) return;
    if (changed === 0) {
      // Released by someone else or out of lease: either way this term leads no more.
      void this.end('lost');
      throw new LockLostError(this.id, 'its term no longer leads');
    }
    throw new LockInvariantError(
      `execute() resolved to ${typeof changed === 'number' ? changed : `${String(changed)} (a ${typeof changed})`}, expected the number ${TERM_FENCED_ROWS} (leads) or 0 (does not): does it resolve to the affected-row count, as a number?`,
    );
  }

  /**
   * One renewal, unless one is in flight (a stalled link must not pile them up on the pool). Past
   * the deadline nothing is sent: the lease may already have run out on the database.
   */
  #renew(): void {
    if (this.#renewing || this.#ending) return;
    const sent = performance.now();
    if (sent >= this.#deadline) return void this.end('expired');
    this.#renewing = true;
    this.grant.extend(this.#o.leaseMs).then(
      (live) => {
        this.#renewing = false;
        if (!live) return void this.end('lost');
        // The database set the lease from its own now, which is no earlier than `sent`.
        this.#deadline = sent + this.#o.leaseMs;
        this.#armDeadline();
      },
      (err: unknown) => {
        this.#renewing = false;
        this.#report(err);
      },
    );
  }

  #armDeadline(): void {
    clearTimeout(this.#deadlineTimer);
    if (this.#ending) return;
    this.#deadlineTimer = setTimeout(() => void this.end('expired'), Math.max(0, this.#deadline - performance.now()));
    this.#deadlineTimer.unref();
  }

  /**
   * Ends the term once: the signal aborts first (the work stops and no fence is sent from here),
   * then the grant is released unless someone else released it. A release that fails is reported;
   * the grant's lease then runs out as a dead leader's does.
   */
  end(how: TermEnd): Promise<TermEnd> {
    this.#ending ??= (async () => {
      clearInterval(this.#renewTimer);
      clearTimeout(this.#deadlineTimer);
      const reason =
        how === 'lost' || how === 'expired'
          ? new LockLostError(
              this.id,
              how === 'lost' ? 'its term no longer leads' : 'its lease was not renewed in time',
            )
          : new DOMException(`term ${this.id} of ${JSON.stringify(this.name)} ended: ${how}`, 'AbortError');
      this.#controller.abort(reason);
      if (!this.grant.lost) await this.grant.release().catch((err: unknown) => this.#report(err));
      this.#endResolve(how);
      return how;
    })();
    return this.#ending;
  }
}
