export { createLockManager, LockManager, type LockedWork } from './manager.js';
export { Grant } from './grant.js';
export { migrate, MIGRATION_TABLE, type MigrateOptions } from './migrate.js';
export { reapStaleGrants, purgeReleasedGrants, REAP_DEFAULTS, type ReapOptions, type ReapResult, type PurgeOptions } from './reaper.js';
export { DEFAULTS, type LockManagerOptions, type AcquireOptions, type WithLockOptions, type IsolationLevel } from './options.js';
export { MAX_RESOURCE_ID_BYTES } from './resource-id.js';
export type { LockState, Holder } from './sql/inspect.js';
export type { ReapedGrant } from './sql/reap.js';
export type { LockMode } from './types.js';
export {
  RwLockError,
  InvalidResourceIdError,
  InvalidOptionsError,
  LockTimeoutError,
  LockAbortedError,
  LockLostError,
  LockOutcomeUnknownError,
  SchemaMissingError,
  LockInvariantError,
} from './errors.js';
