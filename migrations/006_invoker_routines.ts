import { frozen } from './index.js';

/**
 * Version 6: no routine runs with more rights than its caller, and none releases by id alone.
 *
 * - `rwlock_release` (version 1) is dropped. It named a grant by id without its token, the shape
 *   the failover fix removed (a promoted replica hands ids out again), wrote no release note, and,
 *   running with its definer's rights, let any user with EXECUTE on the database release any grant.
 *   No release of this library calls it since version 2.
 * - `rwlock_acquire` keeps version 2's body and parameters, now `SQL SECURITY INVOKER`: its
 *   statements run with the caller's table privileges, so a user with EXECUTE alone is refused
 *   instead of acquiring a grant it could never release, and the privileges a role needs are the
 *   same on the procedure path as on the plain-statement path (plus EXECUTE).
 *
 * The procedure is dropped and created again: a CALL in that instant fails with SchemaMissingError
 * (no procedure) and changes nothing. With `procedures: false` the acquire is left as it is, as for
 * every migration, but the id-only release is still dropped where it exists.
 *
 * Its DDL is frozen in migrations/sql/006_invoker_routines.ts; this module gives it the names it had.
 */
export const { PROCEDURES, RETIRED_PROCEDURES, up, down } = frozen('006_invoker_routines');
