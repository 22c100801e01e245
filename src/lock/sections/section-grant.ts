import type { Grant, FenceExecutor } from '../../contract/api.js';
import { SectionError } from '../../errors.js';
import type { LockMode } from '../../types.js';
import type { SectionTarget } from './section-types.js';

/**
 * The grant a section's work is given. Its id is the section's `t_lock_log` row (a fencing token
 * like any grant's); the section's commit is its release, so the methods that end or change a
 * durable grant are refused with SectionError. `isLive()` is true until the section's transaction
 * ends; `committed()` and `[Symbol.asyncDispose]` do nothing.
 */
export class SectionGrant implements Grant {
  readonly id: number;
  readonly resourceId: string;
  readonly owner: string;
  readonly token: string;
  readonly mode: LockMode;
  #signal: AbortSignal | undefined;
  #ended = false;

  constructor(id: number, t: SectionTarget, owner: string, token: string) {
    this.id = id;
    this.resourceId = t.resourceId;
    this.mode = t.mode;
    this.owner = owner;
    this.token = token;
  }

  /**
   * Never aborted: nobody else can end a section. One per grant, so listeners added to it go with
   * it; made when first read, as most work never reads it.
   */
  get signal(): AbortSignal {
    return (this.#signal ??= new AbortController().signal);
  }

  get settled(): boolean {
    return this.#ended;
  }

  /** @internal The section's transaction ended. */
  end(): void {
    this.#ended = true;
  }

  #refuse(what: string): Promise<never> {
    return Promise.reject(
      new SectionError(
        `${what}: a section's grant ends with the section's commit; use a durable lock (no section option) to ${what}`,
      ),
    );
  }

  fence(_execute: FenceExecutor): Promise<void> {
    return this.#refuse('fence');
  }
  downgrade(): Promise<void> {
    return this.#refuse('downgrade');
  }
  tryUpgrade(): Promise<Grant | null> {
    return this.#refuse('tryUpgrade');
  }
  extend(_ms: number): Promise<boolean> {
    return this.#refuse('extend');
  }
  release(): Promise<boolean> {
    return this.#refuse('release');
  }
  isLive(): Promise<boolean> {
    return Promise.resolve(!this.#ended);
  }
  committed(): void {}
  [Symbol.asyncDispose](): Promise<void> {
    return Promise.resolve();
  }
}
