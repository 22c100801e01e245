// Checks that each use file imports every name its entry point exports, and uses every name it
// imports (noUnusedLocals), with the TypeScript compiler API of a consumer app that has TypeScript 5.x
// installed (7.x has no JavaScript API). Reads `specifier file` lines (from prepare.mjs) on stdin.
// Usage: node coverage.mjs <app dir> <tsconfig file> < entries
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';

const [appDir, tsconfig] = process.argv.slice(2);
const ts = createRequire(join(resolve(appDir), 'package.json'))('typescript');
const entries = readFileSync(0, 'utf8')
  .trim()
  .split('\n')
  .map((line) => line.split(' '))
  .map(([specifier, file]) => ({ specifier, file: join(resolve(appDir), file) }));
const config = ts.getParsedCommandLineOfConfigFile(
  join(appDir, tsconfig),
  {},
  {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => {
      throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    },
  },
);
const program = ts.createProgram(
  entries.map((e) => e.file),
  { ...config.options, noUnusedLocals: true, noEmit: true },
);
const checker = program.getTypeChecker();
const problems = [];
for (const { specifier, file } of entries) {
  const source = program.getSourceFile(file);
  const imported = new Set();
  let moduleSymbol;
  for (const statement of source.statements) {
    if (!ts.isImportDeclaration(statement) || statement.moduleSpecifier.text !== specifier) continue;
    moduleSymbol = checker.getSymbolAtLocation(statement.moduleSpecifier);
    const bindings = statement.importClause?.namedBindings;
    if (bindings && ts.isNamedImports(bindings))
      for (const el of bindings.elements) imported.add((el.propertyName ?? el.name).text);
  }
  if (!moduleSymbol) {
    problems.push(`${file}: no import from '${specifier}' that resolves`);
    continue;
  }
  const exported = checker
    .getExportsOfModule(moduleSymbol)
    .map((s) => s.name)
    .filter((n) => n !== 'default');
  const missing = exported.filter((n) => !imported.has(n));
  if (missing.length)
    problems.push(`'${specifier}' exports ${missing.join(', ')}, which ${file} does not import and use`);
  console.log(
    `${specifier}: ${exported.length} exported names, ${missing.length ? `${missing.length} not` : 'all'} imported by ${file.slice(resolve(appDir).length + 1)}`,
  );
}
// Imported but unused (6133, 6192, 6196, 6198), or any other error in the use files. Only their
// diagnostics: the libraries' own are the matrix's type-checks' business, and computing them here
// doubled this check's time.
const diagnostics = entries
  .map((e) => program.getSourceFile(e.file))
  .flatMap((sf) => [...program.getSyntacticDiagnostics(sf), ...program.getSemanticDiagnostics(sf)]);
for (const d of diagnostics) {
  if (d.category !== ts.DiagnosticCategory.Error || !entries.some((e) => e.file === d.file?.fileName)) continue;
  const { line } = d.file.getLineAndCharacterOfPosition(d.start ?? 0);
  problems.push(`${d.file.fileName}:${line + 1}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`);
}
for (const p of problems) console.error(`consumer-matrix: ${p}`);
process.exit(problems.length ? 1 : 0);
