import type { Knex } from 'knex';
import {
  errnoOf,
  ER_DUP_ENTRY,
  isConflict,
  isConnectionLost,
  isLockWaitTimeout,
  withConnection,
  withLockWaitTimeout,
} from '../sql/connection.js';
import { DEFAULTS, LIMITS, integerOption, knexOption, optionsObject, keysOf } from '../options.js';
import { findDisagreements, recountResource, type CountDisagreement } from '../sql/recount.js';

export type { CountDisagreement } from '../sql/recount.js';

export interface CountCheckOptions {
  /** Disagreements reported (and repaired) per call, by resource id. @defaultValue `DEFAULTS.checkLockCounts.limit`, at most `LIMITS.maxPageSize` */
  limit?: number;
}

export interface CountCheck {
  disagreements: CountDisagreement[];
  /** More disagreements than `limit`: call again after repairing these. */
  more: boolean;
}

/**
 * Resources whose counts in `t_read_write_lock` are not their live grants in the log, each judged on
 * one consistent snapshot of its row and grants (see `findDisagreements`). The library never makes one: both change in one transaction. They come from
 * hand edits, or a restore of one table without the other. A count above the live grants blocks
 * the resource for good (no grant is left for the reaper to release); one below them, or a missing
 * row, lets a conflicting acquire in beside a live grant. Reads only, the resource table a page at a time.
 *
 * @example
 * ```ts
 * import type { Knex } from 'knex';
 * import { checkLockCounts } from 'mysql-rwlock/admin';
 * declare const db: Knex;
 *
 * const { disagreements, more } = await checkLockCounts(db);
 * for (const d of disagreements) console.warn(d.resourceId, d.wCount, d.rCount, d.liveWrites, d.liveReads);
 * if (more) console.warn('more disagreements: repair these, then check again');
 * ```
 */
export async function checkLockCounts(db: Knex, options?: CountCheckOptions): Promise<CountCheck> {
  knexOption('db', db);
  const limit = limitOption('checkLockCounts', options);
  return withConnection(db, async (conn) => {
    const { found, more } = page(await findDisagreements(conn, limit), limit);
    return { disagreements: found.map((f) => f.found), more };
  });
}

export interface CountRepair {
  /** Set from the log: each as it was found under the row lock, before the repair. */
  repaired: CountDisagreement[];
  /** Live grants that exclude each other (two writers, or a writer beside readers): left as they are; forceRelease one. */
  conflicting: CountDisagreement[];
  /** Busy past the lock wait timeout or in a persisting deadlock: run it again. */
  skipped: string[];
  /** Resources the database refused to repair for another reason (a missing privilege, say): `resource: message`. */
  problems: string[];
  /** More disagreements than `limit` were found: run it again. */
  more: boolean;
  durationMs: number;
}

const INSERT_RACES = 3;

/**
 * Sets the counts of each resource `checkLockCounts` finds to its live grants, one transaction per
 * resource under the resource row's lock, so acquires and releases racing it are counted or wait
 * (see `recountResource`). Live grants that exclude each other are reported, not counted; a
 * resource the database refuses is reported in `problems` and the others go on. Safe beside
 * traffic, the reaper and other repairs.
 *
 * @example
 * ```ts
 * import type { Knex } from 'knex';
 * import { repairLockCounts } from 'mysql-rwlock/admin';
 * declare const db: Knex;
 *
 * const repair = await repairLockCounts(db);
 * console.log(`repaired ${repair.repaired.length}; release one of each: ${repair.conflicting.map((c) => c.resourceId).join(', ')}`);
 * ```
 */
export async function repairLockCounts(db: Knex, options?: CountCheckOptions): Promise<CountRepair> {
  knexOption('db', db);
  const limit = limitOption('repairLockCounts', options);
  const started = performance.now();
  return withConnection(db, (conn) =>
    withLockWaitTimeout(conn, DEFAULTS.reap.lockWaitTimeoutSec, async () => {
      const { found, more } = page(await findDisagreements(conn, limit), limit);
      const result: CountRepair = { repaired: [], conflicting: [], skipped: [], problems: [], more, durationMs: 0 };
      for (const { resource, found: d } of found) {
        for (let attempt = 1; ; attempt++) {
          try {
            const outcome = await recountResource(conn, resource);
            if (outcome.kind === 'repaired') result.repaired.push(outcome.found);
            else if (outcome.kind === 'conflicting') result.conflicting.push(outcome.found);
            break;
          } catch (err) {
            if (isConnectionLost(err)) throw err;
            // A first acquire inserted the missing row meanwhile: recount with it.
            if (errnoOf(err) === ER_DUP_ENTRY && attempt < INSERT_RACES) continue;
            if (isLockWaitTimeout(err) || isConflict(err)) result.skipped.push(d.resourceId);
            // One resource the database refuses never stops the others.
            else result.problems.push(`${d.resourceId}: ${(err as Error).message}`);
            break;
          }
        }
      }
      result.durationMs = performance.now() - started;
      return result;
    }),
  );
}

function limitOption(what: string, options: CountCheckOptions | undefined): number {
  const o = optionsObject(what, options, keysOf<CountCheckOptions>()(['limit']));
  return integerOption('limit', o.limit ?? DEFAULTS.checkLockCounts.limit, 1, LIMITS.maxPageSize);
}

function page<T>(found: T[], limit: number): { found: T[]; more: boolean } {
  return { found: found.slice(0, limit), more: found.length > limit };
}
