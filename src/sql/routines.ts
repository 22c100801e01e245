import { FENCE_COMMIT_ROUTINE } from './routines-fence.js';
import { ACQUIRE, ACQUIRE_GROUP, ACQUIRE_PERMIT } from './routines-acquire.js';
import {
  SECTION_BEGIN_BARE_ROUTINE,
  SECTION_BEGIN_ONE_ROUTINE,
  SECTION_BEGIN_ROUTINE,
  SECTION_COMMIT_BARE_ROUTINE,
  SECTION_COMMIT_ONE_ROUTINE,
  SECTION_COMMIT_ROUTINE,
  SECTION_TAKE_ROUTINE,
} from './routines-section.js';

/**
 * Every stored routine the current schema has, by name, as built from the decision's pieces
 * (src/sql/decision.ts): what migrate() installs and checks a database against. The newest frozen
 * migration text of each routine must be exactly this (test/unit/migration-texts.test.ts); a change
 * here is released by a new migration (`npm run migration:new -- <name>`).
 */
export const CURRENT_ROUTINES: Readonly<Record<string, string>> = {
  rwlock_acquire: ACQUIRE,
  rwlock_section_take: SECTION_TAKE_ROUTINE,
  rwlock_section_commit: SECTION_COMMIT_ROUTINE,
  rwlock_acquire_permit: ACQUIRE_PERMIT,
  rwlock_acquire_group: ACQUIRE_GROUP,
  rwlock_section_begin: SECTION_BEGIN_ROUTINE,
  rwlock_section_begin_one: SECTION_BEGIN_ONE_ROUTINE,
  rwlock_section_commit_one: SECTION_COMMIT_ONE_ROUTINE,
  rwlock_section_begin_bare: SECTION_BEGIN_BARE_ROUTINE,
  rwlock_section_commit_bare: SECTION_COMMIT_BARE_ROUTINE,
  rwlock_fence_commit: FENCE_COMMIT_ROUTINE,
};
