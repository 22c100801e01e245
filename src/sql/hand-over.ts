import { hex, type Hex } from './connection.js';
import { RELEASED_BY, STATUS } from '../types.js';
import { releaseParams, type GrantRef, type ReleaseParams } from './release.js';

/**
 * A fence that hands its grant's hold over to a successor instead of giving it up, for a job whose
 * grant must outlive the run's commit (`lockAtLeastFor`). Two statements, the last of the business
 * transaction: RELEASE_SQL with nothing to give back (HAND_OVER_RELEASE: the grant row leaves live,
 * released by its holder; the resource's count stays, its row locked and its version bumped as in
 * any fence), then HAND_OVER_SQL, which writes the successor live under the holder's new token,
 * with the grant's resource, mode, owner and grant time, and a lease to `leaseMs` after that time.
 * The commit moves the hold from one grant to the other: the resource is never free between them,
 * and the counts equal the live grants before and after. A commit whose reply was lost is settled
 * as any fence's (the grant released by its holder: committed, and the successor is live).
 */
export const HAND_OVER_SQL = `INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, lease_until, version, owner, token, permits)
  SELECT resource_id, lock_type, ${STATUS.live}, create_time, create_time + INTERVAL ? MICROSECOND, 0, owner, UNHEX(?), permits
    FROM t_lock_log WHERE id = ? AND token = UNHEX(?) AND status = ${STATUS.released} AND released_by = ${RELEASED_BY.holder}`;

/** RELEASE_SQL's parameters for a hand-over: released by its holder, no count given back. */
export function handOverReleaseParams(grant: GrantRef): ReleaseParams {
  const params = releaseParams(grant, 'holder');
  params[1] = 0;
  params[2] = 0;
  return params;
}

/** HAND_OVER_SQL's parameters: numbers and hex strings, as the fence's. */
export function handOverParams(grant: GrantRef, successor: Buffer, leaseMs: number): [number, Hex, number, Hex] {
  return [leaseMs * 1000, hex(successor), grant.id, hex(grant.token)];
}
