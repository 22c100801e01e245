import { randomBytes } from 'node:crypto';

/**
 * A grant token: 6 bytes of milliseconds then 10 random bytes. It is generated before the acquire
 * so that a commit whose reply was lost can be looked up; the time prefix keeps inserts into the
 * UNIQUE index at its right edge instead of scattered over it.
 */
export function newToken(): Buffer {
  const token = randomBytes(16);
  token.writeUIntBE(Date.now(), 0, 6);
  return token;
}
