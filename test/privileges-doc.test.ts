// The docs' grants table is generated from src/admin/privileges.ts (npm run docs:grants): this
// fails while a README.md or docs/*.md with the markers holds another table. No database.
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { grantsTable } from '../src/admin/privileges.js';
import { END, START, filesWithMarkers, withCurrentTable } from '../scripts/grants-table.js';

const ROOT = join(import.meta.dirname, '..');

describe('the docs\' grants table', () => {
  const files = filesWithMarkers(ROOT);

  it('is in at least one file', () => {
    expect(files.map((f) => relative(ROOT, f))).not.toEqual([]);
  });

  it.each(files.map((f) => [relative(ROOT, f), f]))('%s holds the current table (else: npm run docs:grants)', (_name, file) => {
    const text = readFileSync(file, 'utf8');
    expect(text).toContain(grantsTable());
    expect(withCurrentTable(text, file)).toBe(text);
  });

  it('negative control: a table edited by hand, or written for another role list, is stale', () => {
    const current = withCurrentTable(`a\n${START}\n${END}\nb`);
    expect(withCurrentTable(current)).toBe(current);
    const edited = current.replace('`SELECT`, `UPDATE`, `DELETE` on `t_lock_log`', '`SELECT`, `UPDATE` on `t_lock_log`');
    expect(edited).not.toBe(current);
    expect(withCurrentTable(edited)).not.toBe(edited);
  });

  it('refuses a start marker without its end', () => {
    expect(() => withCurrentTable(`${START}\nno end`)).toThrow(/without/);
  });
});
