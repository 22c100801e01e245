// Every TSDoc `@example` of src/ type-checked as an app's module: its imports of 'mysql-rwlock',
// 'mysql-rwlock/decorators', … resolve through tsconfig.json's `paths` to the source, so an example
// that no longer matches the API fails here, in the unit lane, before any server starts. The packed
// package's .d.ts files are checked by .ci/consumer-matrix.sh; what an example says of them is here.
// Each example is its own module (`export {}` appended), compiled in one program with the options of
// tsconfig.json; ```ts nocheck blocks are counted, not compiled, and ```ts legacy-decorators blocks (a
// NestJS module) are compiled in a second program with experimentalDecorators, as a Nest app is.
// covers: src/lock/manager/manager.ts, src/contract/api.ts
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '../..');

interface Example {
  /** `src/lock/manager/manager.ts:94`: the file and the line of the opening fence. */
  where: string;
  /** The fence's words after `ts`: `nocheck`, `legacy-decorators` or none. */
  flags: string[];
  code: string;
}

/**
 * The ```ts blocks that follow an `@example` tag in the doc comments of `text`, with the leading
 * ` * ` of each line removed. An `@example` with no ```ts block after it is reported as a problem:
 * an example in another language, or unfenced, would be skipped without anyone knowing.
 */
function extractExamples(file: string, text: string): { examples: Example[]; problems: string[] } {
  const lines = text.split('\n');
  const examples: Example[] = [];
  const problems: string[] = [];
  const body = (line: string) => line.replace(/^\s*\*( |$)/, '');
  for (let i = 0; i < lines.length; i++) {
    if (!/^\s*\*\s*@example\b/.test(lines[i]!)) continue;
    let open = i + 1;
    while (open < lines.length && /^\s*\*\s*$/.test(lines[open]!)) open++;
    const fence = /^\s*\*\s*```(ts|typescript)\b(.*)$/.exec(lines[open] ?? '');
    if (!fence) {
      problems.push(`${file}:${i + 1}: @example without a \`\`\`ts block after it`);
      continue;
    }
    let end = open + 1;
    while (end < lines.length && !/^\s*\*\s*```\s*$/.test(lines[end]!)) {
      if (/^\s*\*\/\s*$/.test(lines[end]!)) break;
      end++;
    }
    if (end >= lines.length || !/^\s*\*\s*```\s*$/.test(lines[end]!)) {
      problems.push(`${file}:${open + 1}: \`\`\`ts block not closed inside its comment`);
      continue;
    }
    examples.push({
      where: `${file}:${open + 1}`,
      flags: fence[2]!.trim().split(/\s+/).filter(Boolean),
      code: lines
        .slice(open + 1, end)
        .map(body)
        .join('\n'),
    });
    i = end;
  }
  return { examples, problems };
}

/**
 * The tsconfig.json options (with its `paths`), no emit; unused names allowed, as in an app's
 * `strict` config: an example may declare what it illustrates without using it.
 */
function compilerOptions(extra: ts.CompilerOptions = {}): ts.CompilerOptions {
  const configFile = join(root, 'tsconfig.json');
  const { config, error } = ts.readConfigFile(configFile, ts.sys.readFile);
  if (error) throw new Error(ts.flattenDiagnosticMessageText(error.messageText, '\n'));
  const parsed = ts.parseJsonConfigFileContent(config, ts.sys, root, undefined, configFile);
  return {
    ...parsed.options,
    noEmit: true,
    declaration: false,
    sourceMap: false,
    noUnusedLocals: false,
    noUnusedParameters: false,
    ...extra,
  };
}

/**
 * Type-checks each example as a module of its own, placed in the checkout (so `paths` and the
 * package's `"type": "module"` apply) but read from memory. Returns the diagnostics of the examples'
 * own files, each as `where:line: message` (line within the example).
 */
const parsed = new Map<string, ts.SourceFile | undefined>();
function typeCheck(examples: Example[], extra: ts.CompilerOptions = {}): string[] {
  const options = compilerOptions(extra);
  const dir = join(root, '.tsdoc-examples');
  const files = new Map<string, Example>();
  examples.forEach((example, n) => files.set(join(dir, `example-${n}.ts`), example));
  const host = ts.createCompilerHost(options, true);
  const { getSourceFile, fileExists, readFile } = host;
  host.fileExists = (name) => files.has(name) || fileExists.call(host, name);
  host.readFile = (name) => {
    const example = files.get(name);
    return example ? `${example.code}\nexport {};\n` : readFile.call(host, name);
  };
  host.getSourceFile = (name, language, ...rest) => {
    const example = files.get(name);
    if (example) return ts.createSourceFile(name, `${example.code}\nexport {};\n`, language, true);
    // The two programs (standard and legacy decorators) share the files they both read, parsed once.
    const key = `${name}\0${JSON.stringify(language)}`;
    let file = parsed.get(key);
    if (!file) parsed.set(key, (file = getSourceFile.call(host, name, language, ...rest)));
    return file;
  };
  const program = ts.createProgram([...files.keys()], options, host);
  const out: string[] = [];
  for (const [name, example] of files) {
    const sourceFile = program.getSourceFile(name)!;
    const diagnostics = [...program.getSyntacticDiagnostics(sourceFile), ...program.getSemanticDiagnostics(sourceFile)];
    for (const d of diagnostics) {
      const line = d.start === undefined ? 0 : sourceFile.getLineAndCharacterOfPosition(d.start).line + 1;
      out.push(`${example.where} (+${line}): ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`);
    }
  }
  return out;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.isFile() && entry.name.endsWith('.ts') ? [path] : [];
  });
}

