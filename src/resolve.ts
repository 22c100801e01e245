import type { Knex } from 'knex';
import { setTimeout as sleep } from 'node:timers/promises';
import { withConnection, type RawConnection } from './connection.js';
import { threadIsQuiet, type LoggedGrant } from './sql/lookup.js';

const POLL_MS = 50;

/**
 * Learns the outcome of a command whose connection was lost in flight. Waits until the old server
 * thread is quiet on two reads a poll apart (a COMMIT can no longer be running), then asks
 * `lookup`. Retries while the server is unreachable (for example restarting). Returns undefined
 * when `timeoutMs` passes without an answer: the caller reports an indeterminate outcome.
 */
export async function resolveLost(
  db: Knex, threadId: number | null, timeoutMs: number, lookup: (conn: RawConnection) => Promise<LoggedGrant | null>,
): Promise<{ grant: LoggedGrant | null } | undefined> {
  const deadline = Date.now() + timeoutMs;
  let quietReads = threadId === null ? 2 : 0;
  for (;;) {
    try {
      const answer = await withConnection(db, async (conn) => {
        if (quietReads < 2 && threadId !== null) {
          quietReads = (await threadIsQuiet(conn, threadId)) ? quietReads + 1 : 0;
          if (quietReads < 2) return undefined;
        }
        return { grant: await lookup(conn) };
      });
      if (answer !== undefined) return answer;
    } catch {
      // The server may be restarting; keep trying until the deadline.
      quietReads = 0;
    }
    if (Date.now() >= deadline) return undefined;
    await sleep(POLL_MS);
  }
}
