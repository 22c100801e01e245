// The NestJS leader provider of docs/leader.md (examples/nestjs/outbox-leader.service.ts) run with
// @nestjs/testing on two app instances over one database: one leads and relays, its batches fenced by
// its term; app.close() on it (onModuleDestroy) hands over at once to the other, whose term is higher;
// nothing is held once both closed.
// covers: src/lock/leader/campaign.ts
import 'reflect-metadata';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { Knex } from 'knex';
import { afterAll, expect, it } from 'vitest';
import { createLockManager } from '../src/index.js';
import { MysqlRwlockModule } from '../src/nestjs/index.js';
import { DatabaseModule, KNEX } from '../examples/nestjs/database.module.js';
import { OutboxLeader } from '../examples/nestjs/outbox-leader.service.js';
import { databaseUrl } from '../harness/database.js';
import { useTestDatabase } from './support/db.js';

const db = useTestDatabase(import.meta.filename);
const apps: INestApplicationContext[] = [];

/** An app instance as the example's AppModule builds one (its own knex on MYSQL_URL), with the provider. */
async function instance(): Promise<INestApplicationContext> {
  process.env.MYSQL_URL = databaseUrl(db.url, db.name);
  const ref = await Test.createTestingModule({
    imports: [
      MysqlRwlockModule.forRootAsync({
        imports: [DatabaseModule],
        inject: [KNEX],
        useFactory: (knex: Knex) => ({ knex }),
      }),
      DatabaseModule,
    ],
    providers: [OutboxLeader],
  }).compile();
  const app = await ref.init();
  apps.push(app);
  return app;
}

async function relayed(): Promise<number[]> {
  const rows = (await db.knex('outbox_relayed').orderBy('id').select('term')) as Array<{ term: number | string }>;
  return rows.map((r) => Number(r.term));
}

afterAll(async () => {
  for (const app of apps) await app.close();
});

it('docs/leader.md carries the provider verbatim', () => {
  const doc = readFileSync(join(import.meta.dirname, '../docs/leader.md'), 'utf8');
  const source = readFileSync(join(import.meta.dirname, '../examples/nestjs/outbox-leader.service.ts'), 'utf8');
  expect(doc).toContain(`\`\`\`ts nocheck\n${source}\`\`\``);
});

it('one instance relays while it leads; closing it hands over at once to the other', async () => {
  await db.knex.raw('CREATE TABLE outbox_relayed (id BIGINT AUTO_INCREMENT PRIMARY KEY, term BIGINT NOT NULL)');
  const a = await instance();
  await expect.poll(async () => (await relayed()).length, { timeout: 20_000, interval: 100 }).toBeGreaterThan(0);
  const b = await instance();
  const first = (await relayed())[0]!;
  const observer = createLockManager({ knex: db.knex });
  const closedAt = performance.now();
  const closing = a.close();
  apps.splice(apps.indexOf(a), 1);
  await expect
    .poll(async () => (await observer.leader('outbox'))?.term ?? 0, { timeout: 5_000, interval: 20 })
    .toBeGreaterThan(first);
  const handOverMs = performance.now() - closedAt;
  console.log(`[nestjs-leader] app.close() of the leader: the other led after ${handOverMs.toFixed(0)} ms`);
  expect(handOverMs).toBeLessThan(1_000);
  await observer.close();
  await closing;
  // The new leader relays in its term (a batch a second).
  await expect.poll(async () => (await relayed()).at(-1), { timeout: 5_000, interval: 100 }).toBeGreaterThan(first);
  const terms = await relayed();
  expect(terms).toEqual([...terms].sort((x, y) => x - y));
  expect(new Set(terms).size).toBe(2);
  await b.close();
  apps.splice(apps.indexOf(b), 1);
  const [[live]] = (await db.knex.raw('SELECT COUNT(*) AS n FROM t_lock_log WHERE status = 0')) as unknown as [
    [{ n: number }],
  ];
  expect(Number(live.n)).toBe(0);
}, 60_000);
