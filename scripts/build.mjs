// `npm run build` (also run through `prepare` by `npm pack`/`npm publish`, by `npm ci`/`npm install` in a
// checkout, and by npm when the package is installed from git): a clean dist/ from
// tsconfig.build.json, and the reaper bin made executable so `./node_modules/.bin/…` and a
// checkout's `dist/jobs/reaper.js` can be run directly (npm sets the mode on install as well).
//
// The test switches (src/test-switches.ts: what the negative controls turn to take a guard away) stay out of
// the build: each read of one, `testSwitches.<module>.<switch>`, is compiled as the switch's default, the
// library's own behaviour, and the module itself is not emitted, so nothing in dist/ can turn a guard off
// (test/unit/dist-switches.test.ts fails if dist/ holds a switch). The tests run the source, switches and all.
import { chmodSync, readFileSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

process.chdir(fileURLToPath(new URL('..', import.meta.url)));
rmSync('dist', { recursive: true, force: true });

const SWITCHES = resolve('src/test-switches.ts');
const configFile = ts.readConfigFile('tsconfig.build.json', ts.sys.readFile);
if (configFile.error) fail([configFile.error]);
const config = ts.parseJsonConfigFileContent(
  configFile.config,
  ts.sys,
  process.cwd(),
  undefined,
  'tsconfig.build.json',
);
if (config.errors.length > 0) fail(config.errors);
const program = ts.createProgram({ rootNames: config.fileNames, options: config.options });
const preEmit = ts.getPreEmitDiagnostics(program);
if (preEmit.length > 0) fail(preEmit);

/** Each switch's default, as the expression that replaces a read of it: `session.guard` -> `true`. */
function switchDefaults() {
  const file = program.getSourceFile(SWITCHES);
  if (!file) throw new Error(`${SWITCHES} is not in the program`);
  const defaults = new Map();
  const visit = (node) => {
    if (ts.isVariableDeclaration(node) && node.name.getText(file) === 'testSwitches') {
      if (!node.initializer || !ts.isObjectLiteralExpression(node.initializer))
        throw new Error('src/test-switches.ts: testSwitches is not initialized with an object literal');
      for (const group of node.initializer.properties) {
        if (!ts.isPropertyAssignment(group) || !ts.isObjectLiteralExpression(group.initializer))
          throw new Error(`src/test-switches.ts: ${group.getText(file)} is not \`name: { ... }\``);
        for (const entry of group.initializer.properties) {
          if (!ts.isPropertyAssignment(entry)) throw new Error(`src/test-switches.ts: ${entry.getText(file)}`);
          const value = entry.initializer;
          const known =
            value.kind === ts.SyntaxKind.TrueKeyword ||
            value.kind === ts.SyntaxKind.FalseKeyword ||
            (ts.isIdentifier(value) && value.text === 'undefined');
          if (!known)
            throw new Error(`src/test-switches.ts: ${entry.getText(file)}: a default must be true, false or undefined`);
          defaults.set(`${group.name.getText(file)}.${entry.name.getText(file)}`, value.kind);
        }
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  if (defaults.size === 0) throw new Error('src/test-switches.ts: no switches found');
  return defaults;
}
const defaults = switchDefaults();

/** Replaces each `testSwitches.a.b` with its default and drops the import of the switches' module. */
const withoutSwitches = (context) => (file) => {
  const { factory } = context;
  const literal = (kind) =>
    kind === ts.SyntaxKind.TrueKeyword
      ? factory.createTrue()
      : kind === ts.SyntaxKind.FalseKeyword
        ? factory.createFalse()
        : factory.createParenthesizedExpression(factory.createVoidZero()); // `(void 0)?.()` calls nothing
  const where = (node) => {
    const { line } = file.getLineAndCharacterOfPosition(node.getStart(file));
    return `${file.fileName}:${line + 1}`;
  };
  const visit = (node) => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      if (/(^|\/)test-switches\.js$/.test(node.moduleSpecifier.text)) return undefined;
    }
    if (
      ts.isPropertyAccessExpression(node) &&
      ts.isPropertyAccessExpression(node.expression) &&
      ts.isIdentifier(node.expression.expression) &&
      node.expression.expression.text === 'testSwitches'
    ) {
      const key = `${node.expression.name.text}.${node.name.text}`;
      if (!defaults.has(key)) throw new Error(`${where(node)}: testSwitches.${key} is not in src/test-switches.ts`);
      return literal(defaults.get(key));
    }
    if (ts.isIdentifier(node) && node.text === 'testSwitches')
      throw new Error(`${where(node)}: testSwitches used otherwise than as testSwitches.<module>.<switch>`);
    return ts.visitEachChild(node, visit, context);
  };
  return file.fileName === SWITCHES ? file : ts.visitNode(file, visit);
};

const emitted = program.emit(
  undefined,
  (fileName, text, writeByteOrderMark) => {
    // The switches' own module (its .js, .d.ts and maps) is not written.
    if (/\/src\/test-switches\.(js|d\.ts)(\.map)?$/.test(fileName)) return;
    ts.sys.writeFile(fileName, text, writeByteOrderMark);
  },
  undefined,
  false,
  { before: [withoutSwitches] },
);
if (emitted.diagnostics.length > 0) fail(emitted.diagnostics);

const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
for (const bin of Object.values(pkg.bin)) {
  if (!readFileSync(bin, 'utf8').startsWith('#!/usr/bin/env node\n'))
    throw new Error(`${bin} lacks the #!/usr/bin/env node line`);
  chmodSync(bin, 0o755);
}

function fail(diagnostics) {
  const host = { getCanonicalFileName: (f) => f, getCurrentDirectory: () => process.cwd(), getNewLine: () => '\n' };
  console.error(ts.formatDiagnosticsWithColorAndContext(diagnostics, host));
  process.exit(1);
}
