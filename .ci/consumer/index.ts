// `import ... from 'mysql-rwlock'` as an app writes it: every name the entry exports is imported here
// and used once, so a removed, renamed or retyped export fails `.ci/consumer-matrix.sh`, which
// type-checks this file against the packed tarball on every TypeScript x @types/node x resolution it
// tries and fails when the entry exports a name this file does not import.
// When the entry changes: edit the import list, then the one line per name below (grouped as the
// entry groups them). Nothing here runs; it only has to compile.
import diagnostics from 'node:diagnostics_channel';
import type { Knex } from 'knex';
import {
  createLockManager,
  LockManager,
  type LockedWork,
  type Grant,
  type FenceExecutor,
  migrate,
  MIGRATION_TABLE,
  MIGRATE_DEFAULTS,
  type MigrateOptions,
  type MigrateResult,
  reapStaleGrants,
  purgeReleasedGrants,
  REAP_DEFAULTS,
  type ReapOptions,
  type ReapResult,
  type PurgeOptions,
  checkLockCounts,
  repairLockCounts,
  type CountCheckOptions,
  type CountCheck,
  type CountRepair,
  type CountDisagreement,
  DEFAULTS,
  LIMITS,
  type LockManagerOptions,
  type AcquireOptions,
  type WithLockOptions,
  type IsolationLevel,
  type ProceduresMode,
  OPERATE_DEFAULTS,
  type ListOptions,
  type HistoryOptions,
  type ForceReleaseOptions,
  type LockLostHandler,
  type LockLostInfo,
  type ListedGrant,
  type GrantHistoryEntry,
  type LockStats,
  MAX_RESOURCE_ID_BYTES,
  type LockState,
  type Holder,
  type ReapedGrant,
  type LockMode,
  type ReleasedBy,
  isConflict,
  RELEASE_SQL,
  type ReleaseParams,
  CHANNELS,
  type AcquireContext,
  type FenceContext,
  type ReleaseContext,
  type ReapContext,
  type LostMessage,
  type LockTracingChannel,
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
  MigrationLockedError,
  LockUpgradeError,
  PoolTooSmallError,
} from 'mysql-rwlock';

// The lock client.
export async function lockClient(db: Knex): Promise<number> {
  const onLockLost: LockLostHandler = (grant: Grant, info: LockLostInfo) =>
    console.log(grant.id, info.releasedBy, info.detectedBy);
  const procedures: ProceduresMode = DEFAULTS.procedures;
  const options: LockManagerOptions = {
    knex: db,
    owner: 'consumer',
    staleAfterMs: DEFAULTS.staleAfterMs,
    procedures,
    onLockLost,
  };
  const locks: LockManager = createLockManager(options);
  const second = new LockManager({ knex: db });
  const acquire: AcquireOptions = { waitMs: DEFAULTS.waitMs, signal: AbortSignal.timeout(LIMITS.maxTimerMs) };
  const isolationLevel: IsolationLevel = 'read committed';
  const withLock: WithLockOptions = { ...acquire, isolationLevel, leaseMs: LIMITS.minLeaseMs };
  const work: LockedWork<number> = async (trx, grant) => (await trx('payments').insert({ grant_id: grant.id })).length;
  const inserted: number = await locks.withWriteLock(`loan:${'x'.repeat(MAX_RESOURCE_ID_BYTES - 5)}`, work, withLock);
  await locks.withReadLock('loan-1', async (_trx, grant) => grant.mode);

  const grant: Grant | null = await second.tryAcquireWrite('loan-1');
  if (grant === null) return inserted;
  const mode: LockMode = grant.mode;
  const execute: FenceExecutor = async (sql: string, params: ReleaseParams) => (await db.raw(sql, params)).length;
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
  return (await locks.tryAcquireRead('loan-2'))?.id ?? 0;
}

