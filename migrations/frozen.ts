/*
 * The frozen text of a migration (migrations/sql/NNN_name.ts): its DDL as it was released, in
 * steps, each a marker line `-- rwlock:<what>` followed by its statement. Written once by a script
 * (scripts/migrations.ts) and never edited: test/unit/migration-texts.test.ts pins every text.
 *
 * Steps of `up`, run in the order written (migrations/run.ts):
 *   table                        CREATE TABLE ... IF NOT EXISTS
 *   index <table>.<name>         how to build again an index the table was created with (migrate's repair)
 *   add column|index <t>.<name>  an ALTER run only where the column or index is missing
 *   retire <name>                a procedure an earlier migration created, dropped where present
 *   procedure <name>             a CREATE PROCEDURE, dropped and created again (with `procedures`)
 *   procedure <name>, also where present without procedures
 *   statement                    a statement run as it is
 *   convert once                 rows converted in one transaction with the migration's record
 * Steps of `down`:
 *   down                         a statement run as it is
 *   down drop procedure <name>
 *   down restore <name> from <migration>   an earlier migration's text of that procedure
 */

/** One step: its marker (without `-- rwlock:`) and its statement, if it has one. */
export interface Step {
  marker: string;
  text?: string;
}

const MARK = '-- rwlock:';

/** The steps of a frozen text, each statement byte for byte as written. */
export function parseSteps(text: string): Step[] {
  const steps: Step[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith(MARK)) steps.push({ marker: line.slice(MARK.length) });
    else if (steps.length === 0) throw new Error(`a frozen migration text starts with a marker, not: ${line}`);
    else {
      const step = steps.at(-1)!;
      step.text = step.text === undefined ? line : `${step.text}\n${line}`;
    }
  }
  return steps;
}

/** The module that holds a migration's frozen text, as scripts/migrations.ts writes it. */
export function frozenModule(name: string, steps: readonly Step[]): string {
  const text = steps
    .map((s) => (s.text === undefined ? `${MARK}${s.marker}` : `${MARK}${s.marker}\n${s.text}`))
    .join('\n');
  if (JSON.stringify(parseSteps(text)) !== JSON.stringify(steps))
    throw new Error(`${name}: the text would not read back`);
  const literal = text.replaceAll('\\', '\\\\').replaceAll('`', '\\`').replaceAll('${', '\\${');
  return `// Migration ${name}, frozen: written once by scripts/migrations.ts and never edited again.
// test/unit/migration-texts.test.ts pins this text; a change to the schema is a new migration.
export const TEXT = \`${literal}\`;
`;
}
