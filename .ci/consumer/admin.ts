// `import ... from 'mysql-rwlock/admin'` as an app writes it: every name the entry exports is imported
// and used (see index.ts beside this file for why and how to update it).
import type { Knex } from 'knex';
import { DEFAULTS, LIMITS } from 'mysql-rwlock';
import {
  migrate,
  type MigrateOptions,
  type MigrateResult,
  reapStaleGrants,
  purgeReleasedGrants,
  type ReapOptions,
  type PurgeOptions,
  type PurgeResult,
  type ReapResult,
  type ReapedGrant,
  checkLockCounts,
  repairLockCounts,
  type CountCheckOptions,
  type CountCheck,
  type CountRepair,
  type CountDisagreement,
  MigrationLockedError,
} from 'mysql-rwlock/admin';

export async function administer(db: Knex): Promise<void> {
  const migrateOptions: MigrateOptions = { waitMs: DEFAULTS.migrate.waitMs, procedures: DEFAULTS.migrate.procedures };
  let migrated: MigrateResult = { applied: [], repaired: [] };
  try {
    migrated = await migrate(db, migrateOptions);
  } catch (err) {
    if (!(err instanceof MigrationLockedError)) throw err;
    console.log(err.code, err.message);
  }
  const reapOptions: ReapOptions = {
    staleAfterMs: DEFAULTS.staleAfterMs,
    batchSize: LIMITS.maxReapBatch,
    lockWaitTimeoutSec: DEFAULTS.reap.lockWaitTimeoutSec,
  };
  const reaped: ReapResult = await reapStaleGrants(db, reapOptions);
  const reapedGrants: ReapedGrant[] = reaped.grants;
  const purge: PurgeOptions = { retentionMs: DEFAULTS.purge.retentionMs, batchSize: DEFAULTS.purge.batchSize };
  const purged: PurgeResult = await purgeReleasedGrants(db, purge);
  const countOptions: CountCheckOptions = { limit: DEFAULTS.checkLockCounts.limit };
  const check: CountCheck = await checkLockCounts(db, countOptions);
  const disagreements: CountDisagreement[] = check.disagreements;
  const repair: CountRepair = await repairLockCounts(db, countOptions);
  console.log(
    migrated.applied,
    migrated.repaired,
    reapedGrants.length,
    purged.purged,
    disagreements.length,
    repair.repaired,
    repair.more,
  );
}
