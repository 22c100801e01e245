// The waiter's backoff (src/lock/waiting/wait.ts): a full-jitter delay between the minimum and a cap that
// doubles per attempt, stops at the maximum, and never exceeds half the time already waited.
// Math.random is pinned to the ends of its range to read the bounds exactly.
// covers: src/lock/waiting/wait.ts
import { afterEach, describe, expect, it, vi } from 'vitest';
import { backoffDelay } from '../../src/lock/waiting/wait.js';

const lowest = (...args: Parameters<typeof backoffDelay>): number => {
  vi.spyOn(Math, 'random').mockReturnValue(0);
  return backoffDelay(...args);
};
const highest = (...args: Parameters<typeof backoffDelay>): number => {
  vi.spyOn(Math, 'random').mockReturnValue(1);
  return backoffDelay(...args);
};

afterEach(() => {
  vi.restoreAllMocks();
});

describe('backoffDelay', () => {
  it('never waits less than the minimum', () => {
    for (const attempt of [0, 1, 5, 40]) expect(lowest(attempt, 10, 1_000)).toBe(10);
  });

  it('doubles its cap per attempt up to the maximum, without overflowing on late attempts', () => {
    expect([0, 1, 2, 3, 4, 5, 6, 7].map((n) => highest(n, 10, 1_000))).toEqual([10, 20, 40, 80, 160, 320, 640, 1_000]);
    expect(highest(1_000, 10, 1_000)).toBe(1_000);
  });

  it('caps at half the time already waited, but not below the minimum', () => {
    expect(highest(10, 10, 1_000, 300)).toBe(150);
    expect(highest(10, 10, 1_000, 4)).toBe(10);
    expect(highest(10, 10, 1_000, 0)).toBe(10);
  });

  it('draws uniformly between the minimum and the cap', () => {
    vi.spyOn(Math, 'random').mockReturnValue(0.5);
    expect(backoffDelay(3, 10, 1_000)).toBe(45);
  });
});
