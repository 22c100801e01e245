// The docs name a default by its `DEFAULTS` entry and never write its value again (one home for each
// default: src/options/defaults.ts). The patterns are derived from `DEFAULTS` itself: every leaf's value,
// written as a reader would (600000, 600_000, 600,000, 10 minutes, 600 s for `staleAfterMs`), is refused
// beside the word "default" ("default 10 s", "7 days by default"), beside its own entry's name
// ("`DEFAULTS.sectionIdleTimeoutMs` (10 s)") and in the "default" column of a table whose row names the
// option. Fenced code blocks are code, not prose, and are left out. Negative controls: lines that break
// each rule, and the forms the pages use, which pass.
// covers: src/options/defaults.ts, docs/options.md
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../src/options.js';

const root = join(import.meta.dirname, '../..');

type Leaf = { path: string; key: string; value: unknown };

function leaves(value: object, prefix = 'DEFAULTS.'): Leaf[] {
  return Object.entries(value).flatMap(([key, inner]): Leaf[] =>
    typeof inner === 'object' && inner !== null
      ? leaves(inner as object, `${prefix}${key}.`)
      : [{ path: `${prefix}${key}`, key, value: inner }],
  );
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** 600000 as written: 600000, 600_000, 600,000. */
function numerals(n: number): string[] {
  const grouped = (sep: string) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, sep);
  return [...new Set([String(n), grouped('_'), grouped(','), grouped(' ')])];
}

/** Every way a reader may see a leaf's value written in prose. */
export function renderings({ key, value }: Leaf): string[] {
  if (typeof value === 'boolean') return [String(value)];
  if (typeof value === 'string') return [`'${value}'`, `"${value}"`, `\`${value}\``, `\`'${value}'\``];
  if (typeof value !== 'number') return [];
  const forms = numerals(value);
  const units: Array<[number, string[]]> = [
    [86_400_000, ['days?', 'd']],
    [3_600_000, ['hours?', 'h']],
    [60_000, ['minutes?', 'min']],
    [1_000, ['seconds?', 's', 'sec']],
    [1, ['ms', 'milliseconds?']],
  ];
  const ms = /Ms$/.test(key) ? value : /Sec$/.test(key) ? value * 1_000 : null;
  if (ms !== null)
    for (const [size, names] of units)
      if (ms % size === 0 && ms / size > 0)
        for (const num of numerals(ms / size)) for (const name of names) forms.push(`${num} ${name}`);
  if (ms === 604_800_000) forms.push('a week', 'one week');
  return forms;
}

const LEAVES = leaves(DEFAULTS);
/**
 * A value as a whole token: not part of a longer number or word, and a bare number not followed by a unit
 * ("default 5 s" is no count of 5).
 */
const valuePattern = (forms: string[]) =>
  `(?<![\\w.,])\`?(?:${forms.map((f) => escape(f).replace('s\\?', 's?')).join('|')})\`?` +
  `(?![\\w]|[.,]\\d|\\s?(?:(?:ms|s|sec|seconds?|min|minutes?|h|hours?|d|days?)\\b|%|×))`;
/** Defaults of other packages, which `DEFAULTS` does not hold, said as such. */
const OTHERS = /node-cron's default/;
const ANY_VALUE = valuePattern(LEAVES.flatMap(renderings));
const NEAR_DEFAULT = [
  // "default 10 s", "(default `0`)", "defaults to 600000", "the default stays 500"
  new RegExp(`\\bdefaults?\\b(?<gap>[^.;\\n]{0,20}?)${ANY_VALUE}`, 'gi'),
  // "10 s by default", "7 days by default", "500 is the default"
  new RegExp(`${ANY_VALUE},?\\s+(?:by default|is the default|as the default)\\b`, 'gi'),
];

/** Per leaf, compiled once (a page has hundreds of lines): its name with its value beside it, and its value alone in a cell. */
const BESIDE = LEAVES.map((leaf) => ({
  leaf,
  named: new RegExp(`\`${escape(leaf.path)}\`\\s*(?:\\(|,|:|=)\\s*${valuePattern(renderings(leaf))}`),
  cell: new RegExp(`^${valuePattern(renderings(leaf))}$`),
}));

/** Lines of prose: fenced code blocks blanked, so line numbers stay those of the file. */
function prose(text: string): string[] {
  let fence: string | null = null;
  return text.split('\n').map((line) => {
    const marker = /^ {0,3}(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence === null && marker) {
      fence = marker;
      return '';
    }
    if (fence !== null) {
      if (marker && marker[0] === fence[0] && marker.length >= fence.length) fence = null;
      return '';
    }
    return line;
  });
}