// Inspecting and operating.
export async function operate(locks: LockManager): Promise<void> {
  const state: LockState = await locks.inspect('loan-1');
  const holders: Holder[] = state.holders;
  const list: ListOptions = { mode: 'write', staleOnly: true, limit: OPERATE_DEFAULTS.listLimit };
  const listed: ListedGrant[] = (await locks.list(list)).grants;
  const history: HistoryOptions = { limit: OPERATE_DEFAULTS.historyLimit };
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
    RELEASE_SQL.length,
  );
}

// Administration: functions of a knex.
export async function administer(db: Knex): Promise<void> {
  const migrateOptions: MigrateOptions = { waitMs: MIGRATE_DEFAULTS.waitMs, procedures: MIGRATE_DEFAULTS.procedures };
  const migrated: MigrateResult = await migrate(db, migrateOptions);
  const reapOptions: ReapOptions = {
    batchSize: REAP_DEFAULTS.batchSize,
    lockWaitTimeoutSec: REAP_DEFAULTS.lockWaitTimeoutSec,
  };
  const reaped: ReapResult = await reapStaleGrants(db, reapOptions);
  const reapedGrants: ReapedGrant[] = reaped.grants;
  const purge: PurgeOptions = { retentionMs: REAP_DEFAULTS.retentionMs, batchSize: REAP_DEFAULTS.purgeBatchSize };
  const { purged } = await purgeReleasedGrants(db, purge);
  const countOptions: CountCheckOptions = { limit: OPERATE_DEFAULTS.countCheckLimit };
  const check: CountCheck = await checkLockCounts(db, countOptions);
  const disagreements: CountDisagreement[] = check.disagreements;
  const repair: CountRepair = await repairLockCounts(db, countOptions);
  console.log(
    MIGRATION_TABLE,
    migrated.applied,
    reapedGrants.length,
    purged,
    disagreements.length,
    repair.repaired.length,
  );
}

// Tracing: node's tracing channels under the library's own channel type, with no cast.
export function trace(): () => void {
  const acquire: LockTracingChannel<AcquireContext> = diagnostics.tracingChannel(CHANNELS.acquire);
  const fence: LockTracingChannel<FenceContext> = diagnostics.tracingChannel(CHANNELS.fence);
  const release: LockTracingChannel<ReleaseContext> = diagnostics.tracingChannel(CHANNELS.release);
  const reap: LockTracingChannel<ReapContext> = diagnostics.tracingChannel(CHANNELS.reap);
  const started = new WeakMap<AcquireContext, number>();
  const acquireHandlers = {
    start: (c: AcquireContext) => void started.set(c, performance.now()),
    asyncEnd: (c: AcquireContext) =>
      console.log(c.resourceId, c.mode, c.result ? 'granted' : 'busy', performance.now() - (started.get(c) ?? 0)),
  };
  acquire.subscribe(acquireHandlers);
  fence.subscribe({ error: (c) => console.log(c.grantId, c.error) });
  release.subscribe({ asyncEnd: (c) => console.log(c.grantId, c.by, c.result) });
  reap.subscribe({ asyncEnd: (c) => console.log(c.staleAfterMs, c.result?.reaped) });
  // @types/node types a plain channel's listener as taking unknown.
  const onLost = (message: unknown) => {
    const m = message as LostMessage;
    console.log(m.grantId, m.releasedBy, m.detectedBy);
  };
  diagnostics.subscribe(CHANNELS.lost, onLost);
  return () => {
    acquire.unsubscribe(acquireHandlers);
    diagnostics.unsubscribe(CHANNELS.lost, onLost);
    console.log(acquire.start.hasSubscribers, acquire.error.hasSubscribers);
  };
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
    MigrationLockedError,
    LockUpgradeError,
    PoolTooSmallError,
  ];
  const known: RwLockError | undefined = err instanceof RwLockError ? err : undefined;
  const named = classes.find((c) => err instanceof c)?.name;
  return known ? `${known.code} ${named ?? known.name}: ${known.message}` : String(err);
}
