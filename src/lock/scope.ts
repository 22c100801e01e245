import { AsyncLocalStorage } from 'node:async_hooks';
import type { Knex } from 'knex';
import type { Grant } from './api.js';

/** A fenced operation open in the current async context: its grant and its transaction. */
export interface Held {
  grant: Grant;
  trx: Knex.Transaction;
}

/**
 * The fenced operations of one lock manager that enclose the current async context (Node's unit
 * of "the same caller"): a nested call on a resource held here joins the enclosing grant instead
 * of waiting for it, and the count of open transactions tells how many pool connections a nested
 * call on another resource needs.
 */
export class Scopes {
  readonly #als = new AsyncLocalStorage<ReadonlyMap<string, Held>>();

  /** The enclosing operation on this resource (by hex id), if any. */
  held(resourceHex: string): Held | undefined {
    return this.#als.getStore()?.get(resourceHex);
  }

  /**
   * Fenced transactions open around the current async context, each holding a connection. A group
   * of locks holds several resources in one transaction: transactions are counted, not resources.
   */
  get depth(): number {
    const store = this.#als.getStore();
    return store ? new Set(Array.from(store.values(), (h) => h.trx)).size : 0;
  }

  /** Runs `work` with `held` (resource hex, operation) added to the enclosing operations. */
  run<T>(held: ReadonlyArray<readonly [string, Held]>, work: () => Promise<T>): Promise<T> {
    const inner = new Map(this.#als.getStore());
    for (const [resourceHex, h] of held) inner.set(resourceHex, h);
    return this.#als.run(inner, work);
  }
}
