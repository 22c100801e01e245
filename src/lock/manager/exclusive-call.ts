import { tryTraced, notInSection } from './acquire-calls.js';
import { checkPool, target } from './call-options.js';
import { withConnection } from '../../sql/connection.js';
import type { LockContext } from '../context/lock-context.js';
import { InvalidOptionsError } from '../../errors.js';
import { runFenced, runGranted } from '../fence/fenced.js';
import type { GrantedWork, LockedWork } from '../../contract/api.js';
import { resolveExclusiveOptions, type ExclusiveOptions } from '../../options.js';
import { resourceKey } from '../durable/resource-id.js';
import { inspectResource } from '../../sql/inspect.js';
import { inHoldWrappers } from '../../contract/hold-wrappers.js';
import { runExclusiveJob, type ExclusiveResult } from '../scheduled/exclusive.js';
import { findGrantByToken } from '../../sql/lookup.js';
import { DurableGrant } from '../durable/grant.js';
import { STATUS } from '../../types.js';

/**
 * `runExclusive`: the job runner of `src/lock/scheduled/exclusive.ts` over this manager's acquires and reads.
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
      successor: async (token) => {
        const row = await withConnection(ctx.knex, (conn) => findGrantByToken(conn, token));
        return row?.status === STATUS.live
          ? DurableGrant.create(ctx, row.id, name, resourceKey(name), 'write', token)
          : null;
      },
      inFlight,
      run: (grant) =>
        inHoldWrappers(grant, () =>
          o.grant
            ? runGranted(ctx, grant, work as GrantedWork<T>)
            : runFenced(ctx, grant, work as LockedWork<T>, undefined),
        ),
    },
    name,
    o,
  );
}
