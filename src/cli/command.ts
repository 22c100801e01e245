// What every command of the CLI shares: the exit codes, the command shape, common options.
import type { Knex } from 'knex';
import type { LockManager } from '../lock/manager/manager.js';
import { DEFAULTS } from '../options.js';

/** Exit codes; the same for every command. */
export const EXIT = Object.freeze({
  /** done, also when there was nothing to do or list (ls, reap, purge, migrate) */
  done: 0,
  /**
   * not found, where a script asks a yes-or-no question: inspect of a free resource, history of a
   * resource with no grant, release of a grant that is not live, check with disagreements left
   */
  nothing: 1,
  /** bad usage: unknown command or flag, a bad id, number or URL; nothing was changed */
  usage: 2,
  /** failed: the database could not be reached, the schema is missing, or the server refused */
  failed: 3,
});

export interface Io {
  out(text: string): void;
  err(text: string): void;
  env: NodeJS.ProcessEnv;
}

/** One option of a command: parseArgs' description plus what --help says of it. */
export interface OptionSpec {
  type: 'string' | 'boolean';
  short?: string;
  /** May be given more than once: the value is then an array of strings. */
  multiple?: boolean;
  /** Placeholder in --help, e.g. N or TEXT. */
  value?: string;
  help: string;
}

export interface CommandContext {
  values: Record<string, string | boolean | undefined>;
  /** The values of options that may be given more than once (`multiple`), in order; [] when not given. */
  repeated: Record<string, string[]>;
  positionals: string[];
  json: boolean;
  io: Io;
  /** Age from which a live grant is stale: --stale-after, else the reaper's STALE_AFTER_MS, else the default. */
  staleAfterMs: number;
  /** The lock manager on the database, created on first use, with `staleAfterMs`. */
  locks(): LockManager;
  db(): Knex;
  /** Who this CLI is, recorded with an operator release. */
  operator: string;
}

export interface Command {
  name: string;
  /** Other names the command answers to (an earlier name kept working); --help names the first. */
  aliases?: readonly string[];
  summary: string;
  /** Positional arguments, e.g. ['<grantId>']. */
  args: string[];
  options: Record<string, OptionSpec>;
  /** Extra --help text: output, exit codes that differ in meaning. */
  details?: string;
  run(ctx: CommandContext): Promise<number>;
}

/** Thrown for bad usage: exit 2 with the message and a pointer to --help. */
export class UsageError extends Error {}

export const COMMON_OPTIONS: Record<string, OptionSpec> = {
  url: { type: 'string', value: 'URL', help: 'mysql://user:password@host:3306/database (default: MYSQL_URL)' },
  json: { type: 'boolean', help: 'print machine-readable JSON instead of a table' },
  help: { type: 'boolean', short: 'h', help: 'print this help and exit' },
};

/** The option of the read commands that sets which grants count as stale. */
export const STALE_AFTER: Record<string, OptionSpec> = {
  'stale-after': {
    type: 'string',
    value: 'MS',
    help: `age after which a grant counts as stale (default: STALE_AFTER_MS as the reaper reads it, else ${DEFAULTS.staleAfterMs})`,
  },
};

/** A positive whole number from a flag or argument; anything else is bad usage. */
export function wholeNumber(name: string, raw: string | boolean | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (typeof raw !== 'string' || !/^\d{1,15}$/.test(raw))
    throw new UsageError(`${name} must be a whole number, got ${JSON.stringify(raw)}`);
  return Number(raw);
}
