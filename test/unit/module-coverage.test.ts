// Tests found in one step: each test file's header names the modules it covers on one `covers:` line,
// so `grep -rl "covers:.*src/lock/durable/grant.ts" test` lists a module's tests. Every module of src/
// is named by at least one header, every path a header names exists, and CONTRIBUTING.md's
// property→test table lists every test file. Negative controls: a module no header names, a path that
// does not exist and a test file the table leaves out are each reported. No server.
// covers: CONTRIBUTING.md
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Every file under `dir` (repository-relative, with `/`) whose name passes `keep`. */
function filesUnder(dir: string, keep: (name: string) => boolean): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((path) => keep(path))
    .map((path) => `${dir}/${path.split(sep).join('/')}`)
    .sort();
}

const TEST_FILES = filesUnder('test', (name) => name.endsWith('.test.ts'));
const MODULES = filesUnder('src', (name) => name.endsWith('.ts'));

/** The paths a test file's header (its leading // lines) names on its `covers:` line; [] without one. */
function coversOf(text: string): string[] {
  const header: string[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('//')) break;
    header.push(line);
  }
  const line = header.find((l) => l.startsWith('// covers:'));
  if (line === undefined) return [];
  return line
    .slice('// covers:'.length)
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '');
}

const HEADERS = new Map(TEST_FILES.map((f) => [f, coversOf(readFileSync(join(ROOT, f), 'utf8'))]));

/** The modules no header names. */
function uncovered(modules: readonly string[], headers: ReadonlyMap<string, readonly string[]>): string[] {
  const named = new Set([...headers.values()].flat());
  return modules.filter((m) => !named.has(m));
}

/** `file: path` for each path a header names that is not a file of the repository. */
function missingPaths(headers: ReadonlyMap<string, readonly string[]>): string[] {
  return [...headers].flatMap(([file, paths]) =>
    paths.filter((p) => !existsSync(join(ROOT, p))).map((p) => `${file}: ${p}`),
  );
}

/** The test files that no row of CONTRIBUTING.md's tables names. */
function leftOutOfTable(contributing: string, testFiles: readonly string[]): string[] {
  const rows = contributing.split('\n').filter((l) => l.startsWith('|'));
  const named = new Set(rows.flatMap((r) => [...r.matchAll(/`(test\/[^`]+\.test\.ts)`/g)].map((m) => m[1])));
  return testFiles.filter((f) => !named.has(f));
}

describe('every module of src/ has a test found by its name', () => {
  it('each test file names what it covers', () => {
    expect(TEST_FILES.length).toBeGreaterThan(90);
    expect([...HEADERS].filter(([, paths]) => paths.length === 0).map(([file]) => file)).toEqual([]);
  });

  it('every module of src/ is named by a test header, and every path named exists', () => {
    expect(MODULES.length).toBeGreaterThan(90);
    expect(uncovered(MODULES, HEADERS)).toEqual([]);
    expect(missingPaths(HEADERS)).toEqual([]);
  });

  it("CONTRIBUTING.md's property→test table lists every test file", () => {
    expect(leftOutOfTable(readFileSync(join(ROOT, 'CONTRIBUTING.md'), 'utf8'), TEST_FILES)).toEqual([]);
  });

  it('negative controls: a module no header names, a path gone, a test file left out of the table', () => {
    const module = 'src/lock/durable/grant.ts';
    const without = new Map([...HEADERS].map(([f, paths]) => [f, paths.filter((p) => p !== module)]));
    expect(uncovered(MODULES, without)).toEqual([module]);
    expect(uncovered([...MODULES, 'src/lock/new-room/untested.ts'], HEADERS)).toEqual([
      'src/lock/new-room/untested.ts',
    ]);
    expect(missingPaths(new Map([['test/x.test.ts', ['src/lock/gone.ts']]]))).toEqual([
      'test/x.test.ts: src/lock/gone.ts',
    ]);
    expect(coversOf('// a header\n// covers: src/a.ts, src/b.ts\nimport x;\n')).toEqual(['src/a.ts', 'src/b.ts']);
    expect(coversOf('import x;\n// covers: src/a.ts\n')).toEqual([]);
    expect(
      leftOutOfTable('| a row | `test/a.test.ts` |\nprose names `test/b.test.ts`\n', [
        'test/a.test.ts',
        'test/b.test.ts',
      ]),
    ).toEqual(['test/b.test.ts']);
  });
});
