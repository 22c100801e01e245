// `import ... from 'mysql-rwlock'` as an app writes it: every name the entry exports is imported here
// and used once, so a removed, renamed or retyped export fails `.ci/consumer-matrix.sh`, which
// type-checks this file against the packed tarball on every TypeScript x @types/node x resolution it
// tries and fails when the entry exports a name this file does not import.
// When the entry changes: edit the import list, then the one line per name below (grouped as the
// entry groups them). Nothing here runs; it only has to compile.
import type { Knex } from 'knex';
import { fromKnex } from 'mysql-rwlock/adapters';
import {
  createLockManager,
  type LockManager,
  type Grant,
  type FenceExecutor,
  type LockedWork,
  type LockGroup,
  DEFAULTS,
  LIMITS,
  type LockManagerOptions,
  type AcquireOptions,
  type WithLockOptions,
  type IsolationLevel,
  type ProceduresMode,
  type ListOptions,
  type HistoryOptions,
  type ForceReleaseOptions,
  type ListedGrant,
  type GrantHistoryEntry,
  type LockStats,
  type LockState,
  type Holder,
  type LockMode,
  type ReleasedBy,
  type LockLostInfo,
  isConflict,
  RwLockError,
  InvalidResourceIdError,
  InvalidOptionsError,
  LockTimeoutError,
  LockAbortedError,
  LockLostError,
  LockOutcomeUnknownError,
  SchemaMissingError,
  ServerReadOnlyError,
  NodeNotReadyError,
  LockInvariantError,
  ConnectionLostError,
  TransactionConflictError,
  LockUpgradeError,
  PoolTooSmallError,
  ManagerClosedError,
  PrivilegeError,
  DatabaseUnreachableError,
  UnsupportedSettingError,
  ResourceKindError,
  PermitLimitError,
  LeadershipError,
  type Campaign,
  type Term,
} from 'mysql-rwlock';

// The lock client.
export async function lockClient(db: Knex): Promise<number> {
  const onLockLost = (grant: Grant, info: LockLostInfo): void =>
    console.log(grant.id, info.releasedBy, info.detectedBy);
  const procedures: ProceduresMode = DEFAULTS.procedures;
  const options: LockManagerOptions = {
    knex: db,
    owner: 'consumer',
    staleAfterMs: DEFAULTS.staleAfterMs,
    procedures,
    onLockLost,
    selfHeal: DEFAULTS.selfHeal,
    maintenance: { intervalMs: DEFAULTS.maintenance.intervalMs, retentionMs: 0 },
  };
  const locks: LockManager = createLockManager(options);
  const acquire: AcquireOptions = { waitMs: DEFAULTS.waitMs, signal: AbortSignal.timeout(LIMITS.maxTimerMs) };
  const isolationLevel: IsolationLevel = 'read committed';
  const withLock: WithLockOptions = { ...acquire, isolationLevel, leaseMs: LIMITS.minLeaseMs };
  const work: LockedWork<number> = async (trx, grant) => (await trx('payments').insert({ grant_id: grant.id })).length;
  const inserted: number = await locks.withWriteLock(
    `loan:${'x'.repeat(LIMITS.maxResourceIdBytes - 5)}`,
    work,
    withLock,
  );
  await locks.withReadLock('loan-1', async (_trx, grant) => grant.mode);

  const grant: Grant | null = await locks.tryAcquireWrite('loan-1');
  if (grant === null) return inserted;
  const mode: LockMode = grant.mode;
  const execute: FenceExecutor = async (sql: string, params: (number | string)[]) => (await db.raw(sql, params)).length;
  try {
    await grant.fence(execute);
    grant.committed();
  } catch (err) {
    if (err instanceof LockLostError) return -1;
    if (isConflict(err)) return -2;
    throw err;
  } finally {
    await grant.release();
  }
  {
    await using read = await locks.acquireRead('loan-1', acquire);
    const upgraded: Grant | null = await read.tryUpgrade();
    if (upgraded) await upgraded.downgrade();
    console.log(mode, read.token, read.signal.aborted, await read.extend(1000), await read.isLive(), read.settled);
  }
  await locks.withLocks({ write: ['loan-1', 'loan-2'] }, async (_trx, grants) => grants.length, { section: true });
  {
    await using group: LockGroup = await locks.acquireMany({ write: ['loan-1'], read: ['loan-2'] }, acquire);
    await group.fence(execute);
    group.committed();
    console.log(group.grants.length, group.settled, await group.release());
  }
  // Semaphores: a grant of permits, alone, scoped, and in a group.
  {
    await using permit = await locks.acquirePermit('partner-api', { permits: 20, count: 2, ...acquire });
    console.log(permit.mode, permit.permits, (await locks.tryAcquirePermit('partner-api', { permits: 20 }))?.id);
    await locks.withPermit('exports', async (trx, g) => trx('exports').insert({ grant_id: g.id }), { permits: 5 });
    await locks.withLocks({ permits: [{ id: 'queue:a', permits: 3 }], write: ['loan-3'] }, async () => undefined);
  }
  const id = (await locks.tryAcquireRead('loan-2'))?.id ?? 0;
  await locks.close();
  return id;
}

