import { firstRow, query, type RawConnection } from './connection.js';

/** A read or write target of a group's one-call acquire, in the order it is taken. */
export interface GroupAcquireTarget {
  mode: 'read' | 'write';
  resource: Buffer;
}

/**
 * What the group's one call answers: every grant id in the targets' order, or which target
 * refused the group and why (`busy`: its gate was held by another transaction; `held`: its guard
 * refused it). Refused, nothing of the group was written.
 */
export type GroupAcquireReply = { granted: true; ids: number[] } | { granted: false; at: number; why: 'busy' | 'held' };

/**
 * Every target in one acquire transaction: one round trip, one commit (procedure
 * `rwlock_acquire_group`, migration 011), all or nothing. The targets travel packed as a section's
 * take sends them: a length byte and the id's bytes each, a letter each for the mode, the 16-byte
 * tokens concatenated in the same order; the owner as UTF-8 bytes converted on the server.
 */
export async function callAcquireGroup(
  conn: RawConnection,
  targets: readonly GroupAcquireTarget[],
  owner: Buffer,
  tokens: readonly Buffer[],
): Promise<GroupAcquireReply> {
  const packed = Buffer.concat(targets.flatMap((t) => [Buffer.from([t.resource.length]), t.resource]));
  const kinds = Buffer.from(targets.map((t) => (t.mode === 'write' ? 'w' : 'r')).join(''), 'latin1');
  // Bytes converted on the server: the connection's character set plays no part.
  const result = await query(
    conn,
    'CALL rwlock_acquire_group(?, CONVERT(? USING ascii), CONVERT(? USING utf8mb4), ?)',
    [packed, kinds, owner, Buffer.concat(tokens)],
  );
  const row = firstRow<{ outcome: string; at: number | string | null; ids: string | null }>(
    result,
    'rwlock_acquire_group',
  );
  if (row.outcome === 'granted') return { granted: true, ids: (row.ids ?? '').split(',').map(Number) };
  return { granted: false, at: Number(row.at ?? 0), why: row.outcome === 'busy' ? 'busy' : 'held' };
}