const all = sourceFiles(join(root, 'src')).map((path) =>
  extractExamples(relative(root, path), readFileSync(path, 'utf8')),
);
const examples = all.flatMap((r) => r.examples);
const standard = examples.filter((e) => !e.flags.includes('nocheck') && !e.flags.includes('legacy-decorators'));
const legacy = examples.filter((e) => e.flags.includes('legacy-decorators'));

// A doc comment written as the source's are, with an example that calls the API wrongly.
const BROKEN = `
/**
 * Waits for a write lock.
 *
 * @example
 * \`\`\`ts
 * import type { LockManager } from 'mysql-rwlock';
 * declare const locks: LockManager;
 *
 * const grant = await locks.acquireWrite('invoice:42', { waitSeconds: 5 });
 * await grant.release();
 * \`\`\`
 */
function f(): void {}
`;

describe('TSDoc @example blocks of src/', () => {
  it('every @example is a closed ```ts block', () => {
    expect(all.flatMap((r) => r.problems)).toEqual([]);
    const tags = sourceFiles(join(root, 'src'))
      .map((path) => readFileSync(path, 'utf8').match(/^\s*\*\s*@example\b/gm)?.length ?? 0)
      .reduce((a, b) => a + b, 0);
    expect(examples.length).toBe(tags);
    expect(examples.length).toBeGreaterThan(30);
  });

  it('every example type-checks against the package as an app imports it (negative control: a wrong option)', () => {
    const broken = extractExamples('broken.ts', BROKEN);
    expect(broken.problems).toEqual([]);
    expect(broken.examples).toHaveLength(1);
    // One program: the broken example is compiled beside the real ones, so the same checker that
    // passes them is the one that must catch it.
    const diagnostics = typeCheck([...standard, ...broken.examples]);
    expect(diagnostics.filter((d) => !d.startsWith('broken.ts:'))).toEqual([]);
    expect(diagnostics.filter((d) => d.startsWith('broken.ts:'))).toEqual([
      expect.stringMatching(/^broken\.ts:6 \(\+4\): .*'waitSeconds' does not exist/),
    ]);
  }, 60_000);

  it("every example type-checks under this TypeScript's tsc --init options (control: MYSQL_URL unchecked)", () => {
    // What `tsc --init` writes for a new project (exactOptionalPropertyTypes, verbatimModuleSyntax, target
    // esnext, ...), read from its output; "types": ["node"] as its comments ask of a Node project.
    const dir = mkdtempSync(join(tmpdir(), 'tsc-init-'));
    let init: ts.CompilerOptions;
    try {
      const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
      execFileSync(process.execPath, [tsc, '--init'], { cwd: dir, stdio: 'ignore' });
      const text = readFileSync(join(dir, 'tsconfig.json'), 'utf8');
      const json = ts.parseConfigFileTextToJson('tsconfig.json', text);
      if (json.error) throw new Error(ts.flattenDiagnosticMessageText(json.error.messageText, '\n'));
      init = ts.convertCompilerOptionsFromJson(json.config.compilerOptions, dir).options;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(init.exactOptionalPropertyTypes).toBe(true);
    const control = extractExamples(
      'unchecked-url.ts',
      [
        '/**',
        ' * @example',
        ' * ```ts',
        " * import knex from 'knex';",
        '',
        " * knex({ client: 'mysql2', connection: process.env.MYSQL_URL });",
        ' * ```',
        ' */',
      ].join('\n'),
    ).examples;
    expect(control).toHaveLength(1);
    const options = {
      ...init,
      types: ['node'],
      noEmit: true,
      declaration: false,
      declarationMap: false,
      sourceMap: false,
    };
    const diagnostics = typeCheck([...standard, ...control], options);
    expect(diagnostics.filter((d) => !d.startsWith('unchecked-url.ts:'))).toEqual([]);
    expect(diagnostics).toEqual([
      expect.stringMatching(/^unchecked-url\.ts:3 \(\+3\): Argument of type .*with .exactOptionalPropertyTypes: true./),
    ]);
  }, 60_000);

  it('the legacy-decorators examples type-check with experimentalDecorators, as a Nest app compiles', () => {
    expect(legacy.length).toBeGreaterThan(0);
    expect(typeCheck(legacy, { experimentalDecorators: true })).toEqual([]);
  }, 60_000);

  it('no example is left out as ts nocheck', () => {
    expect(examples.filter((e) => e.flags.includes('nocheck')).map((e) => e.where)).toEqual([]);
  });
});
