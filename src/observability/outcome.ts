// How an acquire call ended, in the words the Prometheus metrics and the OpenTelemetry spans share.
import { LockAbortedError, LockTimeoutError } from '../errors.js';
import type { AcquireContext } from '../contract/channels.js';

/**
 * Outcome of an acquire call: granted, busy (one attempt found it held), timeout, aborted, error. The
 * `outcome` label of `mysql_rwlock_acquire_wait_seconds` and the `rwlock.outcome` of an acquire span.
 */
export type AcquireOutcome = 'granted' | 'busy' | 'timeout' | 'aborted' | 'error';

/** The outcome of a finished acquire call, from its context. */
export function acquireOutcome(c: AcquireContext): AcquireOutcome {
  if (c.error === undefined) return c.result ? 'granted' : 'busy';
  return c.error instanceof LockTimeoutError ? 'timeout' : c.error instanceof LockAbortedError ? 'aborted' : 'error';
}
