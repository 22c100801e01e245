import { frozen } from './index.js';

/**
 * Version 11: a durable group's acquire in one call and one commit.
 *
 * `rwlock_acquire_group` runs one READ COMMITTED transaction that decides, for every target in the
 * order given (the client sends them in resource byte order), exactly what version 10's
 * `rwlock_acquire` decides for one: the gate taken without waiting (a writer exclusively, a reader
 * shared; created on first use), the guarded UPDATE of the lock row, the row inserted on first use
 * and the guard run again if another first user made it, then the grant's `t_lock_log` row. All or
 * nothing: the first target refused ends the loop and the transaction is rolled back, so nothing
 * of the group is held or logged, and no writer's intent is marked (the client falls back to one
 * acquire per resource, which marks it). It answers one row: `outcome` (`granted`; `busy`: that
 * target's gate is held by another transaction; `held`: its guard refused it), `at` (the refused
 * target's index) and `ids` (the log rows' ids, comma-separated, in the targets' order).
 *
 * The targets travel packed as `rwlock_section_take`'s do (version 9): `p_resources` one length byte
 * and the id's bytes each, `p_kinds` one letter each (`w` write, `r` read), `p_tokens` 16 bytes
 * each. Permit targets are not taken here: a group with one uses the acquire per resource. The
 * gate's NOWAIT read is a prepared statement, as in version 8 (MariaDB refuses NOWAIT in a routine's
 * body). An SQL error rolls back and is signalled again.
 *
 * Its DDL is frozen in migrations/sql/011_group_acquire.ts; this module gives it the names it had.
 */
export const { PROCEDURES, up, down } = frozen('011_group_acquire');