/** Each place in `text` where a default's value is written instead of (or beside) its name. */
export function restated(where: string, text: string): string[] {
  const found: string[] = [];
  const lines = prose(text);
  let defaultColumn = -1;
  lines.forEach((line, i) => {
    const at = `${where}:${i + 1}`;
    for (const pattern of NEAR_DEFAULT)
      for (const m of line.matchAll(pattern))
        // "(default `DEFAULTS.purge.retentionMs`; `0` purges nothing)": the gap names the entry, and the value
        // after it is another thing's.
        if (!/DEFAULTS\.|LIMITS\./.test(m.groups?.gap ?? '') && !OTHERS.test(line))
          found.push(`${at}: a default's value written out: "${m[0].trim()}"`);
    for (const { leaf, named } of BESIDE)
      if (named.test(line)) found.push(`${at}: ${leaf.path} is named and its value written beside it`);
    // Tables: a "default" column whose cell is the value of the row's option.
    const cells = line.startsWith('|')
      ? line
          .split('|')
          .slice(1, -1)
          .map((c) => c.trim())
      : null;
    if (cells === null) defaultColumn = -1;
    else if (cells.some((c) => /^defaults?$/i.test(c))) defaultColumn = cells.findIndex((c) => /^defaults?$/i.test(c));
    else if (defaultColumn > 0 && !/^-+$/.test(cells[0] ?? '')) {
      const option = /^`(\w+)`/.exec(cells[0] ?? '')?.[1];
      const cell = cells[defaultColumn] ?? '';
      for (const { leaf, cell: value } of BESIDE.filter((b) => b.leaf.key === option))
        if (value.test(cell)) found.push(`${at}: the default column gives ${option}'s value instead of ${leaf.path}`);
    }
  });
  return found;
}

describe('the docs name each default by its DEFAULTS entry', () => {
  it('no page of docs/ writes a default value out', () => {
    const pages = readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md'));
    expect(pages.length).toBeGreaterThan(20);
    const found = pages.flatMap((page) => restated(`docs/${page}`, readFileSync(join(root, 'docs', page), 'utf8')));
    expect(found).toEqual([]);
  });

  it('derives its patterns from DEFAULTS', () => {
    const stale = LEAVES.find((l) => l.path === 'DEFAULTS.staleAfterMs')!;
    expect(renderings(stale)).toEqual(expect.arrayContaining(['600000', '600_000', '600,000', '10 minutes?', '600 s']));
    expect(renderings(LEAVES.find((l) => l.path === 'DEFAULTS.purge.retentionMs')!)).toContain('7 days?');
    expect(renderings(LEAVES.find((l) => l.path === 'DEFAULTS.reap.lockWaitTimeoutSec')!)).toContain('1 s');
  });

  it('negative controls: each form of a restated default is found', () => {
    const bad = [
      'A paused holder is bounded by `sectionIdleTimeoutMs` (default 10 s): ...',
      'The reaper releases grants older than the cutoff (default 10 minutes, on the database clock)',
      'grant for the retention period (7 days by default), so it grows',
      'under `count` permits (default 1) of the semaphore',
      "| `RunCoordinatorOptions` | `prefix` (default `'cron:'`), `lockAtLeastFor` (default `0`) |",
      'within the noise. The default stays 500.',
      '| `selfHeal` | `DEFAULTS.selfHeal` (`true`) | an acquire that is refused |',
      '(`DEFAULTS.maintenance.intervalMs`, 60 s; the first at once)',
      '| option | default | meaning |\n|---|---|---|\n| `lockAtLeastFor` | `0` | keep the grant |',
    ];
    for (const line of bad) expect(restated('x', line), line).not.toEqual([]);
    expect(restated('x', bad[4]!)).toHaveLength(2);
  });

  it('passes the forms the pages use, and code blocks', () => {
    const good = [
      '| `waitMs` | `DEFAULTS.waitMs` | how long to keep trying before `LockTimeoutError`; `0` is one attempt |',
      '`retentionMs` (default `DEFAULTS.purge.retentionMs`; `0` purges nothing)',
      'A section is bounded by `sectionIdleTimeoutMs` (default `DEFAULTS.sectionIdleTimeoutMs`).',
      'Measured on MySQL 9.7 with its defaults (binary log on, `sync_binlog=1`), one client',
      '```ts\nconst locks = createLockManager(db, { waitMs: 30_000 }); // default 30 s\n```',
      '| option | default | meaning |\n|---|---|---|\n| `stale` | `false` | only stale grants |',
      "rolled back by Prisma when it runs longer than its `timeout` (default 5 s; set it above your work's)",
      "`ttlMs` is the task's `distributedLease` (node-cron's default: 30 s)",
    ];
    for (const line of good) expect(restated('x', line), line).toEqual([]);
  });
});
