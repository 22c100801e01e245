import type { Knex } from 'knex';
import type { AddedInPlace, CreatedIndex } from './conditional-ddl.js';
import * as m001 from './001_lock_tables.js';
import * as m002 from './002_acquire_v2.js';
import * as m003 from './003_mode_changes.js';
import * as m004 from './004_release_notes.js';
import * as m005 from './005_history_index.js';
import * as m006 from './006_invoker_routines.js';
import * as m007 from './007_utc_times.js';
import * as m008 from './008_resource_gate.js';
import * as m009 from './009_section_take.js';
import * as m010 from './010_permits.js';
import * as m011 from './011_group_acquire.js';
import * as m012 from './012_section_begin.js';

/** migrate()'s own bookkeeping table (knex's layout), which lock managers also read to check the schema's version. */
export const MIGRATION_TABLE = 'rwlock_migrations';

/** What a migration creates: `procedures: false` leaves stored routines out (see `migrate`). */
export interface MigrationOptions {
  procedures: boolean;
  /**
   * Where migrate() records applied migrations, and the batch of this run: a migration that
   * converts rows records itself in the same transaction, so that it converts them once.
   */
  record?: { table: string; batch: number };
}

export interface Migration {
  name: string;
  up(knex: Knex, options?: MigrationOptions): Promise<void>;
  down(knex: Knex): Promise<void>;
}

/**
 * Every migration, in order. Migrations are immutable once released; changes come as new files.
 * Each `up` is idempotent (CREATE ... IF NOT EXISTS, procedures dropped and recreated), so running
 * them all again in order rebuilds whatever a schema lacks.
 */
export const MIGRATIONS: readonly Migration[] = [
  { name: '001_lock_tables', up: m001.up, down: m001.down },
  { name: '002_acquire_v2', up: m002.up, down: m002.down },
  { name: '003_mode_changes', up: m003.up, down: m003.down },
  { name: '004_release_notes', up: m004.up, down: m004.down },
  { name: '005_history_index', up: m005.up, down: m005.down },
  { name: '006_invoker_routines', up: m006.up, down: m006.down },
  { name: '007_utc_times', up: m007.up, down: m007.down },
  { name: '008_resource_gate', up: m008.up, down: m008.down },
  { name: '009_section_take', up: m009.up, down: m009.down },
  { name: '010_permits', up: m010.up, down: m010.down },
  { name: '011_group_acquire', up: m011.up, down: m011.down },
  { name: '012_section_begin', up: m012.up, down: m012.down },
];

/** The procedures the current schema has, by name: each from the newest migration that defines it. */
export const CURRENT_PROCEDURES: Readonly<Record<string, string>> = {
  ...m007.PROCEDURES,
  ...m008.PROCEDURES,
  ...m009.PROCEDURES,
  ...m010.PROCEDURES,
  ...m011.PROCEDURES,
  ...m012.PROCEDURES,
};
/** Procedures earlier migrations created and a later one dropped: `migrate` drops them again if they reappear. */
export const RETIRED_PROCEDURES: readonly string[] = m006.RETIRED_PROCEDURES;
/** The tables the current schema has: created by the first, fourth and eighth migrations, then altered in place by these statements. */
export const CURRENT_TABLES: readonly string[] = [...m001.TABLES, ...m004.TABLES, ...m008.TABLES];
export const TABLE_CHANGES: readonly string[] = [
  ...m003.STATEMENTS,
  ...m005.STATEMENTS,
  ...m007.STATEMENTS,
  ...m010.STATEMENTS,
];
/** Rows converted once, guarded by the record of their migration in `table` (sql/schema.sql carries them). */
export const ROW_CONVERSIONS = (table: string): readonly { name: string; statements: readonly string[] }[] => [
  { name: '007_utc_times', statements: m007.conversion(table) },
];
/** What those statements add to the tables, so that `migrate` can tell when one was dropped. */
export const ADDED_IN_PLACE: readonly AddedInPlace[] = [m003.ADDS, m005.ADDS, m010.ADDS_LIMIT, m010.ADDS_PERMITS];
/** The indexes the tables were created with, and how to build each again in place. */
export const CREATED_INDEXES: readonly CreatedIndex[] = [...m001.INDEXES, ...m004.INDEXES];

/**
 * The newest migration the lock client's statements depend on: version 2's acquire (version 1's
 * refused most first users of a resource), version 3's column (downgrade, upgrade), version 7's UTC
 * times (a client writing UTC beside an acquire routine or rows in local time would misjudge every
 * grant's age by the zone's offset), version 8's gate (sections and writers take it; an acquire
 * that does not would let a writer in beside a reading section) and version 9's section take and
 * commit (one call each, which sections use wherever procedures are). Lock managers refuse a database
 * whose migrations stop short of it (see src/sql/schema-version.ts). The other migrations serve the
 * reaper and operators, which fail on their own missing objects, or change nothing the client reads.
 */
export const CLIENT_NEEDS = '010_permits';
