// What a case family (one file under bench/cases/) gives the runner, and the results it leaves.
import type { Knex } from 'knex';
import type mysql from 'mysql2/promise';
import type { FoundServer } from '../../harness/server.js';
import type { LockManager } from '../../src/index.js';
import type { Stats } from './run.js';
import type { Target } from './targets.js';

export interface BenchContext {
  server: FoundServer;
  dbName: string;
  knex: Knex;
  locks: LockManager;
  /** One raw mysql2 connection per worker (up to 16) for the cases that bypass knex. */
  raws: mysql.Connection[];
  seconds: number;
  rounds: number;
  quick: boolean;
  log(line: string): void;
}

export type Op = (worker: number) => Promise<boolean | void>;

/** A case measured in the interleaved rounds: run at each concurrency, pooled over the rounds. */
export interface RoundCase {
  /** Stable id, e.g. 'lib.write.distinct'; a result is stored as `${id}@${concurrency}`. */
  id: string;
  /** The --only group it belongs to. */
  group: string;
  label: string;
  op: Op;
  concurrency?: number[];
  /** Ratios printed beside the row: ops/s ÷ (factor × the other case's ops/s at the same concurrency). */
  ratios?: Array<{ name: string; to: string; factor?: number }>;
}

/**
 * A round case that cannot run here (e.g. its Redis is not reachable): the runner prints the
 * reason, and every target that reads this case prints "skipped: <reason>" instead of a value.
 */
export interface SkippedCase {
  id: string;
  group: string;
  label: string;
  skip: string;
}

/** Measured values of one case (or one case at one concurrency), by metric name. */
export type Metrics = Partial<Stats> & Record<string, number | undefined>;

export class Results {
  readonly #byKey = new Map<string, Metrics>();
  /** Why a case was not measured, by case id (all its concurrencies). */
  readonly #skipped = new Map<string, string>();
  static key(id: string, concurrency?: number): string {
    return concurrency === undefined ? id : `${id}@${concurrency}`;
  }
  set(id: string, metrics: Metrics, concurrency?: number): void {
    this.#byKey.set(Results.key(id, concurrency), metrics);
  }
  get(id: string, concurrency?: number): Metrics | undefined {
    return this.#byKey.get(Results.key(id, concurrency));
  }
  value(id: string, metric: string, concurrency?: number): number | undefined {
    const v = this.get(id, concurrency)?.[metric];
    return v === undefined || Number.isNaN(v) ? undefined : v;
  }
  skip(id: string, reason: string): void {
    this.#skipped.set(id, reason);
  }
  /** The reason the case was skipped, or undefined when it was not. */
  skipped(id: string): string | undefined {
    return this.#skipped.get(id);
  }
  toJSON(): Record<string, Metrics | { skipped: string }> {
    return {
      ...Object.fromEntries(this.#byKey),
      ...Object.fromEntries([...this.#skipped].map(([id, reason]) => [id, { skipped: reason }])),
    };
  }
}

export interface Family {
  /** The --only groups this family answers to. */
  groups: string[];
  /** Cases run in the interleaved rounds, and those that cannot run here, with the reason. */
  roundCases?(ctx: BenchContext): Array<RoundCase | SkippedCase> | Promise<Array<RoundCase | SkippedCase>>;
  /** A scenario of its own, run after the rounds (it may read their results). */
  run?(ctx: BenchContext, results: Results): Promise<void>;
  /** Lines printed after the tables. */
  summary?(results: Results): string[];
  /** Releases what roundCases or run opened beyond the context (connections, clients). */
  close?(): Promise<void>;
  targets: Target[];
  /** Runs only when asked for by name (--scale), never by default. */
  optIn?: boolean;
}
