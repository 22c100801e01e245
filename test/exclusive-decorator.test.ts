// @Exclusive compiled as TypeScript 5+ standard decorators (vitest.config.ts has TypeScript compile this
// file); test/legacy-decorators/exclusive.test.ts runs the same cases under experimentalDecorators.
// covers: src/decorators/index.ts, src/lock/manager/exclusive-call.ts
import { describe } from 'vitest';
import type { LockManager } from '../src/index.js';
import { Exclusive } from '../src/decorators/index.js';
import { useTestDatabase } from './support/db.js';
import { exclusiveCases, sendInvoicesBody, type InvoiceJobs } from './support/exclusive-decorated.js';

const db = useTestDatabase(import.meta.filename);

class Jobs implements InvoiceJobs {
  constructor(readonly locks: LockManager) {}

  @Exclusive('invoices', { manager: (self: Jobs) => self.locks, lockAtMostFor: 60_000 })
  async sendInvoices(hold?: Promise<void>, started?: () => void): Promise<number | undefined> {
    return sendInvoicesBody(this, hold, started);
  }
}

describe('@Exclusive (standard decorators)', () => {
  exclusiveCases(
    db,
    (locks) => new Jobs(locks),
    () => {
      class Bad {
        @Exclusive('x', {} as never)
        async run(): Promise<void> {}
      }
      return Bad;
    },
  );
});
