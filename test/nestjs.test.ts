// The NestJS example (examples/nestjs/) run with @nestjs/testing against the real server: two
// instances of its AppModule as written (each its own knex and LockManager, as two processes) on one
// database, only the knex provider given this file's database. The module migrates at bootstrap (with
// stored procedures, as the example says, in every lane); a repayment (write lock) and a claim
// transfer (read lock) on one loan exclude each other, two transfers share it (the negative control:
// the same observation sees overlap); app.close() closes the manager, unregisters it from the
// decorators and destroys the instance's knex.
// covers: src/nestjs/index.ts
import 'reflect-metadata';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Test } from '@nestjs/testing';
import type { INestApplicationContext } from '@nestjs/common';
import type { Knex } from 'knex';
import { afterAll, describe, expect, it } from 'vitest';
import {
  createLockManager,
  InvalidOptionsError,
  ManagerClosedError,
  type Grant,
  type LockManager,
} from '../src/index.js';
import { Exclusive, WithWriteLock } from '../src/decorators/index.js';
import { LOCK_MANAGER, MysqlRwlockModule } from '../src/nestjs/index.js';
import { connectKnex } from '../harness/database.js';
import { AppModule } from '../examples/nestjs/app.module.js';
import { AuditLog } from '../examples/nestjs/audit.js';
import { KNEX } from '../examples/nestjs/database.module.js';
import { RepaymentService } from '../examples/nestjs/repayment.service.js';
import { TransferService } from '../examples/nestjs/transfer.service.js';
import { createLoanTables } from '../examples/nestjs/schema.js';
import { useTestDatabase } from './support/db.js';

const db = useTestDatabase(import.meta.filename, { migrate: false });

/** The audit of the real app, which also notes each call's entry and can hold a call inside its lock. */
class GatedAudit extends AuditLog {
  readonly events: string[];
  readonly holds = new Map<string, Promise<void>>();
  constructor(events: string[]) {
    super();
    this.events = events;
  }
  override async record(trx: Knex.Transaction, event: 'repay' | 'transfer', loanId: string): Promise<void> {
    this.events.push(`enter ${event}`);
    await super.record(trx, event, loanId);
    await this.holds.get(event);
    this.events.push(`exit ${event}`);
  }
}

interface Instance {
  app: INestApplicationContext;
  knex: Knex;
  audit: GatedAudit;
  repayments: RepaymentService;
  transfers: TransferService;
  locks: LockManager;
}

const apps: INestApplicationContext[] = [];
afterAll(async () => {
  for (const app of apps) await app.close();
});

async function instance(events: string[]): Promise<Instance> {
  const audit = new GatedAudit(events);
  const knex = connectKnex(db.url, db.name);
  const moduleRef = await Test.createTestingModule({ imports: [AppModule] })
    .overrideProvider(KNEX)
    .useValue(knex)
    .overrideProvider(AuditLog)
    .useValue(audit)
    .compile();
  const app = await moduleRef.init();
  apps.push(app);
  return {
    app,
    knex,
    audit,
    repayments: app.get(RepaymentService),
    transfers: app.get(TransferService),
    locks: app.get<LockManager>(LOCK_MANAGER),
  };
}

function gate(): { open: () => void; hold: Promise<void> } {
  let open!: () => void;
  const hold = new Promise<void>((resolve) => (open = resolve));
  return { open, hold };
}

