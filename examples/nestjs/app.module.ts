import { Module, type DynamicModule } from '@nestjs/common';
import type { Knex } from 'knex';
import { MysqlRwlockModule, type MysqlRwlockModuleOptions } from 'mysql-rwlock/nestjs';
import { AuditLog } from './audit.js';
import { RepaymentService } from './repayment.service.js';
import { TransferService } from './transfer.service.js';

@Module({ providers: [AuditLog, RepaymentService, TransferService], exports: [RepaymentService, TransferService] })
export class LoansModule {}

/** The application on a knex instance (the caller's: destroy it after `app.close()`). */
@Module({})
export class AppModule {
  static on(db: Knex, owner: string, migrate: MysqlRwlockModuleOptions['migrate'] = true): DynamicModule {
    return {
      module: AppModule,
      imports: [
        MysqlRwlockModule.forRootAsync({
          useFactory: async () => ({ knex: db, owner, migrate }),
        }),
        LoansModule,
      ],
    };
  }
}
