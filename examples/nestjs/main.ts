// The NestJS example as a program: MYSQL_URL=mysql://user:password@127.0.0.1:3306/app node main.js
import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import type { Knex } from 'knex';
import { AppModule } from './app.module.js';
import { KNEX } from './database.module.js';
import { RepaymentService } from './repayment.service.js';
import { createLoanTables } from './schema.js';

const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error', 'warn'] });
app.enableShutdownHooks(); // SIGTERM closes the lock manager, then the knex instance
try {
  const db = app.get<Knex>(KNEX);
  await createLoanTables(db);
  await db('loan').insert({ id: 'loan-7', balance_cents: 100_000 }).onConflict('id').ignore();
  const balance = await app.get(RepaymentService).repay('loan-7', 2_500);
  console.log(`repaid 25.00 on loan-7 under its write lock; balance now ${(balance / 100).toFixed(2)}`);
} finally {
  await app.close();
}
