// Live progress: on a TTY one status line redrawn twice a second, with events printed above it;
// otherwise (CI, a pipe) a plain line every 5 seconds and events as plain lines.
import type { OpCounts } from './messages.js';

export interface ProgressSnapshot {
  elapsedSec: number;
  totalSec: number | null;
  counts: OpCounts;
  grants: number;
  reaped: number;
  faults: string;
  workers: number;
}

export function opsOf(c: OpCounts): number {
  return c.repayments + c.transfers + c.deductions + c.declined + c.noops;
}

function line(s: ProgressSnapshot, rate: number): string {
  const c = s.counts;
  const time = s.totalSec === null ? `${s.elapsedSec.toFixed(1)}s` : `${s.elapsedSec.toFixed(1)}/${s.totalSec}s`;
  const work =
    c.deductions > 0 || (c.repayments === 0 && c.transfers === 0)
      ? `sold ${c.deductions}`
      : `repay ${c.repayments} xfer ${c.transfers} declined ${c.declined}`;
  return `[${time}] ${s.workers} workers | ops ${opsOf(c)} (${Math.round(rate)}/s) ${work} | grants ${s.grants} waited ${c.waited} timeouts ${c.timeouts} lost ${c.lost} errors ${c.errors} | reaped ${s.reaped} | faults ${s.faults || '-'}`;
}

export class Progress {
  readonly #tty: boolean;
  #timer: NodeJS.Timeout | null = null;
  #last = '';
  #prevOps = 0;
  #prevAt = 0;
  #rate = 0;
  #lastPlain = 0;

  constructor(
    private readonly sample: () => Promise<ProgressSnapshot>,
    tty = Boolean(process.stdout.isTTY),
  ) {
    this.#tty = tty;
  }

  start(): void {
    let busy = false;
    this.#timer = setInterval(() => {
      if (busy) return;
      busy = true;
      this.sample()
        .then(
          (s) => this.#draw(s),
          () => undefined,
        )
        .finally(() => (busy = false));
    }, 500);
  }

  #draw(s: ProgressSnapshot): void {
    const ops = opsOf(s.counts);
    if (this.#prevAt > 0 && s.elapsedSec > this.#prevAt)
      this.#rate = (ops - this.#prevOps) / (s.elapsedSec - this.#prevAt);
    this.#prevOps = ops;
    this.#prevAt = s.elapsedSec;
    this.#last = line(s, this.#rate);
    if (this.#tty) process.stdout.write(`\r\x1b[2K${this.#last.slice(0, (process.stdout.columns || 200) - 1)}`);
    else if (s.elapsedSec - this.#lastPlain >= 5) {
      this.#lastPlain = s.elapsedSec;
      process.stdout.write(`${this.#last}\n`);
    }
  }

  /** An event line; on a TTY printed above the status line. */
  event(text: string): void {
    if (this.#tty)
      process.stdout.write(`\r\x1b[2K${text}\n${this.#last.slice(0, (process.stdout.columns || 200) - 1)}`);
    else process.stdout.write(`${text}\n`);
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    if (this.#tty && this.#last)
      process.stdout.write(`\r\x1b[2K${this.#last.slice(0, (process.stdout.columns || 200) - 1)}\n`);
  }
}
