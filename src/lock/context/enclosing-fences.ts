import { AsyncLocalStorage } from 'node:async_hooks';
import type { Knex } from 'knex';
import type { Grant } from '../../contract/api.js';

/**
 * A fenced operation open in the current async context: its grant and its knex transaction, none
 * when the transaction is another ORM's (`withWriteGrant`).
 */
export interface EnclosingFence {
  grant: Grant;
  trx?: Knex.Transaction | undefined;
}

/**
 * The fenced operations of one lock manager that enclose the current async context (Node's unit
 * of "the same caller"): a nested call on a resource held here joins the enclosing grant instead
 * of waiting for it, and the count of open transactions tells how many pool connections a nested
 * call on another resource needs.
 */
export class EnclosingFences {
  readonly #als = new AsyncLocalStorage<ReadonlyMap<string, EnclosingFence>>();

  /** The enclosing operation on this resource (by hex id), if any. */
  held(resourceHex: string): EnclosingFence | undefined {
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

  /** The innermost enclosing operation, or the one on this resource (by hex id); undefined outside any. */
  current(resourceHex?: string): EnclosingFence | undefined {
    const store = this.#als.getStore();
    if (store === undefined) return undefined;
    if (resourceHex !== undefined) return store.get(resourceHex);
    // A Map iterates in insertion order and run() adds the new scope last: the last is the innermost.
    return [...store.values()].at(-1);
  }

  /** Runs `work` with `held` (resource hex, operation) added to the enclosing operations. */
  run<T>(held: ReadonlyArray<readonly [string, EnclosingFence]>, work: () => Promise<T>): Promise<T> {
    const inner = new Map(this.#als.getStore());
    for (const [resourceHex, h] of held) inner.set(resourceHex, h);
    return this.#als.run(inner, work);
  }
}
