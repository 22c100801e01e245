import type { Knex } from 'knex';
import * as m001 from './001_lock_tables.js';

export interface Migration {
  name: string;
  up(knex: Knex): Promise<void>;
  down(knex: Knex): Promise<void>;
}

/** Every migration, in order. Migrations are immutable once released; changes come as new files. */
export const MIGRATIONS: readonly Migration[] = [{ name: '001_lock_tables', up: m001.up, down: m001.down }];
