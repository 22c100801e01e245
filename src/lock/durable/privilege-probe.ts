// Before a manager's first grant: can this user release what it is about to acquire? A user with
// only EXECUTE (the procedure once ran with its definer's rights), or without UPDATE on the log,
// could acquire and then not release: the grant would stay live until the reaper, and every other
// acquirer of the resource would wait for it.
import type { LockContext } from '../context/lock-context.js';
import { privilegeError, withConnection, type ConnectionWait } from '../../sql/connection.js';
import { DatabaseUnreachableError } from '../../errors.js';
import { probeReleasePrivileges } from '../../sql/release-probe.js';
import { testSwitches } from '../../test-switches.js';

const passed = new WeakSet<LockContext>();
const running = new WeakMap<LockContext, Promise<void>>();

/**
 * Resolves once this manager's user was found to hold the release's privileges (two round trips,
 * once per manager); rejects with PrivilegeError (role `app`, or `app-no-procedures`), before
 * anything is written, when it lacks one. Any other failure is left to the acquire, which meets it
 * in its own statements and handles it as it does there; the probe runs again before the next one.
 */
export async function ensureReleasable(ctx: LockContext, wait: ConnectionWait = {}): Promise<void> {
  if (passed.has(ctx) || !testSwitches.privilegeProbe.probe) return;
  let probe = running.get(ctx);
  if (probe === undefined) {
    probe = withConnection(ctx.knex, probeReleasePrivileges, wait)
      .then(
        () => {
          passed.add(ctx);
        },
        (err: unknown) => {
          const denied = privilegeError(err, ctx.acquirePath.statements ? 'app-no-procedures' : 'app');
          if (denied) throw denied;
          // No connection could be had: the acquire could not send its statements either.
          if (err instanceof DatabaseUnreachableError) throw err;
        },
      )
      .finally(() => running.delete(ctx));
    running.set(ctx, probe);
  }
  await probe;
}
