// The worker OS processes: forked through tsx, one per slot, respawned in the same slot when one
// dies (a SIGKILLed worker is replaced so the load goes on), stopped over IPC at the end.
import { fork, type ChildProcess } from 'node:child_process';
import { ZERO_COUNTS, type FromWorker, type OpCounts, type ToWorker, type WorkerSettings } from './messages.js';
import { track } from './children.js';
import { REPO_ROOT, TSX_EXEC_ARGV, WORKER_SCRIPT } from './paths.js';

export interface WorkerHandle {
  slot: number;
  name: string;
  child: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export type PoolEvent =
  | { type: 'message'; worker: WorkerHandle; msg: FromWorker }
  | { type: 'exit'; worker: WorkerHandle; code: number | null; signal: NodeJS.Signals | null; respawned: boolean };

const STOP_GRACE_MS = 20_000;

export class WorkerPool {
  readonly totals: OpCounts = { ...ZERO_COUNTS };
  readonly #slots = new Map<number, WorkerHandle>();
  readonly #incarnations = new Map<number, number>();
  #stopping = false;
  spawned = 0;

  constructor(
    private readonly settingsFor: (slot: number, name: string, incarnation: number) => WorkerSettings,
    private readonly onEvent: (e: PoolEvent) => void,
  ) {}

  /** Forks `n` workers and resolves once each has connected and said it is ready. */
  async start(n: number): Promise<void> {
    await Promise.all(Array.from({ length: n }, (_, i) => this.#spawn(i + 1)));
  }

  worker(slot: number): WorkerHandle | undefined {
    return this.#slots.get(slot);
  }

  get size(): number {
    return this.#slots.size;
  }

  send(slot: number, msg: ToWorker): void {
    const w = this.#slots.get(slot);
    if (w?.child.connected) w.child.send(msg);
  }

  #spawn(slot: number): Promise<WorkerHandle> {
    const incarnation = (this.#incarnations.get(slot) ?? 0) + 1;
    this.#incarnations.set(slot, incarnation);
    const name = `w${slot}.${incarnation}`;
    const child = track(
      fork(WORKER_SCRIPT, [JSON.stringify(this.settingsFor(slot, name, incarnation))], {
        cwd: REPO_ROOT,
        execArgv: [...TSX_EXEC_ARGV],
        stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
      }),
    );
    this.spawned += 1;
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-2000)));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    const handle: WorkerHandle = { slot, name, child, exited };
    this.#slots.set(slot, handle);
    const ready = new Promise<WorkerHandle>((resolve, reject) => {
      child.on('message', (msg: FromWorker) => {
        if (msg.type === 'ready') resolve(handle);
        if (msg.type === 'counts')
          for (const k of Object.keys(msg.counts) as Array<keyof OpCounts>) this.totals[k] += msg.counts[k];
        this.onEvent({ type: 'message', worker: handle, msg });
      });
      void exited.then(({ code, signal }) =>
        reject(
          new Error(`worker ${name} exited (${signal ?? code}) before it was ready${stderr ? `:\n${stderr}` : ''}`),
        ),
      );
    });
    void exited.then(({ code, signal }) => {
      // A worker that finished its work exits 0; one that was killed or crashed is replaced.
      const respawn = !this.#stopping && (signal !== null || code !== 0) && this.#slots.get(slot) === handle;
      this.onEvent({ type: 'exit', worker: handle, code, signal, respawned: respawn });
      if (respawn)
        this.#spawn(slot).catch((err: Error) =>
          this.onEvent({ type: 'message', worker: handle, msg: { type: 'error', message: err.message } }),
        );
    });
    return ready;
  }

  /** Asks every worker to stop, waits for them to exit (SIGKILL after a grace period). */
  async stopAll(): Promise<void> {
    this.#stopping = true;
    const workers = [...this.#slots.values()];
    for (const w of workers) if (w.child.connected) w.child.send({ type: 'stop' } satisfies ToWorker);
    await Promise.all(
      workers.map(async (w) => {
        const timer = setTimeout(() => w.child.kill('SIGKILL'), STOP_GRACE_MS);
        await w.exited;
        clearTimeout(timer);
      }),
    );
  }

  /** Waits until every current worker has exited by itself (the stock scenario ends that way). */
  async waitAllExited(): Promise<void> {
    await Promise.all([...this.#slots.values()].map((w) => w.exited));
  }
}
