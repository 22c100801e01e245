// A repayment route on Fastify 5 under a write lock on the loan (docs/frameworks.md).
import Fastify, { type FastifyInstance } from 'fastify';
import type { LockManager } from 'mysql-rwlock';
import { disconnectSignal, errorResponse } from './http-lock.js';

export function fastifyApp(locks: LockManager, options: { waitMs: number }): FastifyInstance {
  const app = Fastify();

  app.post<{ Params: { loanId: string }; Body: { amountCents: number } }>(
    '/loans/:loanId/repayments',
    {
      schema: {
        body: {
          type: 'object',
          required: ['amountCents'],
          properties: { amountCents: { type: 'integer', minimum: 1 } },
        },
      },
    },
    async (request, reply) => {
      const { loanId } = request.params;
      const { amountCents } = request.body;
      const signal = disconnectSignal(reply.raw);
      const paymentId = await locks.withWriteLock(
        `loan:${loanId}`,
        async (trx, grant) => {
          await trx('loans').where({ id: loanId }).increment('repaid_cents', amountCents);
          const [id] = await trx('payments').insert({ loan_id: loanId, amount_cents: amountCents, grant_id: grant.id });
          return id;
        },
        { waitMs: options.waitMs, signal },
      ); // a rejection (LockAbortedError when the client left) goes to the error handler below
      return reply.code(201).send({ paymentId });
    },
  );

  app.setErrorHandler((err, _request, reply) => {
    if (reply.raw.writableEnded || reply.raw.socket?.destroyed) return; // the client is gone: nobody to answer
    const { status, headers, body } = errorResponse(err);
    return reply.code(status).headers(headers).send(body);
  });
  return app;
}
