// A repayment route on Express 5 under a write lock on the loan (docs/frameworks.md).
import express from 'express';
import type { LockManager } from 'mysql-rwlock';
import { disconnectSignal, errorResponse } from './http-lock.js';

export function expressApp(locks: LockManager, options: { waitMs: number }): express.Express {
  const app = express();
  app.use(express.json());

  app.post('/loans/:loanId/repayments', async (req, res) => {
    const loanId = req.params.loanId;
    const amountCents: unknown = req.body?.amountCents;
    if (!Number.isSafeInteger(amountCents) || (amountCents as number) <= 0) {
      res.status(400).json({ error: 'amountCents must be a positive integer' });
      return;
    }
    const signal = disconnectSignal(res);
    const paymentId = await locks.withWriteLock(
      `loan:${loanId}`,
      async (trx, grant) => {
        await trx('loans')
          .where({ id: loanId })
          .increment('repaid_cents', amountCents as number);
        const [id] = await trx('payments').insert({ loan_id: loanId, amount_cents: amountCents, grant_id: grant.id });
        return id;
      },
      { waitMs: options.waitMs, signal },
    ); // a rejection (LockAbortedError when the client left) goes to the error handler below
    res.status(201).json({ paymentId });
  });

  // Express 5 passes a rejected handler's error here.
  app.use((err: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    if (res.writableEnded || res.socket?.destroyed) return; // the client is gone: nobody to answer
    const { status, headers, body } = errorResponse(err);
    res.status(status).set(headers).json(body);
  });
  return app;
}
