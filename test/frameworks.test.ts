// examples/express.ts and examples/fastify.ts over real HTTP on 127.0.0.1 against the real server:
// a repayment commits under a write grant; a lock held elsewhere gives 423 with Retry-After; a grant
// force-released before the fence gives 409 with nothing written; a client that goes away aborts the
// waiting acquire (the lock reports LockAbortedError) and nothing is written; any other error is a
// 500 that names nothing internal. docs/frameworks.md carries the three example files verbatim.
// covers: src/adapters/index.ts, src/observability/tracing-entry.ts
import diagnostics from 'node:diagnostics_channel';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expressApp } from '../examples/express.js';
import { fastifyApp } from '../examples/fastify.js';
import { createLockManager, type Grant, LockAbortedError, type LockManager } from '../src/index.js';
import { type AcquireContext, CHANNELS, type LockTracingChannel } from '../src/observability/tracing-entry.js';
import { useTestDatabase } from './support/db.js';

const REPO = join(import.meta.dirname, '..');
const EXAMPLES = ['examples/http-lock.ts', 'examples/express.ts', 'examples/fastify.ts'];
/** Short, so the 423 comes at once; the holder keeps the lock for the whole request anyway. */
const SHORT_WAIT_MS = 300;
/** Far beyond any test's run: only the client's disconnect can end such a wait within the test. */
const LONG_WAIT_MS = 600_000;

const db = useTestDatabase(import.meta.filename);
const acquireChannel: LockTracingChannel<AcquireContext> = diagnostics.tracingChannel(CHANNELS.acquire);

interface Started {
  url: string;
  close(): Promise<void>;
}

const FRAMEWORKS: Record<string, (locks: LockManager, waitMs: number) => Promise<Started>> = {
  async express(locks, waitMs) {
    const server = expressApp(locks, { waitMs }).listen(0, '127.0.0.1');
    await new Promise<void>((resolve, reject) => server.once('listening', resolve).once('error', reject));
    return {
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      close: () =>
        new Promise<void>((resolve, reject) => {
          server.closeAllConnections();
          server.close((err) => (err ? reject(err) : resolve()));
        }),
    };
  },
  async fastify(locks, waitMs) {
    const app = fastifyApp(locks, { waitMs });
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    return { url, close: () => app.close() };
  },
};

/** The next acquire event of `event` on `resourceId` (the route's own acquire inside withWriteLock). */
function nextAcquire(event: 'start' | 'asyncEnd' | 'error', resourceId: string): Promise<AcquireContext> {
  return new Promise((resolve) => {
    const handlers = {
      [event]: (c: AcquireContext) => {
        if (c.resourceId !== resourceId) return;
        acquireChannel.unsubscribe(handlers);
        resolve(c);
      },
    };
    acquireChannel.subscribe(handlers);
  });
}

async function rows(
  loanId: string,
): Promise<{ repaid: number; payments: Array<{ amount_cents: number; grant_id: number }> }> {
  const loan = (await db.knex('loans').where({ id: loanId }).first('repaid_cents')) as { repaid_cents: number };
  const payments = (await db
    .knex('payments')
    .where({ loan_id: loanId })
    .select('amount_cents', 'grant_id')
    .orderBy('id')) as Array<{ amount_cents: number; grant_id: number }>;
  return { repaid: Number(loan.repaid_cents), payments };
}

