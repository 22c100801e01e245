import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { defineConfig, type Plugin } from 'vitest/config';

/**
 * Vite's transformer (oxc) lowers only experimentalDecorators, which it takes from the nearest
 * tsconfig.json (test/legacy-decorators/ has its own). These files use TypeScript 5+ standard
 * decorators, which Node 20 cannot parse: TypeScript itself compiles them, as an app's tsc would.
 */
const STANDARD_DECORATOR_FILES = ['/test/decorators.test.ts', '/test/exclusive-decorator.test.ts'];
const standardDecorators: Plugin = {
  name: 'typescript-standard-decorators',
  enforce: 'pre',
  transform(code, id) {
    if (!STANDARD_DECORATOR_FILES.some((f) => id.endsWith(f))) return undefined;
    const out = ts.transpileModule(code, {
      fileName: id,
      compilerOptions: {
        target: ts.ScriptTarget.ES2022,
        module: ts.ModuleKind.ESNext,
        experimentalDecorators: false,
        sourceMap: true,
        verbatimModuleSyntax: true,
      },
    });
    return { code: out.outputText, map: out.sourceMapText ?? null };
  },
};

const server = process.env.RWLOCK_TEST_SERVER;

/**
 * The tests of what is built on the lock's public calls rather than of the lock's statements: the CLI,
 * the operator page, the reaper's process, frameworks, ORMs, decorators, telemetry, the job helpers, the
 * docs' examples and the package's own shape. Each runs in the two full lanes of CI (MariaDB 10.11 and MySQL 9.7, with
 * stored procedures); `RWLOCK_TEST_SCOPE=protocol` leaves them out of the other lanes (another server
 * flavour, or the plain-statement acquire), whose only difference is below those calls and is covered
 * there by every protocol test.
 */
const BUILT_ON_THE_LOCK = [
  'test/cli.test.ts',
  'test/close.test.ts',
  'test/connection-url.test.ts',
  'test/cron-coordinator.test.ts',
  'test/dashboard.test.ts',
  'test/decorators.test.ts',
  'test/demo/**',
  'test/exclusive-decorator.test.ts',
  'test/exclusive-jobs.test.ts',
  'test/exports.test.ts',
  'test/frameworks.test.ts',
  'test/jobs-examples.test.ts',
  'test/legacy-decorators/**',
  'test/nestjs.test.ts',
  'test/nestjs-leader.test.ts',
  'test/leader-examples.test.ts',
  'test/orm/**',
  'test/otel.test.ts',
  'test/privileges-doc.test.ts',
  'test/prometheus.test.ts',
  'test/quickstart.test.ts',
  'test/reaper-job.test.ts',
  'test/tracing.test.ts',
];
const scope = process.env.RWLOCK_TEST_SCOPE;
if (scope !== undefined && scope !== 'protocol')
  throw new Error(`RWLOCK_TEST_SCOPE must be "protocol", not "${scope}"`);
const lane = `${server ? `-${server}` : ''}${process.env.RWLOCK_TEST_PROCEDURES === 'off' ? '-no-procedures' : ''}`;

/** Examples import the package by name, as an app does (tsconfig.json maps the same names for tsc). */
const PACKAGE_ENTRIES: Record<string, string> = {
  'mysql-rwlock': 'src/index.ts',
  'mysql-rwlock/admin': 'src/admin/index.ts',
  'mysql-rwlock/tracing': 'src/observability/tracing-entry.ts',
  'mysql-rwlock/decorators': 'src/decorators/index.ts',
  'mysql-rwlock/nestjs': 'src/nestjs/index.ts',
  'mysql-rwlock/cron': 'src/cron/index.ts',
  'mysql-rwlock/adapters': 'src/adapters/index.ts',
};

export default defineConfig({
  plugins: [standardDecorators],
  resolve: {
    alias: Object.entries(PACKAGE_ENTRIES).map(([name, file]) => ({
      find: new RegExp(`^${name}$`),
      replacement: fileURLToPath(new URL(file, import.meta.url)),
    })),
  },
  test: {
    include: ['test/**/*.test.ts'],
    // The reliability suite has its own config (vitest.faults.config.ts), and so do the unit lane
    // (vitest.unit.config.ts: pure code, no database), which holds the fault checker's own tests, and
    // the Spin model (vitest.model.config.ts).
    exclude: [
      'test/faults/**',
      'test/unit/**',
      'test/model/**',
      'node_modules/**',
      ...(scope === 'protocol' ? BUILT_ON_THE_LOCK : []),
    ],
    globalSetup: ['test/support/global-server.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // expect.poll awaits a condition the system promises to reach, not a time it promises to reach
    // it in: wait up to half a test's time, so a busy machine cannot fail it (the default is 1 s).
    expect: { poll: { timeout: 30_000 } },
    pool: 'forks',
    // Most of a file's time is spent waiting on the server (lock waits, leases, cutoffs), not on the
    // CPU: four files at a time, whatever the core count (vitest's default on 2 cores is one). On 2
    // cores the protocol lane took 167-176 s with three, 157 s with four and 144 s with five (2026-12-04).
    // Each file has its own database, and what a test reads of the server's lock views is of that database.
    maxWorkers: 4,
    // The JSON report lets .ci/run print a plain "N passed, N failed" line, one report per server
    // flavour and acquire path.
    reporters: ['default', 'json'],
    outputFile: { json: `.tmp/vitest-report${lane}.json` },
  },
});
