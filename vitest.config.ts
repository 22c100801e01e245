import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const server = process.env.RWLOCK_TEST_SERVER;
const lane = `${server ? `-${server}` : ''}${process.env.RWLOCK_TEST_PROCEDURES === 'off' ? '-no-procedures' : ''}`;

export default defineConfig({
  // The examples import the package by its name, as an app does; in this checkout that is the source
  // (the same mapping as tsconfig.json's paths), so they share the tests' copy of every class.
  resolve: {
    alias: [
      { find: /^mysql-rwlock$/, replacement: fileURLToPath(new URL('./src/index.ts', import.meta.url)) },
      { find: /^mysql-rwlock\/admin$/, replacement: fileURLToPath(new URL('./src/admin/index.ts', import.meta.url)) },
      {
        find: /^mysql-rwlock\/tracing$/,
        replacement: fileURLToPath(new URL('./src/observability/tracing-entry.ts', import.meta.url)),
      },
    ],
  },
  test: {
    include: ['test/**/*.test.ts'],
    // The reliability suite has its own config (vitest.faults.config.ts), and so do the unit lane
    // (vitest.unit.config.ts: pure code, no database), which holds the fault checker's own tests, and
    // the Spin model (vitest.model.config.ts).
    exclude: ['test/faults/**', 'test/unit/**', 'test/model/**', 'node_modules/**'],
    globalSetup: ['test/support/global-server.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // expect.poll awaits a condition the system promises to reach, not a time it promises to reach
    // it in: wait up to half a test's time, so a busy machine cannot fail it (the default is 1 s).
    expect: { poll: { timeout: 30_000 } },
    pool: 'forks',
    // The JSON report lets .ci/run print a plain "N passed, N failed" line, one report per server
    // flavour and acquire path.
    reporters: ['default', 'json'],
    outputFile: { json: `.tmp/vitest-report${lane}.json` },
  },
});
