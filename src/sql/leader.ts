import { hex, query, type Hex, type RawConnection } from './connection.js';
import { LOCK_TYPE, STATUS } from '../types.js';
import { DB_NOW } from './clock.js';
import { termsOf } from './terms.js';

/**
 * A term's fence: the last statement of a leader's business transaction. It changes the term's
 * write grant row only while that grant is live and its lease has not run out on the database
 * clock, and leaves it live: the term goes on leading after the commit. 1 row changed when the
 * term leads, 0 when it does not (released by its holder, the reaper, a heal or an operator, or
 * its lease ran out).
 *
 * Why it is safe (docs/leader.md, "Why a deposed leader commits nothing"): the UPDATE takes the grant
 * row's exclusive lock and holds it until the caller's transaction ends. Every way a term ends
 * (the holder's release, the reaper's batch, a heal, an operator's release) is a guarded UPDATE of
 * the same row, so it waits for that commit and then finds the row changed (`version`, which a
 * reaper or heal compares with what it read) or decides on the committed state; a fence that comes
 * after the release finds the row released and changes nothing. A successor's grant exists only
 * once the term's grant is released (its acquire needs `w_count = 0`, which the release writes),
 * so every commit of term t precedes every commit of term t + 1. Bumping `version` makes the row
 * change with and without CLIENT_FOUND_ROWS, as every statement on a grant does.
 */
export const TERM_FENCE_SQL = `UPDATE t_lock_log SET version = version + 1
 WHERE id = ? AND resource_id = UNHEX(?) AND lock_type = ${LOCK_TYPE.write} AND status = ${STATUS.live}
   AND token = UNHEX(?) AND lease_until > ${DB_NOW}`;

/** Rows TERM_FENCE_SQL changes while the term leads. */
export const TERM_FENCED_ROWS = 1;

/** TERM_FENCE_SQL's parameters: numbers and hex only, as the lock's fence sends them. */
export function termFenceParams(grantId: number, resource: Buffer, token: Buffer): [number, Hex, Hex] {
  return [grantId, hex(resource), hex(token)];
}

/** Who leads a name, as `locks.leader(name)` tells it. */
export interface LeaderInfo {
  /** The owner of the manager whose campaign leads. */
  owner: string;
  /** The term: its write grant's id, the fencing token its writes are fenced with. */
  term: number;
  /** When the term began (its grant was granted), on the database clock. */
  since: Date;
  /** When its lease runs out unless renewed, on the database clock. */
  leaseUntil: Date;
}

/**
 * The term that leads `resource`: its newest write grant (`termsOf`, the one home of the terms'
 * query), when that grant is live and its lease has not run out. A resource has at most one live
 * write grant, and a newer one only after it was released, so the newest is the only one that can
 * lead. Null when no term leads (none live, or the last one's lease ran out and it waits for the
 * reaper or a heal).
 */
export async function readLeader(conn: RawConnection, resource: Buffer): Promise<LeaderInfo | null> {
  const [newest] = await termsOf(conn, resource, 1);
  if (newest?.how !== 'leading' || newest.leaseUntil === null) return null;
  return { owner: newest.owner, term: newest.term, since: newest.since, leaseUntil: newest.leaseUntil };
}

/**
 * Whether a grant of `resource` later than `term` was taken (live or not): after a resignation,
 * whether someone else has led since. Through the `resource_id` index.
 */
export async function laterGrantExists(conn: RawConnection, resource: Buffer, term: number): Promise<boolean> {
  const rows = await query<unknown[]>(conn, 'SELECT 1 FROM t_lock_log WHERE resource_id = ? AND id > ? LIMIT 1', [
    resource,
    term,
  ]);
  return rows.length > 0;
}
