import { query, type RawConnection } from './connection.js';
import { DB_NOW } from './clock.js';

/**
 * Statements that need the privileges of a release (the UPDATE of the grant row joined with the
 * resource row, and reading both) and of settling a lost acquire reply (INSERT of a withdrawn row),
 * column by column as those statements use them, and change nothing: `WHERE FALSE`. The servers
 * check a statement's privileges before running it, so a missing one fails here (MariaDB 10.11 and
 * MySQL 9.7: test/privileges.test.ts). The leading comment names them in a server's logs, and
 * keeps them from looking like the statements they stand for to anything that matches those.
 */
export const RELEASE_PROBES: readonly string[] = [
  `/* mysql-rwlock: release privilege probe */ UPDATE t_lock_log l JOIN t_read_write_lock r ON r.resource_id = l.resource_id
      SET l.status = l.status, l.version = l.version, l.released_at = l.released_at, l.released_by = l.released_by,
          l.lease_until = l.lease_until, l.lock_type = l.lock_type, l.mode_changed_at = l.mode_changed_at,
          r.w_count = r.w_count, r.r_count = r.r_count, r.version = r.version
    WHERE FALSE AND l.id = 0 AND l.token = 0x00`,
  `/* mysql-rwlock: release privilege probe */ INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token, released_at, released_by)
   SELECT 0x00, 0, 0, ${DB_NOW}, 0, '', 0x00, NULL, NULL FROM DUAL WHERE FALSE`,
];

/** Runs the probes: resolves when this connection's user may release and settle; else PrivilegeError (from `query`). */
export async function probeReleasePrivileges(conn: RawConnection): Promise<void> {
  for (const sql of RELEASE_PROBES) await query(conn, sql);
}
