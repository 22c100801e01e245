// Resource ids are checked and turned into their exact bytes before any statement: the rules
// themselves, without a server. test/validation.test.ts shows every entry point applies them and
// writes nothing.
// covers: src/lock/durable/resource-id.ts
import { describe, expect, it } from 'vitest';
import { InvalidResourceIdError } from '../../src/errors.js';
import { LIMITS } from '../../src/options.js';
import { resourceKey } from '../../src/lock/durable/resource-id.js';
import { BAD_RESOURCE_IDS } from '../support/bad-resource-ids.js';

describe('resourceKey', () => {
  it.each(BAD_RESOURCE_IDS)('refuses %s with InvalidResourceIdError', (_name, id, message) => {
    expect(() => resourceKey(id)).toThrow(InvalidResourceIdError);
    expect(() => resourceKey(id)).toThrow(message);
  });

  it('accepts exactly 255 bytes, and gives the UTF-8 bytes unchanged', () => {
    const id = 'é'.repeat(127) + 'x';
    expect(resourceKey(id)).toEqual(Buffer.from(id, 'utf8'));
    expect(resourceKey(id)).toHaveLength(LIMITS.maxResourceIdBytes);
  });

  it('folds nothing: ids that differ only in case or spaces give different bytes', () => {
    const ids = ['Loan-7', 'loan-7', 'loan-7 ', 'loan-7  ', ' loan-7', 'LOAN-7'];
    const keys = new Set(ids.map((id) => resourceKey(id).toString('hex')));
    expect(keys.size).toBe(ids.length);
  });
});
