import type { Knex } from 'knex';
import {
  isConflict,
  isConnectionLost,
  isLockWaitTimeout,
  privilegeError,
  withConnection,
  withLockWaitTimeout,
  type RawConnection,
} from '../sql/connection.js';
import { PrivilegeError } from '../errors.js';
import {
  DEFAULTS,
  LIMITS,
  integerOption,
  keysOf,
  knexOption,
  optionsObject,
  reapBatchOption,
  retentionOption,
  staleAfterOption,
} from '../options.js';
import { purgeBatch, purgeIdleResources, purgeNotesBatch } from '../sql/purge.js';
import { reapCandidates, selectStale, type Candidate } from '../sql/reap.js';
import type { ReapedGrant, ReapResult } from '../types.js';
import { reapChannel, traced } from '../contract/channels.js';

export interface ReapOptions {
  /** Live grants older than this, on the database clock, are released. @defaultValue `DEFAULTS.staleAfterMs` */
  staleAfterMs?: number;
  /** Grants reaped per transaction. @defaultValue `DEFAULTS.reap.batchSize`, at most `LIMITS.maxReapBatch` */
  batchSize?: number;
  /** Seconds to wait for a grant row locked by a committing business transaction before skipping it. @defaultValue `DEFAULTS.reap.lockWaitTimeoutSec` */
  lockWaitTimeoutSec?: number;
}

/**
 * Releases grants stuck past `staleAfterMs`. Safe to run from many processes at once: every grant
 * is released by one guarded, versioned transaction, so none is released twice and no count is
 * given back twice.
 *
 * @example
 * ```ts
 * import type { Knex } from 'knex';
 * import { reapStaleGrants } from 'mysql-rwlock/admin';
 * declare const db: Knex;
 *
 * const { reaped, skipped, failed, problems } = await reapStaleGrants(db, { staleAfterMs: 600_000 });
 * if (failed > 0) console.error(problems);
 * console.log(`reaped ${reaped}, skipped ${skipped} busy grants`);
 * ```
 */
export async function reapStaleGrants(db: Knex, options?: ReapOptions): Promise<ReapResult> {
  knexOption('db', db);
  const o = optionsObject(
    'reapStaleGrants',
    options,
    keysOf<ReapOptions>()(['staleAfterMs', 'batchSize', 'lockWaitTimeoutSec']),
  );
  const staleAfterMs = staleAfterOption(o.staleAfterMs);
  const batchSize = reapBatchOption(o.batchSize);
  const waitSec = integerOption(
    'lockWaitTimeoutSec',
    o.lockWaitTimeoutSec ?? DEFAULTS.reap.lockWaitTimeoutSec,
    1,
    3600,
  );
  return traced(
    reapChannel,
    () => ({ staleAfterMs, batchSize, knex: db }),
    // A missing privilege is the same for every grant: the run stops at the first, naming the role.
    () =>
      reap(db, staleAfterMs, batchSize, waitSec).catch((err: unknown) => {
        throw privilegeError(err, 'reaper') ?? err;
      }),
  );
}

async function reap(db: Knex, staleAfterMs: number, batchSize: number, waitSec: number): Promise<ReapResult> {
  const started = performance.now();
  const staleUs = staleAfterMs * 1000;
  return withConnection(db, (conn) =>
    withLockWaitTimeout(conn, waitSec, async () => {
      const grants: ReapedGrant[] = [];
      const passed: Passed = { skipped: new Set(), failed: new Map() };
      for (;;) {
        const exclude = [...passed.skipped, ...passed.failed.keys()];
        const batch = await selectStale(conn, staleUs, batchSize, exclude);
        if (batch.length === 0) break;
        grants.push(...(await reapBatchOrEach(conn, batch, staleUs, passed)));
        if (batch.length < batchSize) break;
      }
      return {
        reaped: grants.length,
        skipped: passed.skipped.size,
        failed: passed.failed.size,
        problems: [...passed.failed].map(([id, message]) => `grant ${id}: ${message}`),
        grants,
        durationMs: performance.now() - started,
      };
    }),
  );
}

