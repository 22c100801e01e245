// Every `@defaultValue` in the TSDoc of src/ names its constant (`DEFAULTS.…`, `LIMITS.…`,
// `JOB_DEFAULTS.…`, `DASHBOARD_DEFAULTS.…`) instead of writing its value again: a number or a quoted
// text there is refused, a named entry must exist and be used by the code (outside comments), and a
// value shown beside it in parentheses must equal it. Negative controls: the same check on doc
// lines that break each rule.
// covers: src/options/defaults.ts, src/options/option-types.ts
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DASHBOARD_DEFAULTS } from '../../src/dashboard/serve.js';
import { DEFAULTS, LIMITS } from '../../src/options.js';
import { JOB_DEFAULTS } from '../../src/reaper-daemon/job.js';

const root = join(import.meta.dirname, '../..');
const CONSTANTS: Record<string, unknown> = { DEFAULTS, LIMITS, JOB_DEFAULTS, DASHBOARD_DEFAULTS };

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.isFile() && entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** The value at `path` (`DEFAULTS.list.limit`) of the constants, or undefined. */
function resolve(path: string): unknown {
  const [name, ...keys] = path.split('.');
  let value: unknown = CONSTANTS[name!];
  for (const key of keys) value = typeof value === 'object' && value !== null ? (value as never)[key] : undefined;
  return value;
}

/** A literal as written in a doc: 7300, 600_000, 'cron:', "x", true, false. */
function literal(text: string): unknown {
  if (/^-?[\d_]+(\.\d+)?$/.test(text)) return Number(text.replaceAll('_', ''));
  if (/^'.*'$|^".*"$/.test(text)) return text.slice(1, -1);
  if (text === 'true' || text === 'false') return text === 'true';
  return Symbol('not a literal');
}

/**
 * What is wrong with one `@defaultValue` text (the rest of its line), given the code of src/ without
 * comments; `where` names it in the messages.
 */
function problems(where: string, text: string, code: string): string[] {
  const found: string[] = [];
  const value = text.trim();
  if (/^[-\d]|^['"]|^`['"\d]/.test(value)) found.push(`${where}: a value where its constant should be named: ${value}`);
  for (const m of value.matchAll(
    /`((?:DEFAULTS|LIMITS|JOB_DEFAULTS|DASHBOARD_DEFAULTS)(?:\.\w+)+)`(?:\s*\(([^)]*)\))?/g,
  )) {
    const [, path, shown] = m;
    const actual = resolve(path!);
    if (actual === undefined || (typeof actual === 'object' && actual !== null))
      found.push(`${where}: ${path} is no entry of its constant`);
    else if (!new RegExp(`\\b${path!.replaceAll('.', '\\.')}\\b`).test(code))
      found.push(`${where}: ${path} is named here but the code never uses it`);
    // A literal in parentheses is a value shown beside the name: it must be the entry's. Words ("7 days") are prose.
    if (shown !== undefined && typeof literal(shown) !== 'symbol' && literal(shown) !== actual)
      found.push(`${where}: shows ${shown} beside ${path}, which is ${JSON.stringify(actual)}`);
  }
  return found;
}

const files = sourceFiles(join(root, 'src')).map((path) => ({
  file: relative(root, path),
  text: readFileSync(path, 'utf8'),
}));
const code = files.map((f) => f.text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '')).join('\n');
const tags = files.flatMap(({ file, text }) =>
  text.split('\n').flatMap((line, i) => {
    const m = /@defaultValue\s+(.*?)\s*(\*\/)?$/.exec(line);
    return m ? [{ where: `${file}:${i + 1}`, value: m[1]! }] : [];
  }),
);

describe('@defaultValue in the TSDoc of src/', () => {
  it('names its constant, an entry the code uses, and shows no other value beside it', () => {
    expect(tags.length).toBeGreaterThan(30);
    expect(tags.filter((t) => t.where.startsWith('src/options/')).length).toBeGreaterThan(15);
    expect(tags.flatMap((t) => problems(t.where, t.value, code))).toEqual([]);
  });

  it('negative controls: a number, a quoted text, an entry that is not one, an unused one, a wrong value shown', () => {
    const used = `${code}\nconst x = DEFAULTS.waitMs;`;
    expect(problems('a', '600000', used)).toHaveLength(1);
    expect(problems('b', "`'cron:'`", used)).toHaveLength(1);
    expect(problems('c', "'127.0.0.1': only this machine", used)).toHaveLength(1);
    expect(problems('d', '`DEFAULTS.staleAfterMS`', used)).toEqual([
      'd: DEFAULTS.staleAfterMS is no entry of its constant',
    ]);
    expect(problems('e', '`DEFAULTS.list`', used)).toEqual(['e: DEFAULTS.list is no entry of its constant']);
    expect(problems('f', '`DEFAULTS.waitMs`', 'const x = 1;')).toEqual([
      'f: DEFAULTS.waitMs is named here but the code never uses it',
    ]);
    expect(problems('g', '`DASHBOARD_DEFAULTS.port` (7301); 0 picks a free port', used)).toEqual([
      'g: shows 7301 beside DASHBOARD_DEFAULTS.port, which is 7300',
    ]);
    // And what passes: the forms the source uses.
    expect(problems('h', '`DASHBOARD_DEFAULTS.port` (7300); 0 picks a free port', used)).toEqual([]);
    expect(problems('i', 'false', used)).toEqual([]);
    expect(problems('j', '`DEFAULTS.waitMs` (30 s)', used)).toEqual([]);
  });
});

/** Every key path of `value` down to its leaves: `waitMs`, `list.limit`, … */
function leaves(value: object, prefix = ''): string[] {
  return Object.entries(value).flatMap(([key, inner]) =>
    typeof inner === 'object' && inner !== null ? leaves(inner as object, `${prefix}${key}.`) : [`${prefix}${key}`],
  );
}

describe('the docs list every entry of DEFAULTS and LIMITS', () => {
  // The paragraphs that list them, wherever in docs/ they are; a name followed by 's (`createLockManager`'s) is prose.
  const docs = readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => readFileSync(join(root, 'docs', f), 'utf8'))
    .join('\n');
  const paragraph = (start: string) => {
    const at = docs.indexOf(start);
    expect(at, start).toBeGreaterThanOrEqual(0);
    return docs.slice(at, docs.indexOf('\n\n', at));
  };
  const named = (text: string) => [...text.matchAll(/`([\w.]+)`(?!')/g)].map((m) => m[1]!);

  it('DEFAULTS: each leaf once, no other', () => {
    const listed = named(paragraph('`DEFAULTS` has at its top level')).filter((n) => n !== 'DEFAULTS');
    expect([...new Set(listed.filter((n) => n !== 'staleAfterMs'))].sort()).toEqual(
      leaves(DEFAULTS)
        .filter((n) => n !== 'staleAfterMs')
        .sort(),
    );
    expect(listed).toContain('staleAfterMs');
  });

  it('LIMITS: each entry, no other', () => {
    const listed = named(paragraph('`LIMITS` holds each bound')).filter((n) => n !== 'LIMITS');
    expect(listed.sort()).toEqual(Object.keys(LIMITS).sort());
  });
});
