// Before a manager's first grant: can this user release what it is about to acquire? A user with
// only EXECUTE (the procedure once ran with its definer's rights), or without UPDATE on the log,
// could acquire and then not release: the grant would stay live until the reaper, and every other
// acquirer of the resource would wait for it.
import type { LockContext } from './context.js';
import { privilegeError, query, withConnection } from '../sql/connection.js';

/**
 * Statements that need the privileges of a release (the UPDATE of the grant row joined with the
 * resource row, and reading both) and of settling a lost acquire reply (INSERT of a withdrawn row),
 * column by column as those statements use them, and change nothing: `WHERE FALSE`. The servers
 * check a statement's privileges before running it, so a missing one fails here (MariaDB 10.11 and
 * MySQL 9.7: test/privileges.test.ts). The leading comment names them in a server's logs, and
 * keeps them from looking like the statements they stand for to anything that matches those.
 */
export const PROBES: readonly string[] = [
  `/* mysql-rwlock: release privilege probe */ UPDATE t_lock_log l JOIN t_read_write_lock r ON r.resource_id = l.resource_id
      SET l.status = l.status, l.version = l.version, l.released_at = l.released_at, l.released_by = l.released_by,
          l.lease_until = l.lease_until, l.lock_type = l.lock_type, l.mode_changed_at = l.mode_changed_at,
          r.w_count = r.w_count, r.r_count = r.r_count, r.version = r.version
    WHERE FALSE AND l.id = 0 AND l.token = 0x00`,
  `/* mysql-rwlock: release privilege probe */ INSERT INTO t_lock_log (resource_id, lock_type, status, create_time, version, owner, token, released_at, released_by)
   SELECT 0x00, 0, 0, NOW(6), 0, '', 0x00, NULL, NULL FROM DUAL WHERE FALSE`,
];

/** Switched off only by the tests' negative controls, to show what the probe prevents. */
export const releaseProbe = { enabled: true };

const passed = new WeakSet<LockContext>();
const running = new WeakMap<LockContext, Promise<void>>();

/**
 * Resolves once this manager's user was found to hold the release's privileges (two round trips,
 * once per manager); rejects with PrivilegeError (role `app`), before anything is written, when it
 * lacks one. Any other failure is left to the acquire, which meets it in its own statements and
 * handles it as it does there; the probe runs again before the next acquire.
 */
export async function ensureReleasable(ctx: LockContext): Promise<void> {
  if (passed.has(ctx) || !releaseProbe.enabled) return;
  let probe = running.get(ctx);
  if (probe === undefined) {
    probe = withConnection(ctx.knex, async (conn) => {
      for (const sql of PROBES) await query(conn, sql);
    }).then(() => {
      passed.add(ctx);
    }, (err: unknown) => {
      const denied = privilegeError(err, ctx.acquirePath.statements ? 'app-no-procedures' : 'app');
      if (denied) throw denied;
    }).finally(() => running.delete(ctx));
    running.set(ctx, probe);
  }
  await probe;
}
