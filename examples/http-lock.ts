// What Express and Fastify routes share: an AbortSignal for the client's disconnect, and one mapping
// of errors to HTTP responses.
import type { ServerResponse } from 'node:http';
import { LockLostError, LockTimeoutError } from 'mysql-rwlock';

/** Aborted when the client goes away before the response is complete, so a waiting acquire stops. */
export function disconnectSignal(res: ServerResponse): AbortSignal {
  const controller = new AbortController();
  const onClose = (): void => {
    if (!res.writableFinished) controller.abort(new Error('the client disconnected'));
  };
  if (res.socket?.destroyed) onClose();
  else res.once('close', onClose);
  return controller.signal;
}

export interface ErrorResponse {
  status: number;
  headers: Record<string, string>;
  body: { error: string };
}

/**
 * 423 Locked when the lock stayed busy for `waitMs` (retry later; nothing was written), 409 when the
 * grant was released by someone else before the commit (rolled back; nothing was written), the 4xx
 * of a client error the framework raised (a malformed body), and 500 with no detail for anything else.
 */
export function errorResponse(err: unknown): ErrorResponse {
  if (err instanceof LockTimeoutError) {
    const seconds = Math.max(1, Math.ceil(err.waitMs / 1000));
    return { status: 423, headers: { 'retry-after': String(seconds) }, body: { error: 'busy: try again later' } };
  }
  if (err instanceof LockLostError) {
    return { status: 409, headers: {}, body: { error: 'conflict: nothing was written, try again' } };
  }
  const status = (err as { statusCode?: unknown } | null)?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return { status, headers: {}, body: { error: 'bad request' } };
  }
  return { status: 500, headers: {}, body: { error: 'internal error' } };
}
