import { frozen } from './index.js';

/**
 * Version 8: the resource gate, and an acquire that never waits on a section.
 *
 * - `t_lock_gate`: one row per resource (the lock row's `resource_id`), created on first use by
 *   whoever needs it, holding nothing but its key. Every transaction that decides on a resource
 *   takes its gate first: a reading section and a durable reader's acquire shared, a writing
 *   section and a durable writer's acquire exclusively. A reading section then reads the lock row
 *   WITHOUT locking it, so durable readers and reading sections share, while a writer (durable or
 *   section) cannot be granted while a reading section runs. Releases, the reaper and the count
 *   repair touch only the lock row, as before; nobody who holds a lock row waits for a gate, so no
 *   cycle of waits forms.
 * - `rwlock_acquire` takes the gate with a locking read that does not wait (NOWAIT): a gate another
 *   transaction holds in a conflicting mode (a section, or another acquire's own short transaction)
 *   is a refused attempt, reported as `busy` beside the id, which the client's backoff, its `waitMs`
 *   and its `signal` bound, instead of a wait in InnoDB's lock queue that only
 *   `innodb_lock_wait_timeout` or the section's end bounded. With the gate held, the guarded UPDATE
 *   of the lock row can meet only transactions that hold no gate and are short (another reader's
 *   acquire, a release, a reap), so it decides as version 6's did. A writer stopped at the gate (a
 *   reading section runs) still marks its writer intent, if the lock row can be had at once, so
 *   reading sections hold back for it.
 * - The NOWAIT reads are prepared statements: MariaDB refuses NOWAIT in a routine's body (1314) but
 *   runs it prepared, spells the shared form `LOCK IN SHARE MODE NOWAIT` where MySQL has `FOR SHARE
 *   NOWAIT`, and reports a locked row as 1205 where MySQL gives 3572 (ER_LOCK_NOWAIT); one handler
 *   takes both.
 *
 * Times the body writes or compares are version 7's UTC (`DB_NOW`). Parameters are version 6's; the result
 * set gains the column `busy`, which earlier clients do not read. The procedure is dropped and
 * created again, as in version 6.
 *
 * Its DDL is frozen in migrations/sql/008_resource_gate.ts; this module gives it the names it had.
 */
export const { TABLES, PROCEDURES, up, down } = frozen('008_resource_gate');
