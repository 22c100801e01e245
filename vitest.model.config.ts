import { defineConfig } from 'vitest/config';

// The Spin model of the lock protocol (model/rwlock.pml): no database, spin and gcc only.
export default defineConfig({
  test: {
    include: ['test/model/**/*.test.ts'],
    testTimeout: 600_000,
    pool: 'forks',
    // Read by .ci/run's closing line, with the other suites' reports.
    reporters: ['default', 'json'],
    outputFile: { json: '.tmp/vitest-model-report.json' },
  },
});
