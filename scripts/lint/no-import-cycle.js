// An ESLint rule that forbids import cycles, type-only imports included (issue 22: "No import
// cycle, type-only included, enforced by the linter"). eslint-plugin-import-x's `no-cycle` skips
// every `import type`, so it cannot see the cycles this project cares about: a cycle of types still
// ties two modules' meaning together and hides a layer violation. The graph is built with
// TypeScript's own module resolution and import scanner, so `.js` specifiers that name `.ts` files,
// `paths` and `export … from` all count as edges the way the compiler sees them.
import { readFileSync, statSync } from 'node:fs';
import { relative, resolve } from 'node:path';
import ts from 'typescript';

/** tsconfig path → compiler options, read once per process. */
const optionsByConfig = new Map();
/** file → { mtimeMs, imports: [{ specifier, target }] }; re-read when the file changes (editors). */
const importsByFile = new Map();

function compilerOptions(configPath) {
  let options = optionsByConfig.get(configPath);
  if (!options) {
    const parsed = ts.getParsedCommandLineOfConfigFile(
      configPath,
      {},
      { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} },
    );
    options = parsed?.options ?? { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext };
    optionsByConfig.set(configPath, options);
  }
  return options;
}

/** The project files `file` imports (types, re-exports and dynamic imports included); packages are left out. */
function importsOf(file, options) {
  let mtimeMs;
  try {
    mtimeMs = statSync(file).mtimeMs;
  } catch {
    return [];
  }
  const cached = importsByFile.get(file);
  if (cached && cached.mtimeMs === mtimeMs) return cached.imports;
  const imports = [];
  for (const specifier of specifiersOf(file)) {
    const target = resolveImport(specifier, file, options);
    if (target) imports.push({ specifier, target });
  }
  importsByFile.set(file, { mtimeMs, imports });
  return imports;
}

/**
 * Module specifiers from the syntax tree: static imports and re-exports (type-only included), `import()`
 * calls and `import('…')` types. A tree, not ts.preProcessFile's scanner, which also reads the `import`
 * lines of code examples inside doc comments.
 */
function specifiersOf(file) {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const found = [];
  const visit = (node) => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      found.push(node.moduleSpecifier.text);
    } else if (
      ts.isImportTypeNode(node) &&
      ts.isLiteralTypeNode(node.argument) &&
      ts.isStringLiteral(node.argument.literal)
    ) {
      found.push(node.argument.literal.text);
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] &&
      ts.isStringLiteral(node.arguments[0])
    ) {
      found.push(node.arguments[0].text);
    } else if (
      ts.isImportEqualsDeclaration(node) &&
      ts.isExternalModuleReference(node.moduleReference) &&
      ts.isStringLiteral(node.moduleReference.expression)
    ) {
      found.push(node.moduleReference.expression.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

function resolveImport(specifier, from, options) {
  const resolved = ts.resolveModuleName(specifier, from, options, ts.sys).resolvedModule;
  if (!resolved || resolved.isExternalLibraryImport || /[\\/]node_modules[\\/]/.test(resolved.resolvedFileName))
    return undefined;
  return resolve(resolved.resolvedFileName);
}

/** The shortest import path from `start` back to `goal` (both included), or undefined when there is none. */
function pathBack(start, goal, options) {
  const previous = new Map([[start, undefined]]);
  const queue = [start];
  while (queue.length > 0) {
    const file = queue.shift();
    for (const { target } of importsOf(file, options)) {
      if (target === goal) {
        const route = [goal, file];
        for (let at = previous.get(file); at !== undefined; at = previous.get(at)) route.push(at);
        return route.reverse();
      }
      if (!previous.has(target)) {
        previous.set(target, file);
        queue.push(target);
      }
    }
  }
  return undefined;
}

export default {
  meta: {
    type: 'problem',
    docs: { description: 'Forbid import cycles between project modules, type-only imports included' },
    schema: [
      {
        type: 'object',
        properties: {
          tsconfig: {
            type: 'string',
            description: 'tsconfig.json used to resolve specifiers, relative to the working directory',
          },
        },
        additionalProperties: false,
      },
    ],
    messages: { cycle: 'Import cycle: {{route}}' },
  },
  create(context) {
    const file = resolve(context.physicalFilename);
    const options = compilerOptions(resolve(context.cwd, context.options[0]?.tsconfig ?? 'tsconfig.json'));
    const name = (path) => relative(context.cwd, path);
    function check(node) {
      let source = node.source ?? node.argument;
      if (source?.type === 'TSLiteralType') source = source.literal;
      if (source?.type !== 'Literal' || typeof source.value !== 'string') return;
      const target = resolveImport(source.value, file, options);
      if (!target || target === file) return;
      const route = pathBack(target, file, options);
      if (route) context.report({ node, messageId: 'cycle', data: { route: [file, ...route].map(name).join(' → ') } });
    }
    return {
      ImportDeclaration: check,
      ExportNamedDeclaration: check,
      ExportAllDeclaration: check,
      ImportExpression: check,
      TSImportType: check,
    };
  },
};
