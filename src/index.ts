// `mysql-rwlock`: what an application uses at run time. Functions of a knex that act on the schema
// or the tables as a whole are in `mysql-rwlock/admin`; the tracing channels in
// `mysql-rwlock/tracing`; metrics in `mysql-rwlock/prometheus`. docs/api.md and the pages it links to describe every export.
export { createLockManager, type LockManager } from './lock/manager/manager.js';
export type { Grant, FenceExecutor, LockedWork, LockGroup } from './contract/api.js';
export {
  DEFAULTS,
  LIMITS,
  type LockManagerOptions,
  type AcquireOptions,
  type WithLockOptions,
  type IsolationLevel,
  type ProceduresMode,
} from './options.js';
export type { ListOptions, HistoryOptions, ForceReleaseOptions } from './options.js';
export type { ListedGrant, GrantHistoryEntry, LockStats } from './sql/operate.js';
export type { LockState, Holder } from './sql/inspect.js';
export type { LockMode, ReleasedBy, LockLostInfo } from './types.js';
export { isConflict } from './sql/connection.js';
// The leader's callback, options and leader() reply stay unexported, as the permit calls' options do.
export type { Campaign } from './lock/leader/campaign.js';
export type { Term } from './lock/leader/term.js';
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
  DatabaseUnreachableError,
  TransactionConflictError,
  LockUpgradeError,
  PoolTooSmallError,
  ManagerClosedError,
  PrivilegeError,
  UnsupportedSettingError,
  ResourceKindError,
  PermitLimitError,
  LeadershipError,
} from './errors.js';
