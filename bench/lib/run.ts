// Time-boxed closed-loop load: `concurrency` workers each run `op` back to back until the deadline.
import { readdirSync, readFileSync } from 'node:fs';
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
  /** CPU used in the window, µs: by this (client) process, and by the server process when known. */
  clientCpuUs?: number;
  serverCpuUs?: number;
}

let serverPid: number | undefined;
/**
 * Lets runFor (and serverCpuUs) measure the server process's CPU: a server on this machine, found
 * by port. Returns its pid, or undefined when it is not local (or not Linux).
 */
export function watchServerCpu(port: number): number | undefined {
  try {
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      let cmd = '';
      try {
        cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      } catch {
        continue;
      }
      if (
        /(mariadbd|mysqld)/.test(cmd) &&
        (cmd.includes(`--port=${port}\0`) || (port === 3306 && !cmd.includes('--port=')))
      ) {
        serverPid = Number(entry);
        return serverPid;
      }
    }
  } catch {
    // not Linux: no server CPU figures
  }
  return undefined;
}

/** utime + stime of the watched server process so far, µs (Linux, USER_HZ = 100). */
export function serverCpuUs(): number | undefined {
  if (serverPid === undefined) return undefined;
  try {
    const fields = readFileSync(`/proc/${serverPid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return undefined;
  }
}

export interface Stats {
  /** CPU per completed op, µs, client (this process) and server. */
  clientCpuUsPerOp?: number;
  serverCpuUsPerOp?: number;
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
  ms: number,
  concurrency: number,
  op: (worker: number) => Promise<boolean | void>,
  warmupMs = Math.min(500, ms / 4),
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
  const c0 = process.cpuUsage();
  const s0 = serverCpuUs();
  await sleep(ms);
  measuring = false;
  const t1 = performance.now();
  const c1 = process.cpuUsage(c0);
  const s1 = serverCpuUs();
  const seconds = (t1 - t0) / 1000;
  stop = true;
  await Promise.all(loops);
  const sample: Sample = { ops, attempts, seconds, latencies, from: t0, to: t1, clientCpuUs: c1.user + c1.system };
  if (s0 !== undefined && s1 !== undefined) sample.serverCpuUs = s1 - s0;
  return sample;
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
  const cpu: Partial<Stats> = {};
  if (sample.clientCpuUs !== undefined && sample.ops > 0) cpu.clientCpuUsPerOp = sample.clientCpuUs / sample.ops;
  if (sample.serverCpuUs !== undefined && sample.ops > 0) cpu.serverCpuUsPerOp = sample.serverCpuUs / sample.ops;
  return {
    ...cpu,
    opsPerSec: sample.ops / sample.seconds,
    attemptsPerSec: sample.attempts / sample.seconds,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    max: sorted.length ? (sorted[sorted.length - 1] as number) : NaN,
    ops: sample.ops,
  };
}

/** Several samples of one case as one. */
export function pooled(list: Sample[]): Sample {
  const sum = (f: (s: Sample) => number | undefined): number | undefined =>
    list.every((s) => f(s) !== undefined) ? list.reduce((a, s) => a + (f(s) as number), 0) : undefined;
  const out: Sample = {
    ops: sum((s) => s.ops) ?? 0,
    attempts: sum((s) => s.attempts) ?? 0,
    seconds: sum((s) => s.seconds) ?? 0,
    latencies: list.flatMap((s) => s.latencies),
  };
  const client = sum((s) => s.clientCpuUs);
  const server = sum((s) => s.serverCpuUs);
  if (client !== undefined) out.clientCpuUs = client;
  if (server !== undefined) out.serverCpuUs = server;
  return out;
}
