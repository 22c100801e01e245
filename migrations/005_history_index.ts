import type { AddedInPlace } from './conditional-ddl.js';
import { frozen } from './index.js';

/**
 * Version 5: `ix_lock_log_resource`, so `history(resourceId)` reads a resource's grants through an
 * index instead of scanning the whole log (seconds at a few million rows, and the log keeps every
 * grant for the retention period). Each grant pays one more index entry at its insert; measured,
 * that is within the run-to-run noise of a lock cycle's server CPU (docs/data-model.md).
 *
 * Built in place without blocking the lock's traffic (ALGORITHM=INPLACE, LOCK=NONE: a server that
 * cannot do that refuses the statement rather than locking the table). On Galera the build runs in
 * total order and holds up the cluster's other writes while it lasts: purge the log first, or run
 * it with wsrep_OSU_method=RSU node by node. Added only when missing, so `up` stays idempotent.
 *
 * Its DDL is frozen in migrations/sql/005_history_index.ts; this module gives it the names it had.
 */
const m = frozen('005_history_index');
export const ADDS: AddedInPlace = m.ADDS[0]!;
export const { STATEMENTS, up, down } = m;
