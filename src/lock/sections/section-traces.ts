import type { LockContext } from '../context/lock-context.js';
import type { Grant } from '../../contract/api.js';
import { acquireChannel, fenceChannel, isTraced, traced } from '../../contract/channels.js';
import type { SectionTarget } from './section-types.js';

export interface Deferred<V> {
  promise: Promise<V>;
  resolve: (value: V) => void;
  reject: (err: unknown) => void;
}

function deferred<V>(): Deferred<V> {
  let resolve!: (value: V) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<V>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // The traced copy reports a rejection; this one is not awaited by anyone else.
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

/**
 * A section on the tracing channels, one context per target, marked `section: true` and naming
 * the manager's knex: on the acquire channel from the call to the first take of its rows (or the
 * failure that ended it before any), on the fence channel its commit. Nothing is built while no one
 * listens.
 */
export class SectionTraces {
  readonly #takes: Array<Deferred<Grant>> = [];
  /** The traced take calls: settled once each acquire context has ended (and the hold begun). */
  readonly #traced: Array<Promise<unknown>> = [];
  #taken = false;

  constructor(
    readonly ctx: LockContext,
    readonly targets: readonly SectionTarget[],
    waitMs: number,
  ) {
    if (!isTraced(acquireChannel)) return;
    for (const t of targets) {
      const take = deferred<Grant>();
      this.#takes.push(take);
      this.#traced.push(
        traced(
          acquireChannel,
          () => ({
            resourceId: t.resourceId,
            mode: t.mode,
            waitMs,
            owner: ctx.options.owner,
            knex: ctx.knex,
            section: true as const,
          }),
          () => take.promise,
        ).catch(() => undefined),
      );
    }
  }

  /**
   * The take is done: its acquire contexts end with the grants. Resolves once they have ended, so
   * that a subscriber's hold for each grant exists before the work enters the hold scope.
   */
  taken(grants: readonly Grant[]): Promise<unknown> | undefined {
    if (this.#taken) return undefined;
    this.#taken = true;
    this.#takes.forEach((take, i) => take.resolve(grants[i]!));
    return this.#traced.length === 0 ? undefined : Promise.all(this.#traced);
  }

  failed(err: unknown): void {
    if (this.#taken) return;
    this.#taken = true;
    for (const take of this.#takes) take.reject(err);
  }

  /** The commit about to be sent: settle the returned deferred with its outcome. */
  commit(grants: readonly Grant[]): Deferred<void> | undefined {
    if (!isTraced(fenceChannel)) return undefined;
    const done = deferred<void>();
    for (const grant of grants)
      void traced(
        fenceChannel,
        () => ({
          grant,
          grantId: grant.id,
          resourceId: grant.resourceId,
          mode: grant.mode,
          knex: this.ctx.knex,
          section: true as const,
        }),
        () => done.promise,
      ).catch(() => undefined);
    return done;
  }
}
