// Statements that were never sent: the library could not get a connection for them. Unlike a lost
// reply, nothing can have happened on the server, so running them again is always safe.
import { setTimeout as sleep } from 'node:timers/promises';
import { DatabaseUnreachableError } from '../errors.js';
import { driverErrorOf } from './connection.js';
import { unreachablePauseMs, type RetryPolicy } from './retry.js';
import { testSwitches } from '../test-switches.js';

/** The server refused the connection: max_connections (1040) or the user's max_user_connections (1203). */
const REFUSED_AT_CONNECT = new Set([1040, 1203]);

/** True when `err` is a failure to get a connection, so the statement it was for was never sent. */
export function isNeverSent(err: unknown): boolean {
  // withConnection's own verdict on a connection that could not be had.
  if (err instanceof DatabaseUnreachableError) return true;
  // knex's pool gave up waiting for a free connection (acquireConnectionTimeout).
  if ((err as { name?: unknown } | null)?.name === 'KnexTimeoutError') return true;
  const errno = driverErrorOf(err)?.errno;
  return errno !== undefined && REFUSED_AT_CONNECT.has(errno);
}

/** The socket's refusals that can only come before anything is sent: nothing listens, no route, no such host. */
const REFUSED_CODES = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/**
 * isNeverSent, and also a connect refused as the driver reports it when the statement went through
 * knex's query builder (not withConnection, which types it first): `migrate()`'s DDL.
 */
export function isRefusedAtConnect(err: unknown): boolean {
  if (isNeverSent(err)) return true;
  const code = driverErrorOf(err)?.code ?? (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && REFUSED_CODES.has(code);
}

/**
 * Runs `send` (which gets a connection and sends the library's statement on it) again while it
 * fails for want of a connection, pausing a little longer each time, for up to the policy's
 * `resolveTimeoutMs`; then DatabaseUnreachableError. Any other failure is thrown as it is.
 */
export async function whileUnreachable<T>(
  policy: RetryPolicy,
  what: string,
  grantId: number | null,
  send: () => Promise<T>,
): Promise<T> {
  const deadline = performance.now() + policy.resolveTimeoutMs;
  for (let n = 0; ; n++) {
    try {
      return await send();
    } catch (err) {
      if (!isNeverSent(err)) throw err;
      const left = deadline - performance.now();
      if (left <= 0 || !testSwitches.unreachable.retry) {
        const cause = err instanceof DatabaseUnreachableError ? err.cause : err;
        const consequence =
          grantId === null
            ? 'no statement was sent, so nothing changed'
            : `nothing was sent: grant ${grantId} stays live until it is released or reaped`;
        throw new DatabaseUnreachableError(what, cause, consequence, grantId);
      }
      await sleep(Math.min(left, unreachablePauseMs(n)));
    }
  }
}
