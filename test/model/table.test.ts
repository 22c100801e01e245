// covers: docs/design.md
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const ROOT = new URL('../../', import.meta.url).pathname;

/** The rows of the action-to-statement table in docs/model.md: [file, name]. */
export function tableRows(page: string): Array<[file: string, name: string]> {
  if (!page.startsWith('# The model\n')) throw new Error('docs/model.md is not the page "The model"');
  const section = page;
  const rows: Array<[string, string]> = [];
  let inTable = false;
  for (const line of section.split('\n')) {
    if (/^\| model step \| what it abstracts \| file \| function \|$/.test(line)) {
      inTable = true;
      continue;
    }
    if (!inTable || /^\|---/.test(line)) continue;
    if (!line.startsWith('|')) break;
    const cells = line
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim().replace(/^`|`$/g, ''));
    rows.push([cells[2]!, cells[3]!]);
  }
  return rows;
}

/** Why a row is stale, or null when its file exists and declares the name. */
export function staleRow(file: string, name: string): string | null {
  const path = ROOT + file;
  if (!existsSync(path)) return `${file} does not exist`;
  const source = readFileSync(path, 'utf8');
  const declared = new RegExp(
    `(\\bfunction\\s+${name}\\b|\\b(const|let|var|class)\\s+${name}\\b|^\\s*(async\\s+)?#?${name}\\s*\\()`,
    'm',
  );
  return declared.test(source) ? null : `${file} declares no ${name}`;
}

describe("docs/model.md: the model's action-to-statement table", () => {
  const rows = tableRows(readFileSync(ROOT + 'docs/model.md', 'utf8'));

  it('names statements that exist', () => {
    expect(rows.length).toBeGreaterThan(10);
    expect(rows.map(([file, name]) => staleRow(file, name)).filter((r) => r !== null)).toEqual([]);
  });

  it('fails for a row naming a function or a file that is gone (negative control)', () => {
    expect(staleRow('src/sql/release.ts', 'releaseGrantById')).toBe('src/sql/release.ts declares no releaseGrantById');
    expect(staleRow('src/sql/gone.ts', 'releaseGrant')).toBe('src/sql/gone.ts does not exist');
    // A name that appears only in a call or a comment is not a declaration.
    expect(staleRow('src/lock/durable/grant.ts', 'releaseGrant')).toBe(
      'src/lock/durable/grant.ts declares no releaseGrant',
    );
    const fake =
      '# The model\n| model step | what it abstracts | file | function |\n|---|---|---|---|\n| x | y | `src/sql/release.ts` | `releaseEverything` |\n';
    expect(tableRows(fake).map(([f, n]) => staleRow(f, n))).toEqual([
      'src/sql/release.ts declares no releaseEverything',
    ]);
  });
});
