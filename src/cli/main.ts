// `mysql-rwlock`: look at and fix lock state from a shell. A table of commands, each in a module of
// its group (commands-read.ts, commands-write.ts); node:util parseArgs, no framework.
import { hostname, userInfo } from 'node:os';
import { parseArgs } from 'node:util';
import knexFactory, { type Knex } from 'knex';
import { InvalidOptionsError, InvalidResourceIdError, SchemaMissingError } from '../errors.js';
import { createLockManager, type LockManager } from '../lock/manager/manager.js';
import { envNumber, LIMITS, staleAfterOption } from '../options.js';
import { connectionSecrets, parseConnectionUrl, type MysqlConnection } from '../sql/connection-url.js';
import {
  COMMON_OPTIONS,
  EXIT,
  UsageError,
  wholeNumber,
  type Command,
  type CommandContext,
  type Io,
} from './command.js';
import { READ_COMMANDS } from './commands-read.js';
import { WRITE_COMMANDS } from './commands-write.js';
import { DASHBOARD_COMMAND } from './dashboard.js';
import { cell } from './format.js';
import { PRIVILEGES_COMMAND } from './commands-privileges.js';
import { JOBS_COMMAND } from './commands-jobs.js';
import { LEADERS_COMMAND } from './commands-leaders.js';

export { EXIT } from './command.js';

/**
 * Every command, in the order --help lists them.
 * The jobs and leaders views (`jobs`, `leaders`) follow the read commands; the operator page
 * (`dashboard`, in its own module) comes after the write commands.
 */
export const COMMANDS: readonly Command[] = [
  ...READ_COMMANDS,
  JOBS_COMMAND,
  LEADERS_COMMAND,
  ...WRITE_COMMANDS,
  DASHBOARD_COMMAND,
  PRIVILEGES_COMMAND,
];

function usageOf(c: Command): string {
  const all = { ...c.options, ...COMMON_OPTIONS };
  const lines = Object.entries(all).map(([name, o]) => {
    const flag = `${o.short ? `-${o.short}, ` : '    '}--${name}${o.value ? ` ${o.value}` : ''}`;
    return `  ${flag.padEnd(26)} ${o.help}`;
  });
  return [
    `Usage: mysql-rwlock ${c.name}${c.args.length ? ` ${c.args.join(' ')}` : ''} [options]`,
    '',
    c.summary,
    ...(c.details ? ['', c.details] : []),
    '',
    'Options:',
    ...lines,
    '',
    EXIT_HELP,
  ].join('\n');
}

const EXIT_HELP = `Exit codes:
  0  done, also when there was nothing to list, reap or purge
  1  not found (inspect: a free resource; history: no grant; release: not live; leaders NAME: no term leads); check: disagreements remain
  2  bad usage: unknown command or flag, bad id, number or URL (nothing was changed)
  3  failed: database unreachable, schema missing, or the server refused`;

export function mainUsage(): string {
  return [
    'Usage: mysql-rwlock <command> [options]',
    '',
    'Look at and fix mysql-rwlock lock state. Connects to MYSQL_URL, or --url.',
    '',
    'Commands:',
    ...COMMANDS.map((c) => `  ${`${c.name}${c.args.length ? ` ${c.args.join(' ')}` : ''}`.padEnd(26)} ${c.summary}`),
    '',
    'mysql-rwlock <command> --help describes a command and its options.',
    '',
    EXIT_HELP,
  ].join('\n');
}

function operatorName(env: NodeJS.ProcessEnv): string {
  let user = env.USER ?? env.LOGNAME;
  try {
    user ??= userInfo().username;
  } catch {
    user ??= 'unknown';
  }
  return `cli:${user}@${hostname()}`.slice(0, LIMITS.maxOwnerChars);
}

/**
 * The reaper's cutoff when the shell has it (`STALE_AFTER_MS`, read and bounded as the reaper job
 * reads it), so that what `ls` and `status` call stale is what the reaper releases; else the default.
 */
function staleAfterFromEnv(env: NodeJS.ProcessEnv): number {
  return staleAfterOption(envNumber(env, 'STALE_AFTER_MS'), 'STALE_AFTER_MS');
}

/**
 * Runs one command line and resolves to its exit code. Nothing is printed that holds the
 * password: the URL is checked without echoing it, and any message is scrubbed of it. Messages
 * may quote a resource id: their control characters are escaped as a table's cells are.
 */
