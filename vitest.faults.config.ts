import { defineConfig } from 'vitest/config';

// The reliability suite (issue 5): real servers it starts itself, worker processes, injected faults.
// Files run one at a time: the fault runs want the machine's two cores to themselves.
export default defineConfig({
  test: {
    include: ['test/faults/**/*.test.ts'],
    testTimeout: 600_000,
    hookTimeout: 300_000,
    // As in vitest.config.ts: expect.poll waits for a promised condition, not a promised time.
    expect: { poll: { timeout: 30_000 } },
    pool: 'forks',
    fileParallelism: false,
    reporters: ['default', 'json'],
    outputFile: { json: '.tmp/vitest-faults-report.json' },
  },
});
