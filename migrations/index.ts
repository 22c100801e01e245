import type { Knex } from 'knex';
import type { AddedInPlace, CreatedIndex } from './conditional-ddl.js';
import { CURRENT_ROUTINES } from '../src/sql/routines.js';
import { frozenMigration, type FrozenMigration } from './run.js';
import { RELEASED } from './sql/index.js';

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

const byName = new Map<string, FrozenMigration>();

/** An earlier migration's text of a procedure: what a `down` restores. */
function earlier(migration: string, procedure: string): string {
  const ddl = byName.get(migration)?.PROCEDURES[procedure];
  if (ddl === undefined) throw new Error(`migration ${migration} has no procedure ${procedure}`);
  return ddl;
}

/** Every released migration, read from its frozen text (migrations/sql/), in order. */
export const FROZEN: readonly FrozenMigration[] = RELEASED.map(({ name, text }) => {
  const m = frozenMigration(name, text, earlier);
  byName.set(name, m);
  return m;
});

/** A released migration by name: what the per-version modules (001_lock_tables.ts, …) export. */
export function frozen(name: string): FrozenMigration {
  const m = byName.get(name);
  if (m === undefined) throw new Error(`no released migration ${name}`);
  return m;
}

/**
 * Every migration, in order. Migrations are immutable once released (their texts are frozen and
 * pinned); changes come as new ones. Each `up` is idempotent (CREATE ... IF NOT EXISTS, procedures
 * dropped and recreated), so running them all again in order rebuilds whatever a schema lacks.
 */
export const MIGRATIONS: readonly Migration[] = FROZEN.map(({ name, up, down }) => ({ name, up, down }));

/** The procedures the current schema has, by name: built from the decision's pieces (src/sql/routines.ts). */
export const CURRENT_PROCEDURES: Readonly<Record<string, string>> = CURRENT_ROUTINES;

/**
 * What the frozen texts leave each procedure at: the newest migration's text of each, and which
 * migration that is; retired procedures left out. test/unit/migration-texts.test.ts holds it equal
 * to CURRENT_PROCEDURES, so that the pieces and the released schema cannot drift apart.
 */
export const FROZEN_PROCEDURES: Readonly<Record<string, { ddl: string; from: string }>> = (() => {
  const out: Record<string, { ddl: string; from: string }> = {};
  for (const m of FROZEN) {
    for (const name of m.RETIRED_PROCEDURES) delete out[name];
    for (const [name, ddl] of Object.entries(m.PROCEDURES)) out[name] = { ddl, from: m.name };
  }
  return out;
})();
/** Procedures earlier migrations created and a later one dropped: `migrate` drops them again if they reappear. */
export const RETIRED_PROCEDURES: readonly string[] = FROZEN.flatMap((m) => m.RETIRED_PROCEDURES);
/** The tables the current schema has, as created (version 1, 4, 8), then altered in place by these statements. */
export const CURRENT_TABLES: readonly string[] = FROZEN.flatMap((m) => m.TABLES);
export const TABLE_CHANGES: readonly string[] = FROZEN.flatMap((m) => m.STATEMENTS);
/** Rows converted once, guarded by the record of their migration in `table` (sql/schema.sql carries them). */
export const ROW_CONVERSIONS = (table: string): readonly { name: string; statements: readonly string[] }[] => {
  if (table !== MIGRATION_TABLE) throw new Error(`the frozen row conversions check ${MIGRATION_TABLE}, not ${table}`);
  return FROZEN.filter((m) => m.CONVERSION.length > 0).map((m) => ({ name: m.name, statements: m.CONVERSION }));
};
/** What those statements add to the tables, so that `migrate` can tell when one was dropped. */
export const ADDED_IN_PLACE: readonly AddedInPlace[] = FROZEN.flatMap((m) => m.ADDS);
/** The indexes the tables were created with, and how to build each again in place. */
export const CREATED_INDEXES: readonly CreatedIndex[] = FROZEN.flatMap((m) => m.INDEXES);

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
