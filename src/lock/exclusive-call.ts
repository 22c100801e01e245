import { tryTraced, notInSection } from './acquire-calls.js';
import { checkPool, target } from './call-options.js';
import { withConnection } from '../sql/connection.js';
import type { LockContext } from './context.js';
import { InvalidOptionsError } from '../errors.js';
import { runFenced, runGranted } from './fenced.js';
import type { GrantedWork, LockedWork } from './api.js';
import { resolveExclusiveOptions, type ExclusiveOptions } from '../options.js';
import { resourceKey } from './resource-id.js';
import { inspectResource } from '../sql/inspect.js';
import { inHoldScope } from './hold-scope.js';
import { checkJobName, runExclusiveJob, type ExclusiveResult } from '../jobs/exclusive.js';

/**
 * `runExclusive`: the job runner of `src/jobs/exclusive.ts` over this manager's acquires and reads.
 * `inFlight` counts the hold after the run as part of the call, so that `close()` waits for it.
 */
export async function runExclusiveCall<T>(
  ctx: LockContext,
  name: string,
  work: LockedWork<T> | GrantedWork<T>,
  options: ExclusiveOptions,
  inFlight: (hold: Promise<unknown>) => void,
): Promise<ExclusiveResult<T | undefined>> {
  const o = resolveExclusiveOptions('runExclusive', options);
  checkJobName(name, o);
  const job = target('write', name);
  if (typeof work !== 'function')
    throw new InvalidOptionsError(
      `work: runExclusive needs a function (${o.grant ? 'grant' : 'trx, grant'}) => Promise`,
    );
  notInSection(ctx, job, 'runExclusive');
  checkPool(ctx, true, 'runExclusive');
  return runExclusiveJob<T | undefined>(
    {
      tryWrite: (id) => tryTraced(ctx, target('write', id)),
      heldBy: async (id) =>
        (await withConnection(ctx.knex, (conn) => inspectResource(conn, id, resourceKey(id), 0))).holders.find(
          (h) => h.mode === 'write',
        )?.owner ?? null,
      ageMs: async (grant) =>
        (
          await withConnection(ctx.knex, (conn) => inspectResource(conn, grant.resourceId, grant.ref.resource, 0))
        ).holders.find((h) => h.id === grant.id)?.ageMs ?? null,
      inFlight,
      run: (grant) =>
        inHoldScope(grant, () =>
          o.grant
            ? runGranted(ctx, grant, work as GrantedWork<T>)
            : runFenced(ctx, grant, work as LockedWork<T>, undefined),
        ),
    },
    name,
    o,
  );
}
