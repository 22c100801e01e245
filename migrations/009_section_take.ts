import { frozen } from './index.js';

/**
 * Version 9: a one-commit section's take and commit, each one call.
 *
 * A section (src/lock/section.ts) runs its take as the first statements of the caller's own
 * transaction, which the caller has begun. Until this version those were one statement each, sent
 * one after another: the idle bound, every gate, every lock row, the log rows, and (MySQL) the lock
 * wait bound restored; after the work, the COMMIT, then the session's bounds restored. Round trips,
 * not the commit, were most of a section's cost.
 *
 * - `rwlock_section_take` starts and ends nothing: inside the caller's open transaction it sets the
 *   idle bound (`p_idle_sec`, seconds; NULL: none) and, for the take alone, the lock wait bound
 *   (`p_lock_wait_sec`), takes every target's gate, then the lock rows written (`w`: a writer's
 *   guard; `x`: a reader's, where shared locks are not certified), then reads the lock rows of the
 *   reading targets that take their gate shared (`s`) or, at SERIALIZABLE, exclusively (`e`),
 *   without a locking clause, after every lock, as version 8's statements do. Taken: one
 *   `t_lock_log` row per target, released by `section`, in status 1 (a section in progress) with
 *   `released_at` NULL until the commit: the section's true span is recorded, and an operator who
 *   reads uncommitted rows finds sections in progress through the (status, create_time) index.
 *   Nobody else ever sees status 1: the commit turns it to 2 (released), a rollback removes it. It answers one row: `outcome` (`taken`; `gate` or `row`: that target's
 *   gate or lock row does not exist yet; `refused`: held; `intent`: refused, and a writer's intent
 *   marked, to be committed by the caller), `at` (the target's index) and `ids` (the log rows'
 *   ids, comma-separated, in the targets' order). The targets travel packed: `p_resources` as
 *   one length byte and the id's bytes each, `p_kinds` one letter each, `p_tokens` 16 bytes each.
 *   An error ends the call with the lock wait bound restored and the transaction still open, as a
 *   failed statement leaves it.
 * - `rwlock_section_commit` sets the section's log rows released now (ids comma-separated),
 *   COMMITs, and restores the idle bound the take set (`p_idle` 1): the section's end in the one
 *   round trip of its commit.
 *
 * The idle bound is `wait_timeout` on both servers: set only while the section's transaction is
 * open and restored by the commit's call right after its COMMIT, it bounds the same idle time as
 * MariaDB's `idle_transaction_timeout` (which the statements use there, as they restore it only
 * after the COMMIT's round trip), with one body for both servers and no prepared statement. The
 * previous values are kept in `@rwlock_idle` and `@rwlock_lwt`, which the client's own restore
 * (after a failure) reads as well.
 *
 * Its DDL is frozen in migrations/sql/009_section_take.ts; this module gives it the names it had.
 */
export const { PROCEDURES, up, down } = frozen('009_section_take');
