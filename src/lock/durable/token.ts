import { randomFillSync } from 'node:crypto';

/** The random bytes of a token. */
const RANDOM_BYTES = 10;
/** Tokens' random bytes drawn from the CSPRNG at once: one call per this many tokens, not one each. */
const BATCH = 256;
let pool = Buffer.alloc(0);
let used = 0;

/**
 * A grant token: 6 bytes of milliseconds then 10 random bytes. It is generated before the acquire
 * so that a commit whose reply was lost can be looked up; the time prefix keeps inserts into the
 * UNIQUE index at its right edge instead of scattered over it. The random bytes come from a batch
 * filled by the CSPRNG and handed out once each: a section or an acquire makes one or two, and a
 * call to the CSPRNG per token cost more than the rest of the token.
 */
export function newToken(): Buffer {
  if (used + RANDOM_BYTES > pool.length) {
    pool = randomFillSync(Buffer.allocUnsafe(BATCH * RANDOM_BYTES));
    used = 0;
  }
  const token = Buffer.allocUnsafe(6 + RANDOM_BYTES);
  token.writeUIntBE(Date.now(), 0, 6);
  pool.copy(token, 6, used, used + RANDOM_BYTES);
  used += RANDOM_BYTES;
  return token;
}
