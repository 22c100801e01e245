// `import ... from 'mysql-rwlock/cron'` as an app writes it: every name the entry exports is imported
// and used (see index.ts beside this file for why and how to update it). node-cron comes with the
// package (the reaper job's scheduler), so its types resolve in the app as they do here.
import type { LockManager } from 'mysql-rwlock';
import {
  createRunCoordinator,
  fireResourceId,
  HASHED_KEY_MARK,
  type ExclusiveOptions,
  type ExclusiveResult,
  type RunCoordinatorOptions,
} from 'mysql-rwlock/cron';

declare const locks: LockManager;

const options: RunCoordinatorOptions = { prefix: 'cron:', lockAtLeastFor: 30_000 };
const coordinator = createRunCoordinator(locks, options);
export const answer: boolean | Promise<boolean> = coordinator.shouldRun('report:2026-11-27T03:00:00.000Z', 60_000);

const job = { lockAtMostFor: 600_000, lockAtLeastFor: 30_000 } satisfies ExclusiveOptions;
export async function nightly(): Promise<number> {
  const result: ExclusiveResult<number> = await locks.runExclusive('invoices:nightly', async () => 1, job);
  return result.ran ? result.value : 0;
}

// A fire's resource id: the prefix and node-cron's key, or its hash when that would be too long.
export const fireId: string = fireResourceId('cron:', `${'report'.repeat(60)}:2026-11-27T03:00:00.000Z`);
export const hashed: boolean = fireId.startsWith(`cron:${HASHED_KEY_MARK}`);
