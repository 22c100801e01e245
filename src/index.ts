export { createLockManager, LockManager, type LockedWork } from './lock/manager.js';
export { Grant, type FenceExecutor } from './lock/grant.js';
export { migrate, MIGRATION_TABLE, MIGRATE_DEFAULTS, type MigrateOptions, type MigrateResult } from './admin/migrate.js';
export { reapStaleGrants, purgeReleasedGrants, REAP_DEFAULTS, type ReapOptions, type ReapResult, type PurgeOptions } from './admin/reap.js';
export { checkLockCounts, repairLockCounts, type CountCheckOptions, type CountCheck, type CountRepair, type CountDisagreement } from './admin/recount.js';
export { DEFAULTS, LIMITS, type LockManagerOptions, type AcquireOptions, type WithLockOptions, type IsolationLevel, type ProceduresMode } from './options.js';
export { OPERATE_DEFAULTS, type ListOptions, type HistoryOptions, type ForceReleaseOptions, type LockLostHandler, type LockLostInfo } from './options.js';
export type { ListedGrant, GrantHistoryEntry, LockStats } from './sql/operate.js';
export { MAX_RESOURCE_ID_BYTES } from './lock/resource-id.js';
export type { LockState, Holder } from './sql/inspect.js';
export type { ReapedGrant } from './sql/reap.js';
export type { LockMode, ReleasedBy } from './types.js';
export { isConflict } from './sql/connection.js';
export { RELEASE_SQL, type ReleaseParams } from './sql/release.js';
export { CHANNELS, type AcquireContext, type FenceContext, type ReleaseContext, type ReapContext, type LostMessage } from './observability/tracing.js';
export {
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
} from './errors.js';
export { PrivilegeError } from './errors.js';
