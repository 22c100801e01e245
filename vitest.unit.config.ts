import { defineConfig } from 'vitest/config';

// The unit lane (`npm run test:unit`): pure code only, no database and no server to start, so it
// runs in seconds before the suites that need one. vitest.config.ts leaves test/unit/ to this file.
export default defineConfig({
  test: {
    include: ['test/unit/**/*.test.ts'],
    // As in vitest.config.ts: the JSON report lets .ci/run's closing line count these tests.
    reporters: ['default', 'json'],
    outputFile: { json: '.tmp/vitest-unit-report.json' },
  },
});