describe('the NestJS example', () => {
  const events: string[] = [];
  let a: Instance;
  let b: Instance;

  it('bootstraps two instances; the module migrated the database and provides the manager', async () => {
    await expect(db.knex.raw('SELECT 1 FROM t_lock_log LIMIT 1')).rejects.toThrow(/t_lock_log/);
    a = await instance(events);
    b = await instance(events);
    await db.knex.raw('SELECT 1 FROM t_lock_log LIMIT 1');
    expect(a.locks.owner).not.toBe(b.locks.owner);
    expect(a.app.get(KNEX)).toBe(a.knex);
    await createLoanTables(db.knex);
    await db.knex('loan').insert({ id: 'loan-1', balance_cents: 100_000 });
    expect(await a.repayments.repay('loan-1', 2_500)).toBe(97_500);
    expect(await b.transfers.transferClaim('loan-1', 'fund-x')).toBe(97_500);
    const { grants } = await a.locks.history('loan:loan-1');
    expect(grants.map((g) => [g.mode, g.releasedBy])).toEqual([
      ['read', 'holder'],
      ['write', 'holder'],
    ]);
  });

  it('a repayment waits for a transfer in progress on the loan, and runs after it', async () => {
    events.length = 0;
    const transferring = gate();
    b.audit.holds.set('transfer', transferring.hold);
    const transfer = b.transfers.transferClaim('loan-1', 'fund-y');
    await expect.poll(() => events).toContain('enter transfer');
    const repayment = a.repayments.repay('loan-1', 1_000);
    // The repayment is queued on the lock in the database, not merely slow to start.
    await expect.poll(async () => (await a.locks.inspect('loan:loan-1')).writerWaiting).toBe(true);
    expect(events).toEqual(['enter transfer']);
    transferring.open();
    expect(await transfer).toBe(97_500);
    expect(await repayment).toBe(96_500);
    expect(events).toEqual(['enter transfer', 'exit transfer', 'enter repay', 'exit repay']);
    b.audit.holds.clear();
  });

  it('negative control: two transfers on the loan run together, seen by the same observation', async () => {
    events.length = 0;
    const transferring = gate();
    a.audit.holds.set('transfer', transferring.hold);
    b.audit.holds.set('transfer', transferring.hold);
    const transfers = [a.transfers.transferClaim('loan-1', 'fund-1'), b.transfers.transferClaim('loan-1', 'fund-2')];
    await expect.poll(() => events).toEqual(['enter transfer', 'enter transfer']);
    transferring.open();
    expect(await Promise.all(transfers)).toEqual([96_500, 96_500]);
    a.audit.holds.clear();
    b.audit.holds.clear();
  });

  it('app.close() closes its manager and then destroys its knex, and the other instance keeps working', async () => {
    await a.app.close();
    await expect(a.locks.acquireWrite('loan:loan-1')).rejects.toThrow(ManagerClosedError);
    // A destroyed knex refuses queries: the DatabaseModule's onApplicationShutdown ran.
    await expect(a.knex.raw('SELECT 1')).rejects.toThrow(/Unable to acquire a connection/);
    await expect(a.repayments.repay('loan-1', 1)).rejects.toThrow(ManagerClosedError);
    expect(await b.repayments.repay('loan-1', 500)).toBe(96_000);
  });

  it('registers its manager for decorated methods that name none, until app.close()', async () => {
    // A method with no LockManager member and no manager option (decorated by a direct call: this
    // file is not compiled with decorators). The last module to start registered its manager: b's.
    const touch = WithWriteLock((loanId: string) => `loan:${loanId}`)(
      async (loanId: string) => b.locks.current(`loan:${loanId}`)?.grant.mode,
      { kind: 'method', name: 'touch' } as ClassMethodDecoratorContext<
        unknown,
        (loanId: string) => Promise<string | undefined>
      >,
    );
    expect(await touch('loan-1')).toBe('write');
    await b.app.close();
    await expect(touch('loan-1')).rejects.toThrow(InvalidOptionsError);
  });

  it('docs/decorators.md carries the example files verbatim', () => {
    const page = readFileSync(join(import.meta.dirname, '../docs/decorators.md'), 'utf8');
    for (const file of ['database.module.ts', 'app.module.ts', 'repayment.service.ts']) {
      const source = readFileSync(join(import.meta.dirname, '../examples/nestjs', file), 'utf8');
      expect(page, `docs/decorators.md does not carry examples/nestjs/${file}`).toContain(
        `\`\`\`ts nocheck\n${source}\`\`\``,
      );
    }
  });

  it("resolves forRootAsync's inject only from the modules it imports (as database.module.ts is)", async () => {
    // Negative control for the example's shape: the same knex provider in the root module instead of
    // in forRootAsync's imports is out of the lock module's scope, and Nest refuses to bootstrap.
    const outOfScope = Test.createTestingModule({
      imports: [MysqlRwlockModule.forRootAsync({ inject: [KNEX], useFactory: (knex: Knex) => ({ knex }) })],
      providers: [{ provide: KNEX, useValue: db.knex }],
    }).compile();
    await expect(outOfScope).rejects.toThrow(/can't resolve dependencies[\s\S]*KNEX/);
  });

  it('refuses bad module options at bootstrap, with nothing written', async () => {
    const before = await db.knex('t_lock_log').count({ n: '*' });
    const bad = Test.createTestingModule({
      imports: [MysqlRwlockModule.forRoot({ knex: db.knex, staleAfterMs: -1, migrate: true })],
    }).compile();
    await expect(bad).rejects.toThrow(InvalidOptionsError);
    expect(() => MysqlRwlockModule.forRootAsync({} as never)).toThrow(InvalidOptionsError);
    expect(await db.knex('t_lock_log').count({ n: '*' })).toEqual(before);
  });
});

describe('@Exclusive in a Nest app: current(name) is the job’s grant, whatever lockAtLeastFor', () => {
  type Job = () => Promise<unknown>;
  const context = (name: string): ClassMethodDecoratorContext<unknown, Job> =>
    ({ kind: 'method', name }) as ClassMethodDecoratorContext<unknown, Job>;

  it.each([0, 1_000])('lockAtLeastFor %i: the knex form and { grant: true }', async (lockAtLeastFor) => {
    const app = await (
      await Test.createTestingModule({
        imports: [MysqlRwlockModule.forRoot({ knex: db.knex, migrate: true })],
      }).compile()
    ).init();
    apps.push(app);
    const locks = app.get<LockManager>(LOCK_MANAGER);
    const options = { lockAtMostFor: 60_000, lockAtLeastFor };
    // Decorated by a direct call, as above; the module registered its manager for them.
    const report = `nest-report-${lockAtLeastFor}`;
    const viaTrx = Exclusive(report, options)(async () => {
      const held = locks.current(report);
      // The docs' form: the job's writes through current(name)?.trx.
      await held!.trx!.raw('SELECT 1');
      return [held?.grant.resourceId, held?.trx !== undefined];
    }, context('viaTrx'));
    expect(await viaTrx()).toEqual([report, true]);
    const sync = `nest-sync-${lockAtLeastFor}`;
    const viaGrant = Exclusive(sync, { ...options, grant: true })(async () => {
      const held = locks.current(sync);
      return [held?.grant.resourceId, held?.trx, (held?.grant as Grant | undefined)?.mode];
    }, context('viaGrant'));
    expect(await viaGrant()).toEqual([sync, undefined, 'write']);
    const { grants } = await locks.list({ limit: 100 });
    expect(grants.every((g) => g.resourceId === report || g.resourceId === sync)).toBe(true);
    await app.close(); // closes the manager, which waits for the holds after the runs
    const after = createLockManager({ knex: db.knex });
    expect([...(await after.inspect(report)).holders, ...(await after.inspect(sync)).holders]).toEqual([]);
  });
});
