import type { Knex } from 'knex';
import type { ResolvedManagerOptions } from '../../options.js';
import type { RetryPolicy } from '../../sql/retry.js';
import type { EnclosingFences } from './enclosing-fences.js';
import type { WaitQueues } from '../waiting/wait.js';
import type { SectionServer } from '../../sql/section.js';

/** What a lock manager shares with its grants and its acquire and fence machinery. */
export interface LockContext {
  readonly knex: Knex;
  readonly options: ResolvedManagerOptions;
  readonly policy: RetryPolicy;
  readonly queues: WaitQueues;
  /** The fenced operations enclosing the current async context. */
  readonly scopes: EnclosingFences;
  /** The owner as UTF-8, as the acquire sends it. */
  readonly ownerBytes: Buffer;
  /**
   * Whether acquires run as plain statements: set at start, or once 'auto' finds no procedure;
   * `perResourceGroups` once a durable group found no one-call acquire (migration 011).
   */
  readonly acquirePath: { statements: boolean; perResourceGroups?: boolean };
  /**
   * What one-commit sections need of the server, asked by the first section (see
   * `detectSectionServer`); `statements` once 'auto' found no section procedure (migration 009).
   */
  readonly sections: {
    server?: Promise<SectionServer>;
    statements?: boolean;
    beginApart?: boolean;
    /** No migration 013: one-resource sections take and commit through the packed routines. */
    onePacked?: boolean;
    /** No migration 014: sections without history take through statements. */
    bareStatements?: boolean;
  };
  /** `apart` once a fenced commit found no `rwlock_fence_commit` (migration 015): fence and COMMIT go apart. */
  readonly fences: { apart?: boolean };
}
