import type { Knex } from 'knex';
import type { Grant } from '../../contract/api.js';
import type { IsolationLevel } from '../../options.js';
import type { LockMode } from '../../types.js';

/** A resource a section takes: the id as given, its bytes as stored, and the mode. */
export interface SectionTarget {
  resource: Buffer;
  resourceId: string;
  mode: LockMode;
}

export interface SectionOptions {
  waitMs: number;
  signal: AbortSignal | undefined;
  isolationLevel: IsolationLevel | undefined;
  /** Whether the section writes its history row (false: exclusion and the commit only). */
  history: boolean;
}

/** The work of a section: its transaction, and one grant per target, in the targets' order. */
export type SectionWork<T> = (trx: Knex.Transaction, grants: readonly Grant[]) => Promise<T>;
