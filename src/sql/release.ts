import { hex, query, type Hex, type RawConnection } from './connection.js';
import { commitIfLeftOpen } from './session.js';
import { LOCK_TYPE, RELEASED_BY, STATUS, type LockMode } from '../types.js';
import { DB_NOW } from './clock.js';

export interface GrantRef {
  id: number;
  resource: Buffer;
  mode: LockMode;
  /**
   * The holder's client-generated token. Statements name the grant by id and token together: after
   * a failover to an asynchronous replica that never received a grant, the new primary hands out its
   * id again, and the id alone would let the old holder release, or fence its work with, the new one.
   */
  token: Buffer;
  /** How many permits a permit grant holds (given back by its release); absent for read and write grants. */
  permits?: number;
}

/**
 * Releases a grant in one statement: the grant row leaves status live and the resource's count is
 * given back, both or neither. The WHERE clause names the state it expects, so a release after a
 * reap (or any second release) changes nothing. Every changed row also changes `version`, so the
 * result is the same with and without CLIENT_FOUND_ROWS: 2 rows when it released, 0 when the grant
 * was no longer live. A count that would go below zero (tampered by hand) fails the statement
 * (1690, out of range) instead of being given back.
 *
 * Run alone it is its own transaction; run as the last statement of a business transaction it is
 * the fence. Parameters are numbers and hex strings only, so any driver or ORM can send them and
 * no sql_mode changes how they are read.
 */
export const RELEASE_SQL = releaseStatement(['?', '?', '?', '?', '?', '?', '?']);

/**
 * The release statement with its values spelled by `v` (in ReleaseParams' order): `?` each for the
 * statement a client sends, a routine's parameter names for the fence in `rwlock_fence_commit`.
 */
export function releaseStatement(v: readonly [string, string, string, string, string, string, string]): string {
  const [by, w, r, id, resourceHex, type, tokenHex] = v;
  return `UPDATE t_lock_log l JOIN t_read_write_lock r ON r.resource_id = l.resource_id
   SET l.status = ${STATUS.released}, l.version = l.version + 1, l.released_at = ${DB_NOW}, l.released_by = ${by},
       r.w_count = r.w_count - ${w}, r.r_count = r.r_count - ${r}, r.version = r.version + 1
 WHERE l.id = ${id} AND l.resource_id = UNHEX(${resourceHex}) AND l.lock_type = ${type} AND l.status = ${STATUS.live} AND l.token = UNHEX(${tokenHex})`;
}

/** Rows RELEASE_SQL changes when it releases. */
export const RELEASED_ROWS = 2;

/** RELEASE_SQL's parameters: numbers and the resource id as hex. */
export type ReleaseParams = [
  releasedBy: number,
  writeCount: number,
  readCount: number,
  grantId: number,
  resourceHex: Hex,
  lockType: number,
  tokenHex: Hex,
];

export function releaseParams(grant: GrantRef, by: keyof typeof RELEASED_BY): ReleaseParams {
  const write = grant.mode === 'write' ? 1 : 0;
  const read = write === 1 ? 0 : grant.mode === 'permit' ? (grant.permits ?? 1) : 1;
  return [RELEASED_BY[by], write, read, grant.id, hex(grant.resource), LOCK_TYPE[grant.mode], hex(grant.token)];
}

/** RELEASE_SQL naming the grant by its token alone (a UNIQUE key), for a grant whose id a JS number cannot hold. */
const RELEASE_BY_TOKEN_SQL = RELEASE_SQL.replace('WHERE l.id = ? AND ', 'WHERE ');
if (RELEASE_BY_TOKEN_SQL === RELEASE_SQL) throw new Error('release.ts: RELEASE_SQL no longer names the id first');

/**
 * Releases a live grant named by its token, and reads its exact id (as decimal digits): for a
 * grant whose id is past 2^53, which a JS number would round to another grant's id. The token is
 * unique, so the release matches this grant or nothing. Its own transaction.
 */
export async function releaseByToken(
  conn: RawConnection,
  grant: Omit<GrantRef, 'id'>,
  by: keyof typeof RELEASED_BY,
): Promise<{ id: string | null; released: boolean }> {
  const [row] = await query<Array<{ id: string }>>(
    conn,
    'SELECT CAST(id AS CHAR) AS id FROM t_lock_log WHERE token = UNHEX(?)',
    [hex(grant.token)],
  );
  const [releasedBy, w, r, , resourceHex, lockType, tokenHex] = releaseParams({ ...grant, id: 0 }, by);
  const result = await query<{ affectedRows: number }>(conn, RELEASE_BY_TOKEN_SQL, [
    releasedBy,
    w,
    r,
    resourceHex,
    lockType,
    tokenHex,
  ]);
  return { id: row?.id ?? null, released: result.affectedRows === RELEASED_ROWS };
}

/** Releases on its own connection, as its own transaction. True when this statement released it. */
export async function releaseGrant(
  conn: RawConnection,
  grant: GrantRef,
  by: keyof typeof RELEASED_BY,
): Promise<boolean> {
  const result = await query<{ affectedRows: number; serverStatus?: number }>(
    conn,
    RELEASE_SQL,
    releaseParams(grant, by),
  );
  // Resolving true promises a durable release, not one in a transaction the session left open.
  await commitIfLeftOpen(conn, result);
  return result.affectedRows === RELEASED_ROWS;
}

/**
 * Releases a group of grants, on distinct resources, in one statement: RELEASE_SQL's join, with
 * one WHERE term per grant naming the state it expects. Each grant changes its log row and its
 * resource row, so the statement changes `RELEASED_ROWS` × n rows exactly when every grant was
 * live; fewer means one of them was not, and the caller's transaction must roll back (its other
 * releases with it). Each resource row gives back its own grant's count: the mode travels in the
 * WHERE term (`lock_type`), and the SET reads it from the grant row it joined (a permit grant gives
 * back its `permits`).
 *
 * The grants' rows are read by primary key (`FORCE INDEX`): left to itself the optimizer may read
 * every live grant through the status index instead when few are live, a plan that grows with the
 * number of live grants, and one that MariaDB's `sql_safe_updates` takes where it refuses the
 * primary-key ranges (1175), so that whether a safe-mode pool needed the one-by-one fence depended
 * on the table's statistics.
 */
export function releaseManySql(n: number): string {
  const term = '(l.id = ? AND l.resource_id = UNHEX(?) AND l.lock_type = ? AND l.token = UNHEX(?))';
  return `UPDATE t_lock_log l FORCE INDEX (PRIMARY) JOIN t_read_write_lock r ON r.resource_id = l.resource_id
   SET l.status = ${STATUS.released}, l.version = l.version + 1, l.released_at = ${DB_NOW}, l.released_by = ?,
       r.w_count = r.w_count - (l.lock_type = ${LOCK_TYPE.write}), r.r_count = r.r_count - IF(l.lock_type = ${LOCK_TYPE.read}, COALESCE(l.permits, 1), 0),
       r.version = r.version + 1
 WHERE l.status = ${STATUS.live} AND (${Array.from({ length: n }, () => term).join('\n    OR ')})`;
}

/** releaseManySql's parameters: who releases, then id, resource hex, lock type and token hex per grant. */
export function releaseManyParams(grants: readonly GrantRef[], by: keyof typeof RELEASED_BY): (number | Hex)[] {
  return [
    RELEASED_BY[by],
    ...grants.flatMap((g) => [g.id, hex(g.resource), LOCK_TYPE[g.mode], hex(g.token)] as (number | Hex)[]),
  ];
}
