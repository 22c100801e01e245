import { query, type RawConnection } from '../connection.js';

export interface LoggedGrant {
  id: number;
  status: number;
  releasedBy: number | null;
}

/** Finds a grant row by its client-generated token (UNIQUE key). */
export async function findGrantByToken(conn: RawConnection, token: Buffer): Promise<LoggedGrant | null> {
  const rows = await query<Array<{ id: number | string; status: number; released_by: number | null }>>(
    conn, 'SELECT id, status, released_by FROM t_lock_log WHERE token = ?', [token],
  );
  const row = rows[0];
  return row ? { id: Number(row.id), status: row.status, releasedBy: row.released_by } : null;
}

/** Reads a grant row by id. */
export async function findGrantById(conn: RawConnection, id: number): Promise<LoggedGrant | null> {
  const rows = await query<Array<{ id: number | string; status: number; released_by: number | null }>>(
    conn, 'SELECT id, status, released_by FROM t_lock_log WHERE id = ?', [id],
  );
  const row = rows[0];
  return row ? { id: Number(row.id), status: row.status, releasedBy: row.released_by } : null;
}

/**
 * True when the server thread `threadId` has no command in progress: it is gone, or idle.
 * A transaction commits only while its thread runs a command, so from then on the outcome of
 * whatever the lost connection sent is final and a lookup tells it.
 * (An id reused after a server restart can only make this wait longer, never answer early.)
 */
export async function threadIsQuiet(conn: RawConnection, threadId: number): Promise<boolean> {
  const rows = await query<Array<{ command: string }>>(
    conn, 'SELECT COMMAND AS command FROM information_schema.PROCESSLIST WHERE ID = ?', [threadId],
  );
  const row = rows[0];
  return row === undefined || row.command === 'Sleep';
}
