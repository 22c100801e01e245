// Interleavings for the count repair: a connection that runs a step of the caller's right after the
// repair has counted the live grants, and the repair done in the wrong order (the negative control).
import { query, type RawConnection } from '../../src/sql/connection.js';
import { COUNT_LIVE, LOCK_RESOURCE_ROW, SET_COUNTS } from '../../src/sql/recount.js';

/** `conn`, except that once the live grants are counted, `step` runs before the result comes back. */
export function afterCount(conn: RawConnection, step: () => Promise<void>): RawConnection {
  return {
    threadId: conn.threadId,
    query(sql, values, cb) {
      conn.query(sql, values, (err, rows) => {
        if (err || sql !== COUNT_LIVE) return cb(err, rows);
        step().then(
          () => cb(null, rows),
          (e: unknown) => cb(e as Error, null),
        );
      });
    },
  };
}

/** The negative control: counts, then locks the resource row and writes what it counted. */
export async function countThenLock(conn: RawConnection, resource: Buffer): Promise<void> {
  await query(conn, 'SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
  await query(conn, 'START TRANSACTION');
  const [live] = await query<Array<{ w: number | string; r: number | string }>>(conn, COUNT_LIVE, [resource]);
  await query(conn, LOCK_RESOURCE_ROW, [resource]);
  await query(conn, SET_COUNTS, [Number(live!.w), Number(live!.r), resource]);
  await query(conn, 'COMMIT');
}
