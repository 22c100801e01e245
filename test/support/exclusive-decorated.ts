// The cases of @Exclusive, run by test/exclusive-decorator.test.ts (standard decorators) and by
// test/legacy-decorators/exclusive.test.ts (experimentalDecorators), each with its own class.
import { expect, it } from 'vitest';
import { createLockManager, type LockManager } from '../../src/index.js';
import type { TestDatabase } from './db.js';

/** A service whose `sendInvoices` is `@Exclusive('invoices', { lockAtMostFor: 60_000 })`. */
export interface InvoiceJobs {
  readonly locks: LockManager;
  /** Marks the due invoices sent through the job's transaction; waits for `hold` inside the run. */
  sendInvoices(hold?: Promise<void>, started?: () => void): Promise<number | undefined>;
}

export async function sendInvoicesBody(self: InvoiceJobs, hold?: Promise<void>, started?: () => void): Promise<number> {
  const trx = self.locks.current('invoices')!.trx!;
  const sent = (await trx('invoice').where({ status: 'due' }).update({ status: 'sent' })) as number;
  started?.();
  await hold;
  return sent;
}

export function exclusiveCases(
  db: TestDatabase,
  make: (locks: LockManager) => InvoiceJobs,
  defineBad: () => unknown,
): void {
  it('runs the method on one instance, whose writes commit; another instance resolves undefined at once', async () => {
    await db.knex.raw('CREATE TABLE IF NOT EXISTS invoice (id INT PRIMARY KEY, status VARCHAR(8)) ENGINE=InnoDB');
    await db.knex.raw('DELETE FROM invoice');
    await db.knex('invoice').insert([
      { id: 1, status: 'due' },
      { id: 2, status: 'due' },
    ]);
    const a = make(createLockManager({ knex: db.knex, owner: 'a' }));
    const b = make(createLockManager({ knex: db.knex, owner: 'b' }));
    let release!: () => void;
    const hold = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const inRun = new Promise<void>((resolve) => (started = resolve));
    const first = a.sendInvoices(hold, started);
    await inRun;
    expect(await b.sendInvoices()).toBeUndefined();
    release();
    expect(await first).toBe(2);
    expect((await db.knex('invoice').where({ status: 'sent' })).length).toBe(2);
    expect(await b.sendInvoices()).toBe(0); // its turn now: nothing left to send
  });

  it('refuses bad options when the class is defined: InvalidOptionsError', () => {
    expect(defineBad).toThrow(/^lockAtMostFor/);
  });
}
