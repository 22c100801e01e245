// `mysql-rwlock privileges` (alias `grants`): the GRANT statements a role needs, for a DBA to apply. Needs no database
// connection: it prints what src/admin/privileges.ts holds.
import { grantStatements, isRoleName, ROLE_NAMES, ROLES } from '../admin/privileges.js';
import { EXIT, UsageError, type Command } from './command.js';
import { json } from './format.js';

/** The database a URL names (its path, percent-decoded), or undefined when it names none or is no URL. */
function databaseOfUrl(raw: string | undefined): string | undefined {
  if (!raw) return undefined;
  try {
    const name = decodeURIComponent(new URL(raw).pathname.replace(/^\//, ''));
    return name === '' ? undefined : name;
  } catch {
    return undefined; // the URL itself is never echoed: it may hold a password
  }
}

export const PRIVILEGES_COMMAND: Command = {
  name: 'privileges',
  aliases: ['grants'],
  summary: 'print the GRANT statements a role needs (no database connection; alias: grants)',
  args: [],
  options: {
    role: { type: 'string', value: 'ROLE', help: `one of ${ROLE_NAMES.join(', ')}` },
    user: { type: 'string', value: "'NAME'@'HOST'", help: "the account to grant to, e.g. \"'app'@'10.0.%'\"" },
    database: {
      type: 'string',
      value: 'DB',
      help: "the lock's database (default: the database of --url or MYSQL_URL)",
    },
  },
  details: [
    'Prints one GRANT statement per line, for `mysql` or a migration tool; nothing is sent to a server.',
    'Roles:',
    ...ROLE_NAMES.map((r) => `  ${r.padEnd(18)} ${ROLES[r].who.replaceAll('`', '')}`),
    'A statement refused for lack of one of these privileges fails with PrivilegeError (ERR_RWLOCK_PRIVILEGE).',
    'With --json: an array of the statements. Exit 2 without --role, --user or a database.',
  ].join('\n'),
  async run({ values, io, json: asJson }) {
    const role = values.role;
    if (typeof role !== 'string') throw new UsageError(`--role is required: one of ${ROLE_NAMES.join(', ')}`);
    if (!isRoleName(role))
      throw new UsageError(`--role must be one of ${ROLE_NAMES.join(', ')}, got ${JSON.stringify(role)}`);
    const user = values.user;
    if (typeof user !== 'string') throw new UsageError("--user is required, e.g. --user \"'app'@'10.0.%'\"");
    const database =
      typeof values.database === 'string'
        ? values.database
        : databaseOfUrl(typeof values.url === 'string' ? values.url : io.env.MYSQL_URL);
    if (database === undefined)
      throw new UsageError('--database is required when neither --url nor MYSQL_URL names a database');
    const statements = grantStatements(role, user, database);
    io.out(asJson ? json(statements) : statements.join('\n'));
    return EXIT.done;
  },
};
