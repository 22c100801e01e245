// The lint rule that forbids import cycles (scripts/lint/no-import-cycle.js), run by ESLint on
// small projects written to a scratch folder: it must see a cycle made only of `import type`, which
// eslint-plugin-import-x's no-cycle skips, and report nothing once the cycle is broken.
// covers: scripts/lint/no-import-cycle.js
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ESLint } from 'eslint';
import tseslint from 'typescript-eslint';
import { afterAll, describe, expect, it } from 'vitest';
import noImportCycle from '../../scripts/lint/no-import-cycle.js';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** Lints every file of a scratch project with only this rule; returns `file:line message` lines. */
async function lint(files: Record<string, string>): Promise<string[]> {
  const dir = mkdtempSync(join(tmpdir(), 'rwlock-cycle-'));
  dirs.push(dir);
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true } }),
  );
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  const eslint = new ESLint({
    cwd: dir,
    overrideConfigFile: true,
    overrideConfig: [
      {
        files: ['**/*.ts'],
        languageOptions: { parser: tseslint.parser },
        plugins: { local: { rules: { 'no-import-cycle': noImportCycle } } },
        rules: { 'local/no-import-cycle': 'error' },
      },
    ],
  });
  const results = await eslint.lintFiles(Object.keys(files));
  return results
    .flatMap((r) => r.messages.map((m) => `${r.filePath.slice(dir.length + 1)}:${m.line} ${m.message}`))
    .sort();
}

// The first lint loads ESLint and the TypeScript parser: 9.5 s was seen on a busy 2-core machine. No
// property here is about time, so the bound only keeps a hung lint from running forever.
describe('no-import-cycle', { timeout: 60_000 }, () => {
  it('reports a cycle made only of type imports, on each import that closes it, with its route', async () => {
    const found = await lint({
      'a.ts': "import type { B } from './b.js';\nexport interface A { b: B }\n",
      'b.ts': "import { type A } from './a.js';\nexport interface B { a: A }\n",
    });
    expect(found).toEqual(['a.ts:1 Import cycle: a.ts → b.ts → a.ts', 'b.ts:1 Import cycle: b.ts → a.ts → b.ts']);
  });

  it('follows longer routes through folders, re-exports and import() types', async () => {
    const found = await lint({
      'lock/grant.ts': "import type { Options } from '../options.js';\nexport class Grant { o?: Options }\n",
      'options.ts': "export * from './tracing/index.js';\n",
      'tracing/index.ts': "export type Traced = import('../lock/grant.js').Grant;\n",
    });
    expect(found).toEqual([
      'lock/grant.ts:1 Import cycle: lock/grant.ts → options.ts → tracing/index.ts → lock/grant.ts',
      'options.ts:1 Import cycle: options.ts → tracing/index.ts → lock/grant.ts → options.ts',
      'tracing/index.ts:1 Import cycle: tracing/index.ts → lock/grant.ts → options.ts → tracing/index.ts',
    ]);
  });

  it('does not read the import lines of a code example inside a doc comment', async () => {
    const found = await lint({
      'index.ts': "export { run } from './run.js';\n",
      'run.ts':
        "/**\n * @example\n * ```ts\n * import { run } from './index.js';\n * ```\n */\nexport function run(): void {}\n",
    });
    expect(found).toEqual([]);
  });

  it('the control: the same modules with the cycle broken (the shared type in its own module) pass', async () => {
    const found = await lint({
      'types.ts': 'export interface A { b: B }\nexport interface B { a: A }\n',
      'a.ts': "import type { A } from './types.js';\nexport const a: A | undefined = undefined;\n",
      'b.ts':
        "import type { B } from './types.js';\nimport { a } from './a.js';\nexport const b: B | undefined = a?.b;\n",
    });
    expect(found).toEqual([]);
  });
});