export async function main(argv: string[], io: Io): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    if (name === undefined) io.err(mainUsage());
    else io.out(mainUsage());
    return name === undefined ? EXIT.usage : EXIT.done;
  }
  const command = COMMANDS.find((c) => c.name === name || c.aliases?.includes(name));
  if (!command) {
    io.err(
      `mysql-rwlock: unknown command ${JSON.stringify(name)}; commands: ${COMMANDS.map((c) => c.name).join(', ')} (see mysql-rwlock --help)`,
    );
    return EXIT.usage;
  }
  let secrets: string[] = [];
  // A driver's message should never hold the password; this is a second guard. Shorter than 4
  // characters, a password would blank out ordinary text (every ':'), and is not looked for.
  const scrub = (text: string): string =>
    secrets.filter((s) => s.length >= 4).reduce((t, secret) => t.split(secret).join('***'), text);
  let knex: Knex | undefined;
  try {
    const { values, repeated, positionals } = parseCommandLine(command, rest);
    if (values.help) {
      io.out(usageOf(command));
      return EXIT.done;
    }
    // An argument in brackets may be left out.
    const required = command.args.filter((a) => !a.startsWith('[')).length;
    if (positionals.length < required || positionals.length > command.args.length) {
      throw new UsageError(
        command.args.length === 0
          ? `takes no arguments, got ${JSON.stringify(positionals.join(' '))}`
          : positionals.length > command.args.length
            ? `takes ${command.args.join(' ')}, got ${JSON.stringify(positionals.join(' '))}`
            : `needs ${command.args.join(' ')}`,
      );
    }
    const fromFlag = typeof values.url === 'string';
    const raw = fromFlag ? (values.url as string) : io.env.MYSQL_URL;
    secrets = connectionSecrets(raw);
    let conn: MysqlConnection | undefined;
    const connection = (): MysqlConnection => {
      if (conn) return conn;
      try {
        conn = parseConnectionUrl(raw, fromFlag ? '--url' : 'MYSQL_URL').connection;
      } catch (err) {
        throw new UsageError(fromFlag ? (err as Error).message : `${(err as Error).message} (or pass --url)`);
      }
      return conn;
    };
    const staleAfterMs = wholeNumber('--stale-after', values['stale-after']) ?? staleAfterFromEnv(io.env);
    const operator = operatorName(io.env);
    let locks: LockManager | undefined;
    const db = (): Knex => {
      // knex's own warnings would print the connection settings' context; the CLI reports errors itself.
      knex ??= knexFactory({
        client: 'mysql2',
        connection: connection(),
        pool: { min: 0, max: 2 },
        log: { warn() {}, error() {}, deprecate() {}, debug() {} },
      });
      return knex;
    };
    const ctx: CommandContext = {
      values,
      repeated,
      positionals,
      json: values.json === true,
      io,
      operator,
      db,
      staleAfterMs,
      locks: () => (locks ??= createLockManager({ knex: db(), owner: operator, staleAfterMs })),
    };
    if (command !== PRIVILEGES_COMMAND) connection(); // a bad URL is bad usage, found before anything else happens
    return await command.run(ctx);
  } catch (err) {
    return reportError(command, err, scrub, io);
  } finally {
    await knex?.destroy();
  }
}

/** The command's flags and arguments from `args`, as parseArgs reads them: what it refuses is a UsageError. */
function parseCommandLine(command: Command, args: string[]) {
  const options = Object.fromEntries(
    Object.entries({ ...command.options, ...COMMON_OPTIONS }).map(([k, o]) => [
      k,
      { type: o.type, ...(o.short ? { short: o.short } : {}), ...(o.multiple ? { multiple: true } : {}) },
    ]),
  );
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const values = parsed.values as Record<string, string | boolean | undefined>;
  const repeated = Object.fromEntries(
    Object.entries({ ...command.options, ...COMMON_OPTIONS })
      .filter(([, o]) => o.multiple)
      .map(([k]) => [k, (parsed.values[k] ?? []) as string[]]),
  );
  return { values, repeated, positionals: parsed.positionals };
}

/** A command's failure printed on stderr, scrubbed of the password; its exit code. */
function reportError(command: Command, err: unknown, scrub: (text: string) => string, io: Io): number {
  if (err instanceof UsageError || err instanceof InvalidOptionsError || err instanceof InvalidResourceIdError) {
    io.err(
      cell(scrub(`mysql-rwlock ${command.name}: ${(err as Error).message}; see mysql-rwlock ${command.name} --help`)),
    );
    return EXIT.usage;
  }
  const e = err as Error & { code?: string };
  // The library's fix names its function; a shell user's is this command's own.
  const message =
    err instanceof SchemaMissingError
      ? e.message.replace(/run migrate\(db\)/, 'run `mysql-rwlock migrate`')
      : e.message;
  io.err(
    cell(scrub(`mysql-rwlock ${command.name}: ${message}${e.code && !message.includes(e.code) ? ` (${e.code})` : ''}`)),
  );
  return EXIT.failed;
}
