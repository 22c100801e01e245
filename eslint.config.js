// `npm run lint` runs this over every source folder, then `prettier --check .` (the formatter owns
// layout; eslint-config-prettier turns off the rules that would fight it).
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import importX from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';
import noImportCycle from './scripts/lint/no-import-cycle.js';

export default tseslint.config(
  {
    ignores: [
      'dist/',
      'node_modules/',
      '.tmp/',
      'coverage/',
      'docs/reference/',
      'bench/results/',
      'test/orm/prisma/generated/',
    ],
  },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    files: ['**/*.{js,mjs}'],
    // Plain JavaScript here is Node code (configs, scripts); tsc does not check it, so no-undef does.
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly', Buffer: 'readonly' } },
  },
  {
    plugins: { 'import-x': importX, local: { rules: { 'no-import-cycle': noImportCycle } } },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // Pairs with tsconfig's verbatimModuleSyntax, in the style the code already has: `import { a, type B }`.
      '@typescript-eslint/consistent-type-imports': [
        'error',
        { prefer: 'type-imports', fixStyle: 'inline-type-imports' },
      ],
      // Under verbatimModuleSyntax `import { type A }` stays in the output as a side-effect import.
      '@typescript-eslint/no-import-type-side-effects': 'error',
      // Imports first: a re-export or a statement between imports hides what a module depends on.
      'import-x/first': 'error',
      'import-x/no-duplicates': ['error', { 'prefer-inline': true }],
      // A `let` read by a handler set up before its one assignment (signal handlers first) stays a `let`.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // `_`-prefixed names are the deliberate way to keep a position (a callback's unused argument).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' },
      ],
    },
  },
  {
    // The library and its thin entry points: no import cycle, type-only imports included.
    files: ['src/**/*.ts', 'migrations/**/*.ts', 'jobs/**/*.ts'],
    rules: { 'local/no-import-cycle': 'error' },
  },
  {
    // The Drizzle recipe, which docs/orms.md carries verbatim, types a transaction over any schema the way
    // Drizzle's own types do (MySqlTransaction<…, any, any>): a disable comment there would be copied into
    // every user's code.
    files: ['test/orm/drizzle.test.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  prettier,
);
