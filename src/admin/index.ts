// `mysql-rwlock/admin`: the functions that take a knex and act on the schema or the tables as a
// whole (deploy, scheduled maintenance). What acts on grants through a lock manager (acquire,
// with*, inspect, list, history, stats, forceRelease, close) is a method of the manager instead.
export { migrate, type MigrateOptions, type MigrateResult } from './migrate.js';
export {
  reapStaleGrants,
  purgeReleasedGrants,
  type ReapOptions,
  type PurgeOptions,
  type PurgeResult,
} from './reap-and-purge.js';
export type { ReapResult, ReapedGrant } from '../types.js';
export {
  checkLockCounts,
  repairLockCounts,
  type CountCheckOptions,
  type CountCheck,
  type CountRepair,
  type CountDisagreement,
} from './count-check.js';
export { MigrationLockedError } from '../errors.js';
