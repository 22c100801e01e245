import type { Knex } from 'knex';
import { runOnOneConnection, unlessPresent, type AddedInPlace, type CreatedIndex } from './conditional-ddl.js';
import { parseSteps, type Step } from './frozen.js';
import { replaceProcedures } from './procedures.js';

/** migrations/index.ts's MigrationOptions (not imported: the index imports this file). */
export interface UpOptions {
  procedures: boolean;
  record?: { table: string; batch: number };
}

/** What a frozen text holds, read once: the exports a migration module had, and its `up` and `down`. */
export interface FrozenMigration {
  name: string;
  steps: readonly Step[];
  /** Its procedures, by name: each a full CREATE PROCEDURE statement. */
  PROCEDURES: Readonly<Record<string, string>>;
  TABLES: readonly string[];
  INDEXES: readonly CreatedIndex[];
  /** The columns and indexes it adds in place, and the statements that add each only where missing. */
  ADDS: readonly AddedInPlace[];
  STATEMENTS: readonly string[];
  RETIRED_PROCEDURES: readonly string[];
  /** Rows it converts once, in one transaction with its record in `rwlock_migrations`. */
  CONVERSION: readonly string[];
  up(knex: Knex, options?: UpOptions): Promise<void>;
  down(knex: Knex): Promise<void>;
}

const PROCEDURE = /^procedure (\w+)(, also where present without procedures)?$/;
const ADD = /^add (column|index) (\w+)\.(\w+)$/;
const INDEX = /^index (\w+)\.(\w+)$/;
const RESTORE = /^down restore (\w+) from (\w+)$/;

function body(step: Step): string {
  if (step.text === undefined) throw new Error(`frozen step "${step.marker}" has no statement`);
  return step.text;
}

function addOf(step: Step): AddedInPlace | null {
  const m = ADD.exec(step.marker);
  return m === null ? null : { kind: m[1] as 'column' | 'index', table: m[2]!, name: m[3]! };
}

async function procedureExists(knex: Knex, name: string): Promise<boolean> {
  const [rows] = (await knex.raw(
    "SELECT COUNT(*) AS n FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_TYPE = 'PROCEDURE' AND ROUTINE_NAME = ?",
    [name],
  )) as unknown as [Array<{ n: number | string }>];
  return Number(rows[0]?.n) > 0;
}

/**
 * A migration from its frozen text. `earlier` finds an earlier migration's text of a procedure,
 * for a `down` that restores it. Each `up` is idempotent, as migrate() re-runs them all to rebuild
 * what a schema lacks: tables IF NOT EXISTS, in-place additions only where missing, procedures
 * dropped and created again.
 */
export function frozenMigration(
  name: string,
  text: string,
  earlier: (migration: string, procedure: string) => string,
): FrozenMigration {
  const steps = parseSteps(text);
  const of = (marker: string): Step[] => steps.filter((s) => s.marker === marker);
  const procedures = steps.flatMap((s) => {
    const m = PROCEDURE.exec(s.marker);
    return m === null ? [] : [{ name: m[1]!, ddl: body(s), wherePresent: m[2] !== undefined }];
  });
  const adds = steps.flatMap((s) => {
    const what = addOf(s);
    return what === null ? [] : [{ what, statements: unlessPresent(what, body(s)) }];
  });
  const conversion = of('convert once').map(body);

  async function up(knex: Knex, options: UpOptions = { procedures: true }): Promise<void> {
    for (let i = 0; i < steps.length; i++) {
      const step = steps[i]!;
      if (step.marker === 'table' || step.marker === 'statement') await knex.raw(body(step));
      else if (step.marker.startsWith('retire ')) {
        // Looked up first: with `procedures: false` the migrating user may lack ALTER ROUTINE.
        const retired = step.marker.slice('retire '.length);
        if (await procedureExists(knex, retired)) await knex.raw(`DROP PROCEDURE IF EXISTS ${retired}`);
      } else if (addOf(step) !== null && (i === 0 || addOf(steps[i - 1]!) === null)) {
        // Every in-place addition together, on one connection: they share a session variable.
        await runOnOneConnection(
          knex,
          adds.flatMap((a) => a.statements),
        );
      } else if (PROCEDURE.test(step.marker) && (i === 0 || !PROCEDURE.test(steps[i - 1]!.marker))) {
        const wanted: Record<string, string> = {};
        for (const p of procedures)
          if (options.procedures || (p.wherePresent && (await procedureExists(knex, p.name)))) wanted[p.name] = p.ddl;
        await replaceProcedures(knex, wanted);
      } else if (step.marker === 'convert once' && of('convert once')[0] === step) {
        await convertOnce(knex, name, conversion, options.record);
      }
    }
  }

  async function down(knex: Knex): Promise<void> {
    for (const step of steps) {
      const restore = RESTORE.exec(step.marker);
      if (step.marker === 'down') await knex.raw(body(step));
      else if (step.marker.startsWith('down drop procedure '))
        await knex.raw(`DROP PROCEDURE IF EXISTS ${step.marker.slice('down drop procedure '.length)}`);
      else if (restore !== null) await replaceProcedures(knex, { [restore[1]!]: earlier(restore[2]!, restore[1]!) });
    }
  }

  return {
    name,
    steps,
    PROCEDURES: Object.fromEntries(procedures.map((p) => [p.name, p.ddl])),
    TABLES: of('table').map(body),
    INDEXES: steps.flatMap((s) => {
      const m = INDEX.exec(s.marker);
      return m === null ? [] : [{ kind: 'index' as const, table: m[1]!, name: m[2]!, rebuild: body(s) }];
    }),
    ADDS: adds.map((a) => a.what),
    STATEMENTS: [...adds.flatMap((a) => a.statements), ...of('statement').map(body)],
    RETIRED_PROCEDURES: steps.filter((s) => s.marker.startsWith('retire ')).map((s) => s.marker.slice(7)),
    CONVERSION: conversion,
    up,
    down,
  };
}

/**
 * Rows converted once: migrate() passes where it records migrations, and the conversion runs in
 * one transaction that also writes the record, so a repeated `up` (which migrate() runs to rebuild
 * dropped objects) never converts them twice. Without a record (a direct call of `up`) there is no
 * record to tell a second run by, and the rows are left as they are.
 */
async function convertOnce(
  knex: Knex,
  name: string,
  statements: readonly string[],
  record: UpOptions['record'],
): Promise<void> {
  if (record === undefined) return;
  await knex.transaction(async (trx) => {
    const [recorded] = (await trx.raw(`SELECT COUNT(*) AS n FROM ${record.table} WHERE name = ? FOR UPDATE`, [
      name,
    ])) as unknown as [Array<{ n: number | string }>];
    if (Number(recorded[0]?.n) > 0) return;
    for (const sql of statements) await trx.raw(sql);
    // migrate() then finds it recorded and does not record it again.
    await trx.raw(`INSERT INTO ${record.table} (name, batch, migration_time) VALUES (?, ?, CURRENT_TIMESTAMP)`, [
      name,
      record.batch,
    ]);
  });
}
