import { query, type RawConnection } from './connection.js';
import { modeOf, type LockMode } from '../types.js';
import type { GrantRef } from './release.js';

export interface LoggedGrant {
  id: number;
  status: number;
  releasedBy: number | null;
  /** The mode the grant has now (a downgrade or upgrade changes it in place). */
  mode: LockMode;
}

type Row = {
  id: number | string;
  status: number;
  released_by: number | null;
  lock_type: number;
  permits: number | string | null;
};

const COLUMNS = 'id, status, released_by, lock_type, permits';

function fromRow(row: Row | undefined): LoggedGrant | null {
  return row
    ? {
        id: Number(row.id),
        status: Number(row.status),
        releasedBy: row.released_by === null ? null : Number(row.released_by),
        mode: modeOf(Number(row.lock_type), row.permits),
      }
    : null;
}

/** Finds a grant row by its client-generated token (UNIQUE key). */
export async function findGrantByToken(conn: RawConnection, token: Buffer): Promise<LoggedGrant | null> {
  return fromRow((await query<Row[]>(conn, `SELECT ${COLUMNS} FROM t_lock_log WHERE token = ?`, [token]))[0]);
}

/** What a release needs to know of a grant, by id; null when there is no such grant. */
export async function findGrantRef(conn: RawConnection, id: number): Promise<GrantRef | null> {
  const rows = await query<Array<{ resource_id: Buffer; lock_type: number; permits: number | null; token: Buffer }>>(
    conn,
    'SELECT resource_id, lock_type, permits, token FROM t_lock_log WHERE id = ?',
    [id],
  );
  const row = rows[0];
  if (!row) return null;
  const ref: GrantRef = {
    id,
    resource: row.resource_id,
    mode: modeOf(Number(row.lock_type), row.permits),
    token: row.token,
  };
  if (row.permits !== null) ref.permits = Number(row.permits);
  return ref;
}