function repay(base: string, loanId: string, body: unknown): Promise<Response> {
  return fetch(`${base}/loans/${loanId}/repayments`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

beforeAll(async () => {
  await db.knex.raw(
    `CREATE TABLE loans (id VARCHAR(64) PRIMARY KEY, repaid_cents BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB`,
  );
  await db.knex.raw(`CREATE TABLE payments (id BIGINT AUTO_INCREMENT PRIMARY KEY, loan_id VARCHAR(64) NOT NULL,
    amount_cents BIGINT NOT NULL, grant_id BIGINT NOT NULL) ENGINE=InnoDB`);
});

it('docs/frameworks.md carries the example files verbatim', () => {
  const docs = readFileSync(join(REPO, 'docs/frameworks.md'), 'utf8');
  for (const file of EXAMPLES) {
    expect(docs, `docs/frameworks.md does not carry ${file} verbatim`).toContain(
      `\`\`\`ts\n${readFileSync(join(REPO, file), 'utf8')}\`\`\`\n`,
    );
  }
  for (const pkg of ['express', 'fastify']) {
    const { version } = JSON.parse(readFileSync(join(REPO, 'node_modules', pkg, 'package.json'), 'utf8')) as {
      version: string;
    };
    expect(docs, `docs/frameworks.md should name the ${pkg} tested`).toContain(`\`${pkg}@${version}\``);
  }
});

describe.each(Object.keys(FRAMEWORKS))('%s', (framework) => {
  let locks: LockManager;
  let short: Started;
  let long: Started;
  let n = 0;
  /** A loan of its own per test, with no repayment yet. */
  async function newLoan(): Promise<{ loanId: string; resourceId: string }> {
    const loanId = `${framework}-${++n}`;
    await db.knex('loans').insert({ id: loanId });
    return { loanId, resourceId: `loan:${loanId}` };
  }
  async function expectLockFree(resourceId: string): Promise<void> {
    const state = await locks.inspect(resourceId);
    expect(state.live).toEqual({ write: 0, read: 0 });
  }

  beforeAll(async () => {
    locks = createLockManager({ knex: db.knex });
    short = await FRAMEWORKS[framework]!(locks, SHORT_WAIT_MS);
    long = await FRAMEWORKS[framework]!(locks, LONG_WAIT_MS);
  });
  afterAll(async () => {
    await short?.close();
    await long?.close();
  });

  it('commits the repayment under a write grant released by that commit (201)', async () => {
    const { loanId, resourceId } = await newLoan();
    const res = await repay(short.url, loanId, { amountCents: 12_500 });
    expect(res.status).toBe(201);
    const { paymentId } = (await res.json()) as { paymentId: number };
    expect(Number.isSafeInteger(paymentId)).toBe(true);
    const { repaid, payments } = await rows(loanId);
    expect(repaid).toBe(12_500);
    expect(payments).toHaveLength(1);
    const [entry] = (await locks.history(resourceId)).grants;
    expect(entry).toMatchObject({ id: Number(payments[0]!.grant_id), mode: 'write', releasedBy: 'holder' });
    await expectLockFree(resourceId);
  });

  it('answers 423 with Retry-After while another holder keeps the lock, and writes nothing', async () => {
    const { loanId, resourceId } = await newLoan();
    const holder = await locks.acquireWrite(resourceId);
    try {
      const res = await repay(short.url, loanId, { amountCents: 100 });
      expect(res.status).toBe(423);
      expect(res.headers.get('retry-after')).toBe('1'); // SHORT_WAIT_MS rounded up to whole seconds
      expect(await res.json()).toEqual({ error: 'busy: try again later' });
      expect(await rows(loanId)).toEqual({ repaid: 0, payments: [] });
      expect((await locks.inspect(resourceId)).holders.map((h) => h.id)).toEqual([holder.id]);
    } finally {
      await holder.release();
    }
  });

  it('answers 409 when the grant is force-released before the fence, with nothing written', async () => {
    const { loanId, resourceId } = await newLoan();
    // Hold the loan's row so the route's UPDATE waits inside withWriteLock, before its fence.
    const blocker = await db.knex.transaction();
    try {
      await blocker('loans').where({ id: loanId }).forUpdate().select('id');
      const granted = nextAcquire('asyncEnd', resourceId);
      const response = repay(short.url, loanId, { amountCents: 100 });
      const grant = (await granted).result as Grant;
      expect(await locks.forceRelease(grant.id, { reason: 'test: lost before the fence' })).toBe(true);
      await blocker.commit();
      const res = await response;
      expect(res.status).toBe(409);
      expect(await res.json()).toEqual({ error: 'conflict: nothing was written, try again' });
      expect(await rows(loanId)).toEqual({ repaid: 0, payments: [] });
      expect((await locks.history(resourceId)).grants[0]).toMatchObject({ id: grant.id, releasedBy: 'operator' });
      await expectLockFree(resourceId);
    } finally {
      if (!blocker.isCompleted()) await blocker.rollback();
    }
  });

  it('aborts the waiting acquire when the client disconnects, and writes nothing', async () => {
    const { loanId, resourceId } = await newLoan();
    const holder = await locks.acquireWrite(resourceId);
    try {
      const started = nextAcquire('start', resourceId);
      const failed = nextAcquire('error', resourceId);
      const client = request(`${long.url}/loans/${loanId}/repayments`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
      });
      const clientClosed = new Promise<void>((resolve) => client.once('close', resolve));
      client.on('error', () => {}); // the socket is destroyed on purpose
      client.end(JSON.stringify({ amountCents: 100 }));
      expect((await started).waitMs).toBe(LONG_WAIT_MS); // the route is waiting for the lock
      client.destroy();
      await clientClosed;
      // Without the signal this wait would last LONG_WAIT_MS and the test time out.
      expect((await failed).error).toBeInstanceOf(LockAbortedError);
    } finally {
      await holder.release();
    }
    expect(await rows(loanId)).toEqual({ repaid: 0, payments: [] });
    await expectLockFree(resourceId);
    expect((await locks.history(resourceId)).grants.map((g) => g.id)).toEqual([holder.id]); // the route got none
  });

  it('answers 500 naming nothing internal when the database fails, and releases the grant', async () => {
    const { loanId, resourceId } = await newLoan();
    await db.knex.raw('RENAME TABLE payments TO payments_away');
    try {
      const res = await repay(short.url, loanId, { amountCents: 100 });
      expect(res.status).toBe(500);
      expect(await res.text()).toBe('{"error":"internal error"}');
    } finally {
      await db.knex.raw('RENAME TABLE payments_away TO payments');
    }
    expect(await rows(loanId)).toEqual({ repaid: 0, payments: [] });
    expect((await locks.history(resourceId)).grants[0]).toMatchObject({ releasedBy: 'holder' });
    await expectLockFree(resourceId);
  });

  it('answers 400 to a malformed body without taking the lock', async () => {
    const { loanId, resourceId } = await newLoan();
    const res = await repay(short.url, loanId, '{"amountCents": ');
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: 'bad request' });
    expect((await locks.history(resourceId)).grants).toEqual([]);
  });
});
