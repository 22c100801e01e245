// How the worker calls the lock's one-commit sections and multi-resource locks: the one place that
// names those entry points, so the workload reads the same whichever API shape carries them.
import type { Knex } from 'knex';
import type { Grant, LockManager } from '../../src/index.js';

export interface ModeOptions {
  waitMs: number;
  signal: AbortSignal;
  isolationLevel?: 'read committed';
  /** A section's history row (false: a section without history, whose grant id is 0). */
  history?: boolean;
}

/** A resource and the grant the work runs under (a section reports one if it has a log row: with history). */
export interface Held {
  resource: string;
  mode: 'write' | 'read';
  grant?: number;
  /** Extends this grant's lease (a durable grant); undefined for a section. */
  extend?: (ms: number) => Promise<boolean>;
}

/** `withWriteLock` / `withReadLock` with `section: true`; the grant is the section's log row (0 without history). */
export function inSection<T>(
  locks: LockManager,
  mode: 'write' | 'read',
  resource: string,
  work: (trx: Knex.Transaction, held: Held) => Promise<T>,
  options: ModeOptions,
): Promise<T> {
  const run = (trx: Knex.Transaction, grant: Grant): Promise<T> => work(trx, { resource, mode, grant: grant.id });
  const o = { ...options, section: true };
  return mode === 'write' ? locks.withWriteLock(resource, run, o) : locks.withReadLock(resource, run, o);
}

/** `locks.withLocks({ write, read }, work, options)`: every grant fenced in the one commit, or one section over all. */
export function withMany<T>(
  locks: LockManager,
  set: { write: string[]; read: string[] },
  work: (trx: Knex.Transaction, held: Held[]) => Promise<T>,
  options: ModeOptions & { section?: boolean },
): Promise<T> {
  return locks.withLocks(
    set,
    (trx, grants) =>
      work(
        trx,
        grants.map((g) => ({
          resource: g.resourceId,
          mode: g.mode as Held['mode'], // a group of read and write sets only
          grant: g.id,
          ...(options.section ? {} : { extend: (ms: number) => g.extend(ms) }),
        })),
      ),
    options,
  );
}
