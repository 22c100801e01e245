import { Inject, Module, type OnApplicationShutdown } from '@nestjs/common';
import knex, { type Knex } from 'knex';

/** The injection token of the application's knex instance. */
export const KNEX = 'KNEX';

/**
 * The application's knex, on MYSQL_URL (mysql://user:password@host:3306/database). Nest destroys it
 * in onApplicationShutdown, after every module's onModuleDestroy, so after the lock manager closed.
 */
@Module({
  providers: [
    { provide: KNEX, useFactory: (): Knex => knex({ client: 'mysql2', connection: process.env.MYSQL_URL! }) },
  ],
  exports: [KNEX],
})
export class DatabaseModule implements OnApplicationShutdown {
  constructor(@Inject(KNEX) private readonly db: Knex) {}

  async onApplicationShutdown(): Promise<void> {
    await this.db.destroy();
  }
}
