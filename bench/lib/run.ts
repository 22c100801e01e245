// Time-boxed closed-loop load: `concurrency` workers each run `op` back to back until the deadline.
import { setTimeout as sleep } from 'node:timers/promises';

export interface Sample {
  /** Completed operations (an op returning false is counted as an attempt, not an op). */
  ops: number;
  attempts: number;
  seconds: number;
  /** Latency of every completed op, ms. */
  latencies: number[];
  /** performance.now() at the start and end of the measured window. */
  from?: number;
  to?: number;
}

export interface Stats {
  opsPerSec: number;
  attemptsPerSec: number;
  p50: number;
  p99: number;
  max: number;
  ops: number;
}

/**
 * Runs `op(worker)` in `concurrency` loops for `ms` after `warmupMs` of unmeasured warm-up.
 * An op that returns `false` did not complete (e.g. a tryAcquire that found the lock held): it
 * counts as an attempt only.
 */
export async function runFor(
  ms: number, concurrency: number, op: (worker: number) => Promise<boolean | void>, warmupMs = Math.min(500, ms / 4),
): Promise<Sample> {
  const latencies: number[] = [];
  let ops = 0;
  let attempts = 0;
  let measuring = false;
  let stop = false;
  const worker = async (w: number): Promise<void> => {
    while (!stop) {
      const t0 = performance.now();
      const done = await op(w);
      const dt = performance.now() - t0;
      if (!measuring) continue;
      attempts++;
      if (done === false) continue;
      ops++;
      latencies.push(dt);
    }
  };
  const loops = Array.from({ length: concurrency }, (_, w) => worker(w));
  await sleep(warmupMs);
  measuring = true;
  const t0 = performance.now();
  await sleep(ms);
  measuring = false;
  const t1 = performance.now();
  const seconds = (t1 - t0) / 1000;
  stop = true;
  await Promise.all(loops);
  return { ops, attempts, seconds, latencies, from: t0, to: t1 };
}

export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i] as number;
}

export function sortedCopy(values: number[]): Float64Array {
  return Float64Array.from(values).sort();
}

export function stats(sample: Sample): Stats {
  const sorted = sortedCopy(sample.latencies);
  return {
    opsPerSec: sample.ops / sample.seconds,
    attemptsPerSec: sample.attempts / sample.seconds,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    max: sorted.length ? (sorted[sorted.length - 1] as number) : NaN,
    ops: sample.ops,
  };
}

/** Median of several stats by ops/s (used when a case is repeated to tame a noisy machine). */
export function medianStats(all: Stats[]): Stats {
  const byOps = [...all].sort((a, b) => a.opsPerSec - b.opsPerSec);
  return byOps[Math.floor((byOps.length - 1) / 2)] as Stats;
}
