import { InvalidResourceIdError } from '../../errors.js';
import { LIMITS } from '../../options.js';

/**
 * Validates a resource id and returns its exact bytes. Ids are compared byte for byte:
 * 'Loan-1', 'loan-1' and 'loan-1 ' are three different locks. Nothing is trimmed or folded,
 * and an id the column could not hold whole is refused rather than truncated.
 */
export function resourceKey(id: unknown): Buffer {
  if (typeof id !== 'string') {
    throw new InvalidResourceIdError(`resource id must be a string, got ${id === null ? 'null' : typeof id}`);
  }
  if (id.length === 0) throw new InvalidResourceIdError('resource id must not be empty');
  if (!id.isWellFormed()) {
    // A lone surrogate would be encoded as U+FFFD and collide with other ids.
    throw new InvalidResourceIdError('resource id must be well-formed Unicode (it contains a lone surrogate)');
  }
  const bytes = Buffer.from(id, 'utf8');
  if (bytes.length > LIMITS.maxResourceIdBytes) {
    throw new InvalidResourceIdError(
      `resource id is ${bytes.length} bytes in UTF-8; at most ${LIMITS.maxResourceIdBytes} are allowed`,
    );
  }
  return bytes;
}
