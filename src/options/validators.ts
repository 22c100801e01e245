// The checks of one value each (an options object, an integer, a knex, a text...), shared by every
// call's resolver and by the reaper job, the CLI and the operator page: each refuses with
// InvalidOptionsError, quoting what it got.
import type { Knex } from 'knex';
import { InvalidOptionsError } from '../errors.js';
import { DEFAULTS, LIMITS } from './defaults.js';
import type { ProceduresMode } from './option-types.js';

/**
 * The options argument of `what`: undefined becomes {}, anything but a plain object is refused,
 * and so is any key not in `known` (a misspelt option would otherwise be ignored silently). The
 * library's one rule for absent options: an option left out, or set to `undefined`, takes its
 * default; `null` is refused for every option, so that it never means "default" for one option and
 * an error for another.
 */
export function optionsObject(what: string, input: unknown, known: readonly string[]): Record<string, unknown> {
  if (input === undefined) return {};
  if (typeof input !== 'object' || input === null || Array.isArray(input))
    throw new InvalidOptionsError(`options of ${what} must be an object`);
  for (const [key, value] of Object.entries(input)) {
    if (!known.includes(key)) {
      throw new InvalidOptionsError(`${key}: unknown option of ${what} (known: ${known.join(', ')})`);
    }
    if (value === null)
      throw new InvalidOptionsError(`${key} must not be null, got null: leave it out (or undefined) for its default`);
  }
  return input as Record<string, unknown>;
}

export function integerOption(name: string, value: unknown, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidOptionsError(`${name} must be an integer from ${min} to ${max}, got ${describe(value)}`);
  }
  return value;
}

/** A value as an error message quotes it: a number, a text (cut at 40 units), else its type. */
export function describe(value: unknown): string {
  if (typeof value === 'number') return String(value);
  if (typeof value === 'string')
    return value.length > 40
      ? `${JSON.stringify(value.slice(0, 40))}… (${value.length} UTF-16 units)`
      : JSON.stringify(value);
  return value === null ? 'null' : typeof value;
}

/**
 * The knex instance a function was given, checked: a knex instance whose client is mysql2. `name`
 * is how the caller passed it (`knex` in options, `db` as an argument).
 */
export function knexOption(name: string, value: unknown): Knex {
  const isKnex =
    typeof value === 'function' &&
    typeof (value as Partial<Knex>).client === 'object' &&
    (value as Partial<Knex>).client !== null;
  if (!isKnex) throw new InvalidOptionsError(`${name} must be a knex instance, got ${describe(value)}`);
  const driver = ((value as Knex).client as { config?: { client?: unknown } }).config?.client;
  if (driver !== 'mysql2')
    throw new InvalidOptionsError(`${name} must be a knex instance using the 'mysql2' client, got ${describe(driver)}`);
  return value as Knex;
}

/**
 * A stale cutoff, wherever one is given (`createLockManager`, `reapStaleGrants`, the metrics, the
 * operator page, `STALE_AFTER_MS` of the reaper job and the CLI): `DEFAULTS.staleAfterMs` when
 * absent, 1 ms to `LIMITS.maxRetentionMs`. `name` is how the caller gave it.
 */
export function staleAfterOption(value: unknown, name = 'staleAfterMs'): number {
  return integerOption(name, value ?? DEFAULTS.staleAfterMs, 1, LIMITS.maxRetentionMs);
}

/** `reapStaleGrants`' `batchSize` and the reaper job's `REAPER_BATCH_SIZE`: 1 to `LIMITS.maxReapBatch`. */
export function reapBatchOption(value: unknown, name = 'batchSize'): number {
  return integerOption(name, value ?? DEFAULTS.reap.batchSize, 1, LIMITS.maxReapBatch);
}

/**
 * `purgeReleasedGrants`' `retentionMs` (from 1 ms) and the reaper job's `RETENTION_MS` (from 0: no purge):
 * at most `LIMITS.maxRetentionMs`, `DEFAULTS.purge.retentionMs` when absent.
 */
export function retentionOption(value: unknown, name = 'retentionMs', zeroTurnsOff = false): number {
  return integerOption(name, value ?? DEFAULTS.purge.retentionMs, zeroTurnsOff ? 0 : 1, LIMITS.maxRetentionMs);
}

/**
 * A whole number from the environment, for a validator: undefined when unset or empty, the number
 * when it is digits, else the text as it is (which the validator refuses, quoting it).
 */
export function envNumber(env: NodeJS.ProcessEnv, name: string): unknown {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  return /^\d+$/.test(raw) ? Number(raw) : raw;
}

export function proceduresOption(value: unknown): ProceduresMode {
  if (value === undefined) return DEFAULTS.procedures;
  if (value === 'auto' || value === true || value === false) return value;
  throw new InvalidOptionsError(`procedures must be 'auto', true or false, got ${describe(value)}`);
}

/** Text an operator gives: well-formed, 1 to `max` characters (code points), as UTF-8. */
export function textOption(name: string, value: unknown, max: number): Buffer {
  const chars = typeof value === 'string' ? [...value].length : 0;
  if (typeof value !== 'string' || chars === 0 || chars > max || !value.isWellFormed()) {
    throw new InvalidOptionsError(`${name} must be well-formed text of 1 to ${max} characters, got ${describe(value)}`);
  }
  return Buffer.from(value, 'utf8');
}

export function booleanOption(name: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean')
    throw new InvalidOptionsError(`${name} must be true or false, got ${describe(value)}`);
  return value;
}
