import { frozen } from './index.js';

/**
 * Version 2 of the acquire procedure (the tables are unchanged).
 *
 * - The owner parameter is utf8mb4 like the column: a routine parameter without a character set
 *   takes the database's default, and in a latin1 database any owner outside latin1 was refused.
 * - First use of a resource by several acquirers at once: the losers of the race to create the
 *   resource row used to report "not granted" although nothing was held. A loser now repeats its
 *   guarded UPDATE once the row exists: the duplicate-key check of its insert waits for the
 *   winner's commit, and a row committed since its first UPDATE is read as committed.
 *
 * `rwlock_release` from version 1 stays, unused by this version, so that processes still running
 * the previous release keep working during a rolling upgrade.
 *
 * Like every migration, `up` is idempotent: migrate() re-runs all of them to repair a schema
 * whose objects were dropped by hand.
 *
 * Its DDL is frozen in migrations/sql/002_acquire_v2.ts; this module gives it the names it had.
 */
export const { PROCEDURES, up, down } = frozen('002_acquire_v2');