interface Passed {
  skipped: Set<bigint>;
  failed: Map<bigint, string>;
}

/**
 * A batch that fails falls back to one grant per transaction, so only the grant at fault is passed
 * over: skipped when its row is busy (1205, 1213), failed for anything else the database refused,
 * such as counts that disagree with the log. One bad row never stops the reaper; a missing privilege,
 * which no other grant would get past, does (PrivilegeError).
 */
async function reapBatchOrEach(
  conn: RawConnection,
  batch: Candidate[],
  staleUs: number,
  passed: Passed,
): Promise<ReapedGrant[]> {
  try {
    return await reapCandidates(conn, batch, staleUs);
  } catch (err) {
    if (isConnectionLost(err) || err instanceof PrivilegeError) throw err;
  }
  const reaped: ReapedGrant[] = [];
  for (const candidate of batch) {
    try {
      reaped.push(...(await reapCandidates(conn, [candidate], staleUs)));
    } catch (err) {
      if (isConnectionLost(err) || err instanceof PrivilegeError) throw err;
      if (isLockWaitTimeout(err) || isConflict(err)) passed.skipped.add(candidate.id);
      else passed.failed.set(candidate.id, (err as Error).message);
    }
  }
  return reaped;
}

export interface PurgeOptions {
  /**
   * Released grants created longer ago than this are deleted, but never one released less than
   * `LIMITS.purgeFloorMs` (a day) ago, which settling a lost reply may still read.
   * @defaultValue `DEFAULTS.purge.retentionMs` (7 days), at most `LIMITS.maxRetentionMs`
   */
  retentionMs?: number;
  /** Rows deleted per statement. @defaultValue `DEFAULTS.purge.batchSize`, at most `LIMITS.maxPurgeBatch` */
  batchSize?: number;
}

/** What `purgeReleasedGrants` returns. */
export interface PurgeResult {
  /** Released grants deleted. */
  purged: number;
  /** Resource rows deleted with them: their last grant was purged and nothing holds or waits for them. */
  resources: number;
}

/**
 * Deletes released grants older than the retention period, in batches, so the log stays bounded,
 * and release notes older than it; then the resource rows whose last grant it deleted, if nothing
 * holds or waits for them, and their gate rows, if no transaction holds them. `purged` counts the
 * grants, `resources` the resource rows. A grant released less than `LIMITS.purgeFloorMs` ago is kept whatever the retention: a lost reply's
 * settling reads it.
 *
 * @example
 * ```ts
 * import type { Knex } from 'knex';
 * import { purgeReleasedGrants } from 'mysql-rwlock/admin';
 * declare const db: Knex;
 *
 * const { purged } = await purgeReleasedGrants(db, { retentionMs: 30 * 24 * 3_600_000 }); // keep 30 days
 * console.log(`purged ${purged} released grants`);
 * ```
 */
export async function purgeReleasedGrants(db: Knex, options?: PurgeOptions): Promise<PurgeResult> {
  knexOption('db', db);
  const o = optionsObject('purgeReleasedGrants', options, keysOf<PurgeOptions>()(['retentionMs', 'batchSize']));
  const retentionMs = retentionOption(o.retentionMs);
  const batchSize = integerOption('batchSize', o.batchSize ?? DEFAULTS.purge.batchSize, 1, LIMITS.maxPurgeBatch);
  return withConnection(db, async (conn) => {
    let purged = 0;
    let resources = 0;
    for (;;) {
      const batch = await purgeBatch(conn, retentionMs, batchSize);
      purged += batch.deleted;
      resources += await purgeIdleResources(conn, batch.resources);
      // A batch whose rows were all in use (skipped) ends the purge: they go with a later one.
      if (batch.selected < batchSize || batch.deleted === 0) break;
    }
    while ((await purgeNotesBatch(conn, retentionMs, batchSize)) === batchSize);
    return { purged, resources };
  });
}
