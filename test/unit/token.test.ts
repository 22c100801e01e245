// Grant tokens (src/lock/durable/token.ts): the time prefix, and random bytes handed out once each
// from batches, across batch boundaries.
// covers: src/lock/durable/token.ts
import { describe, expect, it } from 'vitest';
import { newToken } from '../../src/lock/durable/token.js';

describe('newToken', () => {
  it('is 16 bytes: the milliseconds in 6, then 10 random bytes', () => {
    const before = Date.now();
    const token = newToken();
    expect(token.length).toBe(16);
    expect(token.readUIntBE(0, 6)).toBeGreaterThanOrEqual(before);
    expect(token.readUIntBE(0, 6)).toBeLessThanOrEqual(Date.now());
  });

  it('never hands out the same random bytes twice, over many batches', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 5_000; i++) seen.add(newToken().subarray(6).toString('hex'));
    expect(seen.size).toBe(5_000);
  });

  it('gives each token a buffer of its own: changing one changes no other', () => {
    const a = newToken();
    const b = newToken();
    const copy = Buffer.from(b);
    a.fill(0);
    expect(b.equals(copy)).toBe(true);
  });
});
