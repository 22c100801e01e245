// The test switches (src/test-switches.ts: each takes a guard away, for a negative control) do not ship:
// scripts/build.mjs compiles each read of one as its default and leaves the module out of dist/. Checked on
// the dist/ that `npm run build` made (`npm ci` and `npm pack` run it): no file of the switches' module, no
// import of it, and no `testSwitches` in the code of any emitted file (comments may name a switch). The
// control: the same check on what a plain compile of a module that reads switches emits finds them.
// covers: src/test-switches.ts
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '../..');
const dist = join(root, 'dist');

/** Every file under `dir`, as paths relative to the repository. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(root, join(e.parentPath, e.name)));
}

/** What of the switches a file holds: its name, an import of their module, `testSwitches` in its code. */
function switchesIn(file: string, text: string): string[] {
  const found: string[] = [];
  if (/(^|\/)test-switches\.[^/]*$/.test(file)) found.push(`${file}: the switches' module`);
  // A file whose text never names them holds none; the rest are parsed.
  if (!/\.(js|d\.ts)$/.test(file) || !/testSwitches|test-switches/.test(text)) return found;
  // The syntax tree: comments are not in it (a comment that names a switch turns nothing).
  const kind = file.endsWith('.d.ts') ? ts.ScriptKind.TS : ts.ScriptKind.JS;
  const tree = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, kind);
  const visit = (node: ts.Node): void => {
    if (ts.isIdentifier(node) && node.text === 'testSwitches')
      found.push(`${file}:${tree.getLineAndCharacterOfPosition(node.getStart(tree)).line + 1}: testSwitches`);
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier) &&
      /(^|\/)test-switches\.js$/.test(node.moduleSpecifier.text)
    )
      found.push(`${file}: imports ${node.moduleSpecifier.text}`);
    ts.forEachChild(node, visit);
  };
  visit(tree);
  return found;
}

describe('dist/ holds no test switch', () => {
  it('dist/ was built (npm run build)', () => {
    expect(existsSync(join(dist, 'src/index.js')), 'no dist/src/index.js: run npm run build').toBe(true);
  });

  it('no file, import or read of the switches in dist/', () => {
    const files = filesUnder(dist);
    expect(files.length).toBeGreaterThan(100);
    expect(files.flatMap((f) => switchesIn(f, readFileSync(join(root, f), 'utf8')))).toEqual([]);
  });

  it('control: the same check finds them in a plain compile of a module that reads them', () => {
    const source = 'src/sql/session.ts';
    const { outputText } = ts.transpileModule(readFileSync(join(root, source), 'utf8'), {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: true },
    });
    const found = switchesIn('dist/src/sql/session.js', outputText);
    expect(found).toContain('dist/src/sql/session.js: imports ../test-switches.js');
    expect(found.some((f) => f.endsWith(': testSwitches'))).toBe(true);
    expect(switchesIn('dist/src/test-switches.js', '')).toEqual(["dist/src/test-switches.js: the switches' module"]);
  });
});
