import { Module } from '@nestjs/common';
import type { Knex } from 'knex';
import { MysqlRwlockModule } from 'mysql-rwlock/nestjs';
import { AuditLog } from './audit.js';
import { DatabaseModule, KNEX } from './database.module.js';
import { RepaymentService } from './repayment.service.js';
import { TransferService } from './transfer.service.js';

/** The loan services: they reach the lock's transaction through the injected LockManager. */
@Module({ providers: [AuditLog, RepaymentService, TransferService], exports: [RepaymentService, TransferService] })
export class LoansModule {}

@Module({
  imports: [
    MysqlRwlockModule.forRootAsync({
      // The factory's injections resolve in this module's own scope: import the module that exports KNEX.
      imports: [DatabaseModule],
      inject: [KNEX],
      useFactory: (knex: Knex) => ({ knex, migrate: true }),
    }),
    LoansModule,
  ],
})
export class AppModule {}
