// What workers, reapers and the orchestrator write down, one JSON object per line. Lines are
// appended synchronously so a SIGKILLed process leaves a history complete up to the kill.
import { appendFileSync, existsSync, readFileSync } from 'node:fs';

/** The owners of grants the orchestrator takes itself: a pause injector's witness, the final liveness probe. */
export const WITNESS_OWNER = 'witness';
export const PROBE_OWNER = 'liveness-probe';

/** Wall-clock milliseconds from the monotonic clock: comparable across processes on one machine. */
export function now(): number {
  return performance.timeOrigin + performance.now();
}

/** `permit`: the work of `withPermit` on a semaphore (a fenced read of its counter). */
export type OpKind = 'write' | 'read' | 'permit';
export type Outcome = 'ok' | 'fail' | 'unknown';

/**
 * One business operation of a worker:
 *  - `invoke`   the worker asks for the lock (withWriteLock / withReadLock / acquireRead);
 *  - `granted`  the work function started (or acquire returned) with grant `grant` on `resource`; an
 *               operation on several resources logs one per resource, a section without a grant row none;
 *  - `waiting`  (acquisition one resource at a time, the caller-order control only) the operation,
 *               holding what it was granted so far, asks for `resource`;
 *  - `downgraded` | `upgraded` grant `grant` changed mode in place (the call resolved);
 *  - `work-done` the business statements ran; the fenced commit (or the commit) is next;
 *  - `commit-ok` (manual read path only) the business transaction committed, release is next;
 *  - `ok` | `fail` | `unknown` the operation ended; `unknown` = outcome indeterminate.
 * A killed worker's last operation simply has no end event: the checker treats it as unknown.
 */
export interface OpEvent {
  t: number;
  w: string;
  op: string;
  kind: OpKind;
  resource: string;
  ev: 'invoke' | 'granted' | 'waiting' | 'downgraded' | 'upgraded' | 'work-done' | 'commit-ok' | Outcome;
  /** One-commit section (the lock taken by the business transaction's first statement). */
  section?: boolean;
  /** On `invoke` of an operation on several resources: every resource it names (one business row each). */
  resources?: string[];
  grant?: number;
  /** For reads: the counter value seen. */
  seen?: number;
  /** Error code or name for fail/unknown. */
  err?: string;
  /** For `ok` of a manual read: whether the explicit release returned true. */
  released?: boolean;
  /** On `granted` of a permit: the semaphore's limit the operation asked for (it may change mid-run). */
  limit?: number;
}

/** One reaper run. */
export interface ReaperRun {
  reaper: string;
  start: number;
  end: number;
  reaped: number[];
  skipped: number;
  error?: string;
}

/** A fault the orchestrator injected, with the evidence that it hit what it was aimed at. */
export interface FaultEvent {
  t: number;
  kind: FaultKind;
  /** True when the evidence shows it hit a live grant (or, for server kills, a server with live grants). */
  proven: boolean;
  grant?: number;
  worker?: string;
  detail?: string;
}

export type FaultKind =
  | 'sigkill-before'
  | 'sigkill-during'
  | 'sigkill-after'
  | 'sigstop-past-cutoff'
  | 'kill-connection'
  | 'commit-reply-lost'
  | 'server-sigkill'
  | 'galera-node-sigkill'
  | 'gr-primary-sigkill'
  | 'gr-node-sigkill'
  | 'async-primary-sigkill'
  | 'concurrent-reapers'
  | 'reaper-vs-commit';

export function appendJsonl(file: string, value: unknown): void {
  appendFileSync(file, `${JSON.stringify(value)}\n`);
}

/** Reads a JSONL file; a torn last line (the writer was killed mid-write) is dropped. */
export function readJsonl<T>(file: string): T[] {
  if (!existsSync(file)) return [];
  const out: T[] = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (line.trim() === '') continue;
    try {
      out.push(JSON.parse(line) as T);
    } catch {
      // torn write
    }
  }
  return out;
}
