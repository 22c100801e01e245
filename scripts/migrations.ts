// The frozen migration texts (migrations/sql/): written by this script, never by hand.
//   npm run migration:new -- <name>   freezes today's routine bodies (src/sql/routines.ts, built from
//                                     src/sql/decision.ts) that differ from the newest frozen ones as
//                                     migration NNN_<name>, and lists it in migrations/sql/index.ts
//   npm run migration:index           writes migrations/sql/index.ts from the files there
// A released text is never rewritten: test/unit/migration-texts.test.ts pins each one by its hash.
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { frozenModule, type Step } from '../migrations/frozen.js';
import { CURRENT_PROCEDURES, FROZEN_PROCEDURES, MIGRATIONS } from '../migrations/index.js';

process.chdir(fileURLToPath(new URL('..', import.meta.url)));
const DIR = 'migrations/sql';

/**
 * The index of the frozen texts, in their numbers' order, each with its pin: the SHA-256 of its text
 * when it was frozen. A pin already in the index is kept as it is, never computed again, so that an
 * edited text fails test/unit/migration-texts.test.ts.
 */
export function indexModule(pins: ReadonlyMap<string, string>): string {
  const names = [...pins.keys()].sort();
  const id = (name: string): string => `t${name.slice(0, 3)}`;
  return [
    "// The released migrations' frozen texts, in the order they run, each pinned by the SHA-256 of its text",
    '// when it was frozen: written by scripts/migrations.ts (`npm run migration:new`), never by hand.',
    ...names.map((n) => `import { TEXT as ${id(n)} } from './${n}.js';`),
    '',
    'export const RELEASED: readonly { name: string; text: string; sha256: string }[] = [',
    ...names.map((n) => `  { name: '${n}', text: ${id(n)}, sha256: '${pins.get(n)}' },`),
    '];',
    '',
  ].join('\n');
}

async function writeIndex(): Promise<void> {
  const pins = new Map<string, string>();
  // The pins of an index that exists, as they are; a new text's from its file.
  if (existsSync(`${DIR}/index.ts`))
    for (const r of (await import('../migrations/sql/index.js')).RELEASED) pins.set(r.name, r.sha256);
  for (const f of readdirSync(DIR).filter((f) => /^\d{3}_\w+\.ts$/.test(f))) {
    const name = f.replace(/\.ts$/, '');
    if (!pins.has(name)) pins.set(name, sha256((await import(`../${DIR}/${f.replace(/\.ts$/, '.js')}`)).TEXT));
  }
  writeFileSync(`${DIR}/index.ts`, indexModule(pins));
}

export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/**
 * The steps of a new migration: every current routine whose body is not the newest frozen one (its
 * down restores that one, or drops a routine new in it), and every frozen routine no longer current
 * (retired; its down restores it).
 */
export function newSteps(): Step[] {
  const ups: Step[] = [];
  const downs: Step[] = [];
  for (const [name, ddl] of Object.entries(CURRENT_PROCEDURES)) {
    const before = FROZEN_PROCEDURES[name];
    if (before?.ddl === ddl) continue;
    ups.push({ marker: `procedure ${name}`, text: ddl });
    downs.push(
      before === undefined
        ? { marker: `down drop procedure ${name}` }
        : { marker: `down restore ${name} from ${before.from}` },
    );
  }
  for (const [name, before] of Object.entries(FROZEN_PROCEDURES)) {
    if (name in CURRENT_PROCEDURES) continue;
    ups.unshift({ marker: `retire ${name}` });
    downs.push({ marker: `down restore ${name} from ${before.from}` });
  }
  return [...ups, ...downs];
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [command, label] = process.argv.slice(2);
  if (command === 'index') await writeIndex();
  else if (command === 'new') {
    if (label === undefined || !/^[a-z][a-z0-9_]*$/.test(label))
      throw new Error('usage: npm run migration:new -- <name> (lower case, digits and _)');
    const steps = newSteps();
    if (steps.length === 0) throw new Error('nothing to freeze: every current routine is the newest frozen one');
    const number = String(Number(MIGRATIONS.at(-1)!.name.slice(0, 3)) + 1).padStart(3, '0');
    const name = `${number}_${label}`;
    const file = `${DIR}/${name}.ts`;
    if (existsSync(file)) throw new Error(`${file} exists`);
    writeFileSync(file, frozenModule(name, steps));
    await writeIndex();
    execFileSync('npx', ['prettier', '--write', file, `${DIR}/index.ts`], { stdio: 'ignore' });
    process.stdout.write(
      `wrote ${file} (${steps.map((s) => s.marker).join('; ')})\n` +
        `next: npm run schema:sql > sql/schema.sql, ` +
        `and CLIENT_NEEDS in migrations/index.ts if lock managers need it\n`,
    );
  } else throw new Error('usage: tsx scripts/migrations.ts new <name> | index');
}
