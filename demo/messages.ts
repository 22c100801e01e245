// What the supervisor and its worker processes tell each other over the IPC channel of fork().

export interface WorkerSettings {
  scenario: 'lending' | 'stock';
  /** mysql:// URL of the demo database. */
  dbUrl: string;
  /** Owner recorded on every grant, e.g. "w2.1" (slot 2, first incarnation). */
  name: string;
  concurrency: number;
  loans: number;
  investors: number;
  unsafe: boolean;
  seed: number;
}

/** Counters a worker accumulates and reports as deltas. */
export interface OpCounts {
  repayments: number;
  transfers: number;
  deductions: number;
  declined: number;
  /** Operations that waited more than WAITED_MS for their lock: another holder was in the way. */
  waited: number;
  noops: number;
  timeouts: number;
  lost: number;
  errors: number;
}

/** An acquire is one round trip of a millisecond or two; a longer wait means the lock was held. */
export const WAITED_MS = 25;

export const ZERO_COUNTS: Readonly<OpCounts> = Object.freeze({
  repayments: 0,
  transfers: 0,
  deductions: 0,
  declined: 0,
  waited: 0,
  noops: 0,
  timeouts: 0,
  lost: 0,
  errors: 0,
});

export type FaultKind = 'kill' | 'pause';

export type ToWorker =
  /** Stop after the operations in flight. */
  | { type: 'stop' }
  /** Make the next repayment stop in its bank call and say so: the fault is injected there. */
  | { type: 'arm'; fault: FaultKind }
  /** The paused worker was resumed: let its bank call answer. */
  | { type: 'bank-answer' };

export type FromWorker =
  | { type: 'ready' }
  | { type: 'counts'; counts: OpCounts }
  /** An armed repayment holds its write grant and is inside the bank call now. */
  | { type: 'fault-point'; fault: FaultKind; grantId: number; loanId: string }
  /** A business transaction was refused at commit because its grant had been reaped. */
  | { type: 'lost'; grantId: number; what: string }
  | { type: 'error'; message: string }
  /** Stock scenario: nothing left to sell. */
  | { type: 'sold-out' };
