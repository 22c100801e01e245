// The released migrations are frozen texts (migrations/sql/), each pinned by its hash, and the
// current routine bodies, built from the decision's pieces (src/sql/decision.ts), are exactly the
// newest frozen text of each routine: so a released migration cannot be edited, and the pieces and
// the schema a database has cannot drift apart. No server: what a database runs is compared in
// test/schema.test.ts (sql/schema.sql against the migrations) and test/schema-version.test.ts.
// covers: src/sql/decision.ts, src/sql/routines.ts, src/sql/routines-acquire.ts, src/sql/routines-section.ts, migrations/index.ts
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { frozenModule, parseSteps } from '../../migrations/frozen.js';
import { CURRENT_PROCEDURES, FROZEN_PROCEDURES, MIGRATIONS } from '../../migrations/index.js';
import { RELEASED } from '../../migrations/sql/index.js';
import * as decision from '../../src/sql/decision.js';

const REPO = join(import.meta.dirname, '..', '..');
const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/** The released migrations whose text no longer has the hash it was pinned with. */
function edited(released: readonly { name: string; text: string; sha256: string }[]): string[] {
  return released.filter((r) => sha256(r.text) !== r.sha256).map((r) => r.name);
}

/** The routines whose current body is not the newest frozen text of it, or that only one side has. */
function drift(current: Readonly<Record<string, string>>, frozen: Readonly<Record<string, { ddl: string }>>): string[] {
  const names = new Set([...Object.keys(current), ...Object.keys(frozen)]);
  return [...names].filter((name) => current[name] !== frozen[name]?.ddl);
}

/** Literal SQL of the decision's pieces, as a hand-written copy would spell it. */
const PIECES = [
  decision.NO_HOLDER,
  decision.NO_WRITER_NOR_PERMITS,
  'w_wait_until IS NULL OR w_wait_until <',
  decision.PERMITS_HOLD,
  'r_count = r_count + 1',
  '(r_count = 0 OR (permit_limit =',
  'INTO t_lock_gate',
  'INTO t_read_write_lock (resource_id, w_count, r_count, version)',
  'SET w_wait_until =',
  decision.LOCKING.sharedNowaitMysql,
];

/** Where a source other than src/sql/decision.ts spells one of the pieces itself. */
function handWrittenCopies(sources: ReadonlyArray<[path: string, text: string]>): string[] {
  return sources
    .filter(([path]) => path !== join('src', 'sql', 'decision.ts'))
    .flatMap(([path, text]) => PIECES.filter((p) => text.includes(p)).map((p) => `${path}: ${p}`));
}

describe('released migrations are frozen', () => {
  it('every released text still has the hash it was pinned with', () => {
    expect(RELEASED.length).toBeGreaterThanOrEqual(12);
    expect(edited(RELEASED)).toEqual([]);
  });

  it('negative control: a released text edited by one character no longer matches its pin', () => {
    const [first, ...rest] = RELEASED;
    expect(edited([{ ...first!, text: `${first!.text} ` }, ...rest])).toEqual([first!.name]);
  });

  it('every file in migrations/sql/ is listed, in order, numbered one after another, and is what the script writes', () => {
    const files = readdirSync(join(REPO, 'migrations/sql'))
      .filter((f) => f !== 'index.ts')
      .map((f) => f.replace(/\.ts$/, ''))
      .sort();
    expect(RELEASED.map((r) => r.name)).toEqual(files);
    expect(MIGRATIONS.map((m) => m.name)).toEqual(files);
    files.forEach((name, i) => expect(Number(name.slice(0, 3)), name).toBe(i + 1));
    for (const r of RELEASED) {
      const file = readFileSync(join(REPO, 'migrations/sql', `${r.name}.ts`), 'utf8');
      // Formatted as prettier leaves it: the same text, and nothing but it, as scripts/migrations.ts wrote it.
      expect(file, r.name).toBe(frozenModule(r.name, parseSteps(r.text)));
    }
  });

  it('no migration module builds DDL of its own: the statements are in the frozen texts', () => {
    for (const f of readdirSync(join(REPO, 'migrations')).filter((f) => /^\d{3}_.*\.ts$/.test(f))) {
      const source = readFileSync(join(REPO, 'migrations', f), 'utf8');
      expect(source, f).not.toMatch(
        /CREATE (PROCEDURE|TABLE)|UPDATE t_|INSERT INTO|ALTER TABLE|\.replace(All)?\(|indexOf\(/,
      );
    }
  });
});

describe('the decision has one home', () => {
  it("the current routine bodies are the newest frozen migration's text of each routine", () => {
    expect(Object.keys(CURRENT_PROCEDURES).sort()).toEqual(Object.keys(FROZEN_PROCEDURES).sort());
    expect(drift(CURRENT_PROCEDURES, FROZEN_PROCEDURES)).toEqual([]);
  });

  it('negative control: a guard changed in the pieces alone drifts from the frozen routines that use it', () => {
    const changed = Object.fromEntries(
      Object.entries(CURRENT_PROCEDURES).map(([name, ddl]) => [
        name,
        ddl.replaceAll(decision.NO_WRITER_NOR_PERMITS, 'w_count = 0 AND r_count < 1000'),
      ]),
    );
    expect(drift(changed, FROZEN_PROCEDURES).sort()).toEqual([
      'rwlock_acquire',
      'rwlock_acquire_group',
      'rwlock_section_begin_bare',
      'rwlock_section_begin_one',
      'rwlock_section_take',
    ]);
  });

  it('every guard, gate take and intent is written once in src/: in src/sql/decision.ts', () => {
    const sources = (dir: string): Array<[string, string]> =>
      readdirSync(join(REPO, dir), { withFileTypes: true }).flatMap((e) =>
        e.isDirectory()
          ? sources(join(dir, e.name))
          : e.name.endsWith('.ts')
            ? [[join(dir, e.name), readFileSync(join(REPO, dir, e.name), 'utf8')] as [string, string]]
            : [],
      );
    expect(handWrittenCopies(sources('src'))).toEqual([]);
  });

  it('negative control: a guard written again by hand is found', () => {
    const copy = `UPDATE t_read_write_lock SET version = version + 1 WHERE resource_id = ? AND ${decision.NO_HOLDER}`;
    expect(handWrittenCopies([['src/lock/elsewhere.ts', `const TAKE = '${copy}';`]])).toEqual([
      `src/lock/elsewhere.ts: ${decision.NO_HOLDER}`,
    ]);
  });
});
