// Worker and reaper processes of a run: spawned with their configuration as JSON, stderr to a file
// beside their history, and (workers) an IPC channel the fault injectors talk over.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { join } from 'node:path';
import type { Target } from './admin.js';
import type { ReaperConfig } from './reaper.js';
import type { FromWorker, ToWorker, WorkerConfig } from './worker.js';

const HERE = import.meta.dirname;
const ROOT = join(HERE, '..', '..');

export interface Slot {
  index: number;
  gen: number;
  id: string;
  child: ChildProcess;
  busy: boolean;
  target: Target;
  listeners: Set<(m: FromWorker) => boolean>;
  exited: Promise<void>;
}

/** Driver noise while a server restarts goes to `<id>.stderr` in `dir`. */
function spawnChild(dir: string, id: string, script: string, config: unknown, ipc: boolean): ChildProcess {
  const errFile = openSync(join(dir, `${id}.stderr`), 'a');
  const child = spawn(process.execPath, ['--import', 'tsx', join(HERE, script), JSON.stringify(config)], {
    cwd: ROOT,
    stdio: ['ignore', errFile, errFile, ...(ipc ? ['ipc' as const] : [])],
  });
  closeSync(errFile);
  return child;
}

export function spawnWorker(
  dir: string,
  index: number,
  gen: number,
  target: Target,
  config: (id: string) => WorkerConfig,
): Slot {
  const id = `w${index}.${gen}`;
  const child = spawnChild(dir, id, 'worker.ts', config(id), true);
  const slot: Slot = {
    index,
    gen,
    id,
    child,
    busy: false,
    target,
    listeners: new Set(),
    exited: new Promise((resolve) => child.once('exit', () => resolve())),
  };
  child.on('message', (m: FromWorker) => {
    let taken = false;
    for (const l of [...slot.listeners]) if (l(m)) taken = true;
    // A checkpoint nobody waits for any more (its fault timed out): let the worker go on.
    if (!taken && m.type === 'at') send(slot, { type: 'go', token: m.token });
  });
  return slot;
}

export function isRunning(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

export function send(slot: Slot, m: ToWorker): void {
  if (slot.child.connected) slot.child.send(m, () => undefined);
}

/** The first message from `slot` that `pred` accepts, or undefined after `timeoutMs` or when the worker exits. */
export function waitMessage<M extends FromWorker>(
  slot: Slot,
  pred: (m: FromWorker) => m is M,
  timeoutMs: number,
): Promise<M | undefined> {
  return new Promise((resolve) => {
    const finish = (m: M | undefined): void => {
      clearTimeout(timer);
      slot.listeners.delete(listener);
      resolve(m);
    };
    const listener = (m: FromWorker): boolean => {
      if (!pred(m)) return false;
      finish(m);
      return true;
    };
    const timer = setTimeout(() => finish(undefined), timeoutMs);
    slot.listeners.add(listener);
    void slot.exited.then(() => finish(undefined));
  });
}

export function spawnReaper(dir: string, config: ReaperConfig): ChildProcess {
  return spawnChild(dir, config.id, 'reaper.ts', config, false);
}

/** Asks every worker to stop after the operation in hand; SIGKILLs those still running after `graceMs`. */
export async function stopWorkers(slots: Slot[], graceMs: number): Promise<void> {
  for (const s of slots) send(s, { type: 'stop' });
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.all(slots.map((s) => s.exited)), new Promise((r) => (timer = setTimeout(r, graceMs)))]);
  clearTimeout(timer);
  for (const s of slots) if (isRunning(s.child)) s.child.kill('SIGKILL');
  await Promise.all(slots.map((s) => s.exited));
}

export async function stopReapers(reapers: ChildProcess[]): Promise<void> {
  for (const r of reapers) r.kill('SIGTERM');
  await Promise.all(reapers.map((r) => (r.exitCode === null ? new Promise((res) => r.once('exit', res)) : undefined)));
}