// Inspecting and operating.
export async function operate(locks: LockManager): Promise<void> {
  const state: LockState = await locks.inspect('loan-1');
  const holders: Holder[] = state.holders;
  const list: ListOptions = { mode: 'write', staleOnly: true, limit: DEFAULTS.list.limit };
  const listed: ListedGrant[] = (await locks.list(list)).grants;
  const history: HistoryOptions = { limit: DEFAULTS.history.limit };
  const ended: GrantHistoryEntry[] = (await locks.history('loan-1', history)).grants;
  const releasedBy: Array<ReleasedBy | null> = ended.map((g) => g.releasedBy);
  const stats: LockStats = await locks.stats();
  const force: ForceReleaseOptions = { reason: 'stuck' };
  console.log(
    holders.length,
    listed.length,
    releasedBy,
    stats.live.write,
    await locks.forceRelease(1, force),
    locks.owner,
  );
}

// Errors: every class, as `instanceof` and as a base class.
export function describeError(err: unknown): string {
  const classes = [
    InvalidResourceIdError,
    InvalidOptionsError,
    LockTimeoutError,
    LockAbortedError,
    LockLostError,
    LockOutcomeUnknownError,
    SchemaMissingError,
    ServerReadOnlyError,
    NodeNotReadyError,
    LockInvariantError,
    ConnectionLostError,
    TransactionConflictError,
    LockUpgradeError,
    PoolTooSmallError,
    ManagerClosedError,
    PrivilegeError,
    DatabaseUnreachableError,
    UnsupportedSettingError,
    ResourceKindError,
    PermitLimitError,
    LeadershipError,
  ];
  if (err instanceof PrivilegeError) return `${err.code}: ${err.denied} (role ${err.role ?? 'unknown'})`;
  if (err instanceof DatabaseUnreachableError && err.grantId !== null)
    return `${err.code}: grant ${err.grantId} left live`;
  if (err instanceof UnsupportedSettingError) return `${err.code}: ${err.setting}`;
  if (err instanceof PermitLimitError) return `${err.code}: asked ${err.asked}, held under ${err.heldLimit}`;
  if (err instanceof LeadershipError)
    return `${err.code}: ${err.leaderName} (${err.reason}, term ${err.term ?? 'none'})`;
  if (err instanceof ResourceKindError) return `${err.code}: ${err.resourceId} refused for ${err.asked}`;
  const known: RwLockError | undefined = err instanceof RwLockError ? err : undefined;
  const named = classes.find((c) => err instanceof c)?.name;
  return known ? `${known.code} ${named ?? known.name}: ${known.message}` : String(err);
}

// Leadership: a campaign, its terms, and the leader as others see it.
export async function lead(locks: LockManager, db: Knex): Promise<void> {
  const campaign: Campaign = await locks.campaign('outbox', async (term: Term) => {
    if (!term.signal.aborted) await db.transaction((trx) => term.fence(fromKnex(trx)));
    console.log(term.name, term.id, term.owner);
  });
  console.log(campaign.name, campaign.term?.id, (await locks.leader('outbox'))?.owner);
  const { terms, next } = await locks.terms('outbox', { limit: 5 });
  for (const t of terms) console.log(t.term, t.owner, t.since, t.endedAt, t.leaseUntil, t.how, t.releaser, t.reason);
  console.log(next);
  await campaign.close();
}
