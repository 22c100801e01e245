import { ManagerClosedError } from '../../errors.js';
import type { EnclosingFences } from '../context/enclosing-fences.js';

/**
 * A manager's calls in progress (acquires, scoped work, reads, operator releases, a job's hold
 * after its run), which `close()` waits for, and whether it was closed.
 */
export class InFlight {
  readonly #scopes: EnclosingFences;
  #count = 0;
  #closed: Promise<void> | undefined;
  #drained: (() => void) | undefined;

  constructor(scopes: EnclosingFences) {
    this.#scopes = scopes;
  }

  /**
   * Runs one call, counted as in flight. Once closed, a new call is refused, unless it is made
   * inside a fenced operation of this manager that was in flight: that work is allowed to finish.
   */
  track<T>(what: string, run: () => Promise<T>): Promise<T> {
    if (this.#closed && this.#scopes.depth === 0) return Promise.reject(new ManagerClosedError(what));
    this.#count++;
    return run().finally(() => this.#done());
  }

  /** Counts `effect` as in flight until it settles, as part of a call already counted. */
  hold(effect: Promise<unknown>): void {
    this.#count++;
    void effect.finally(() => this.#done());
  }

  /** Closed from now on; resolves once `stopping` has and no call is in flight. Idempotent. */
  close(stopping: () => Promise<void> | undefined): Promise<void> {
    this.#closed ??= Promise.all([
      stopping(),
      this.#count === 0
        ? undefined
        : new Promise<void>((resolve) => {
            this.#drained = resolve;
          }),
    ]).then(() => undefined);
    return this.#closed;
  }

  #done(): void {
    if (--this.#count === 0) this.#drained?.();
  }
}
