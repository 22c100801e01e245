import { withConnection } from '../../sql/connection.js';
import type { LockContext } from '../context/lock-context.js';
import { InvalidOptionsError } from '../../errors.js';
import type { Grant } from '../../contract/api.js';
import {
  booleanOption,
  DEFAULTS,
  integerOption,
  LIMITS,
  optionsObject,
  textOption,
  type ForceReleaseOptions,
  type HistoryOptions,
  type ListOptions,
} from '../../options.js';
import { resourceKey } from '../durable/resource-id.js';
import { inspectResource, type LockState } from '../../sql/inspect.js';
import { findGrantRef } from '../../sql/lookup.js';
import {
  lockStats,
  listLive,
  resourceHistory,
  type GrantHistoryEntry,
  type ListedGrant,
  type ListFilter,
  type LockStats,
} from '../../sql/operate.js';
import { operatorRelease } from '../../sql/release-note.js';
import type { LockMode } from '../../types.js';
import type { Knex } from 'knex';
import { releaseChannel, traced } from '../../contract/channels.js';

// The manager's reads (current, inspect, list, history, stats) and its operator release.

/** `current`: the enclosing scoped call in this async context, on a resource or the innermost. */
export function currentCall(
  ctx: LockContext,
  resourceId: string | undefined,
): { grant: Grant; trx: Knex.Transaction | undefined } | undefined {
  const held =
    resourceId === undefined ? ctx.scopes.current() : ctx.scopes.current(resourceKey(resourceId).toString('hex'));
  return held === undefined ? undefined : { grant: held.grant, trx: held.trx };
}

/** `inspect`. */
export async function inspectCall(ctx: LockContext, resourceId: string): Promise<LockState> {
  const resource = resourceKey(resourceId);
  return withConnection(ctx.knex, (conn) => inspectResource(conn, resourceId, resource, ctx.options.staleAfterMs));
}

/** `forceRelease`. */
export async function forceReleaseCall(
  ctx: LockContext,
  grantId: number,
  options: ForceReleaseOptions | undefined,
): Promise<boolean> {
  integerOption('grantId', grantId, 1);
  const o = optionsObject('forceRelease', options, ['reason']);
  const reason = o.reason === undefined ? null : textOption('reason', o.reason, LIMITS.maxReasonChars);
  return traced(
    releaseChannel,
    () => ({ grantId, by: 'operator' as const, knex: ctx.knex }),
    () =>
      withConnection(ctx.knex, async (conn) => {
        const ref = await findGrantRef(conn, grantId);
        return ref !== null && operatorRelease(conn, ref, ctx.ownerBytes, reason);
      }),
  );
}

/** `list`. */
export async function listCall(
  ctx: LockContext,
  options: ListOptions | undefined,
): Promise<{ grants: ListedGrant[]; next: number | null }> {
  const o = optionsObject('list', options, ['mode', 'owner', 'staleOnly', 'resourcePrefix', 'limit', 'after']);
  if (o.mode !== undefined && o.mode !== 'write' && o.mode !== 'read' && o.mode !== 'permit')
    throw new InvalidOptionsError(
      `mode must be 'write', 'read' or 'permit', got ${JSON.stringify(o.mode) ?? typeof o.mode}`,
    );
  const filter: ListFilter = {
    mode: o.mode as LockMode | undefined,
    owner: o.owner === undefined ? undefined : textOption('owner', o.owner, LIMITS.maxOwnerChars),
    staleOnly: booleanOption('staleOnly', o.staleOnly, false),
    resourcePrefix: o.resourcePrefix === undefined ? undefined : resourceKey(o.resourcePrefix),
    limit: integerOption('limit', o.limit ?? DEFAULTS.list.limit, 1, LIMITS.maxPageSize),
    after: o.after === undefined ? undefined : integerOption('after', o.after, 1),
  };
  return withConnection(ctx.knex, (conn) => listLive(conn, filter, ctx.options.staleAfterMs));
}

/** `history`. */
export async function historyCall(
  ctx: LockContext,
  resourceId: string,
  options: HistoryOptions | undefined,
): Promise<{ grants: GrantHistoryEntry[]; next: number | null }> {
  const resource = resourceKey(resourceId);
  const o = optionsObject('history', options, ['limit', 'before']);
  const limit = integerOption('limit', o.limit ?? DEFAULTS.history.limit, 1, LIMITS.maxPageSize);
  const before = o.before === undefined ? undefined : integerOption('before', o.before, 1);
  return withConnection(ctx.knex, (conn) => resourceHistory(conn, resource, limit, before));
}

/** `stats`. */
export function statsCall(ctx: LockContext): Promise<LockStats> {
  return withConnection(ctx.knex, (conn) => lockStats(conn, ctx.options.staleAfterMs));
}
