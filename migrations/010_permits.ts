import type { AddedInPlace } from './conditional-ddl.js';
import { frozen } from './index.js';

/**
 * Version 10: counting semaphores (`acquirePermit`, `withPermit`).
 *
 * - `t_read_write_lock.permit_limit`: the limit of the semaphore whose permits the row counts, NULL
 *   for a read-write lock. Permit holders are counted in `r_count`, as readers are, so releases,
 *   the reaper, the fence and the count check work on them unchanged. The limit is stored with the
 *   row, not only checked by each caller, so that the guard compares the count with one limit:
 *   callers that each checked their own could together pass the smallest one.
 * - `t_lock_log.permits`: how many permits a permit grant holds (its `lock_type` is a reader's, 1),
 *   NULL for read and write grants; a release gives back that many.
 * - `rwlock_acquire_permit`: one attempt, decided by one guarded UPDATE: no writer, and either no
 *   holder at all (the caller's limit then becomes the row's: an idle resource has no kind and no
 *   limit) or holders of the same limit with room for `p_count` more. Never read-then-write. The
 *   gate is taken shared without waiting, as a reader's acquire takes it. When refused, the row
 *   says why: `conflict` 1 when readers or a writer hold the resource, 2 when permits of another
 *   limit do (`held_limit`), 0 when the semaphore is full.
 * - `rwlock_acquire` (version 8's, otherwise unchanged): a reader also needs no permit holders
 *   (`permit_limit IS NULL OR r_count = 0`) and clears the limit of an idle semaphore; the result
 *   set gains `mixed`, 1 when a refused read or write attempt met permit holders, which earlier
 *   clients do not read.
 * - `rwlock_section_take` (version 9's, otherwise unchanged): a reading section also needs no permit
 *   holders, in its guarded UPDATE and in its plain read alike, as the statements path decides.
 *
 * Lock managers need this version (CLIENT_NEEDS): a client's plain-statement reader that does not
 * check the limit would join a semaphore's holders.
 *
 * Its DDL is frozen in migrations/sql/010_permits.ts; this module gives it the names it had.
 */
const m = frozen('010_permits');
export const ADDS_LIMIT: AddedInPlace = m.ADDS[0]!;
export const ADDS_PERMITS: AddedInPlace = m.ADDS[1]!;
export const { STATEMENTS, PROCEDURES, up, down } = m;
