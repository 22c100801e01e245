import { defineConfig } from 'vitest/config';

// The unit lane (`npm run test:unit`): pure code only, no database and no server to start, so it
// runs in seconds before the suites that need one. vitest.config.ts leaves test/unit/ to this file.
export default defineConfig({
  test: {
    include: ['test/unit/**/*.test.ts'],
    // A hang detector, not a speed check: on a busy 2-core CI machine a test that spawns a process
    // or walks every docs page can take several times its quiet duration (vitest's 5 s failed one).
    testTimeout: 60_000,
    // As in vitest.config.ts: the JSON report lets .ci/run's closing line count these tests.
    reporters: ['default', 'json'],
    outputFile: { json: '.tmp/vitest-unit-report.json' },
  },
});
