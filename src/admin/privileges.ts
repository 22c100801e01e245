// The privileges each role of the library needs, as data: the one home of the grants. The CLI's
// `privileges` command prints them as GRANT statements, `npm run docs:privileges` writes the docs' table
// from them, and test/privileges.test.ts runs every operation of each role as a user that has
// exactly these grants and nothing else.
import { InvalidOptionsError } from '../errors.js';

/** The lock's tables. */
export type LockTable = 't_lock_log' | 't_read_write_lock' | 't_lock_release_note' | 't_lock_gate';

export type TablePrivilege = 'SELECT' | 'INSERT' | 'UPDATE' | 'DELETE';
export type DatabasePrivilege =
  'SELECT' | 'INSERT' | 'UPDATE' | 'CREATE' | 'ALTER' | 'INDEX' | 'EXECUTE' | 'CREATE ROUTINE' | 'ALTER ROUTINE';

/** Privileges on every object of the lock's database, or on one table of it. */
export type RoleGrant =
  | { on: 'database'; privileges: readonly DatabasePrivilege[] }
  | { on: LockTable; privileges: readonly TablePrivilege[] };

export interface Role {
  /** Who runs as this role, for the docs' table. */
  who: string;
  grants: readonly RoleGrant[];
}

/*
 * Derived from the statements each role's operations send (src/sql/, src/admin/, migrations/):
 * - acquire and sections: the resource's gate row taken with a locking read (FOR UPDATE, FOR SHARE,
 *   LOCK IN SHARE MODE; MySQL wants UPDATE or DELETE beside SELECT for one) and INSERTed on first
 *   use; the guarded UPDATE of the resource row, the first-use INSERT of it, the INSERT of the
 *   grant row (granted to the app itself, so that rwlock_acquire may run them with the caller's
 *   rights, SQL SECURITY INVOKER, and the plain-statement path needs them anyway); a lost
 *   reply is settled by INSERTing a withdrawn row under the token, then SELECTing it;
 * - a self-healing acquire: the reaper's locking read and UPDATE of the stale grant rows and the
 *   resource row, and the INSERT ... SELECT of their release notes;
 * - release, the fence, downgrade and upgrade: a multi-table UPDATE of the grant row and the
 *   resource row; extend: an UPDATE of the grant row; inspect and isLive: SELECTs;
 * - the reaper: SELECT ... FOR UPDATE and UPDATE of stale grant rows (MySQL wants UPDATE or DELETE
 *   beside SELECT for a locking read), an INSERT ... SELECT of their release notes, the UPDATE of
 *   the resource rows; purging DELETEs old grant rows and old notes, then the idle resource rows
 *   whose last grant it deleted and their gate rows (taken first with SELECT ... FOR UPDATE SKIP LOCKED);
 * - an operator's release: the release's UPDATE and an INSERT ... SELECT of its note; list,
 *   history, stats and the page only read, the notes included;
 * - the count repair: SELECT ... FOR UPDATE, UPDATE and (for a missing row) INSERT of resource rows;
 * - migrate: CREATE TABLE, ALTER TABLE ... ADD (ALTER, CREATE, INSERT, INDEX), CREATE and DROP
 *   PROCEDURE (CREATE ROUTINE, ALTER ROUTINE), its bookkeeping tables read and written.
 * EXECUTE is granted on the database rather than on the procedure: migrate() drops and recreates
 * procedures, and a grant on a dropped procedure goes with it.
 */
const APP_TABLES: readonly RoleGrant[] = [
  { on: 't_lock_log', privileges: ['SELECT', 'INSERT', 'UPDATE'] },
  { on: 't_read_write_lock', privileges: ['SELECT', 'INSERT', 'UPDATE'] },
  { on: 't_lock_gate', privileges: ['SELECT', 'INSERT', 'UPDATE'] },
  { on: 't_lock_release_note', privileges: ['INSERT'] },
];

export const ROLES = Object.freeze({
  app: {
    who: 'the application (acquire, `with*Lock`, the fence, release, `extend`, `downgrade`/`tryUpgrade`, `isLive`, `inspect`), stored procedures on',
    grants: [{ on: 'database', privileges: ['EXECUTE'] }, ...APP_TABLES],
  },
  'app-no-procedures': {
    who: 'the application without stored procedures (`procedures: false`)',
    grants: APP_TABLES,
  },
  reaper: {
    who: "the reaper (`mysql-rwlock-reaper`, `reapStaleGrants`, `purgeReleasedGrants`, the CLI's `reap` and `purge`); with `COUNT_REPAIR=1` it needs the `repairer`'s too",
    grants: [
      { on: 't_lock_log', privileges: ['SELECT', 'UPDATE', 'DELETE'] },
      { on: 't_read_write_lock', privileges: ['SELECT', 'UPDATE', 'DELETE'] },
      { on: 't_lock_release_note', privileges: ['SELECT', 'INSERT', 'DELETE'] },
      { on: 't_lock_gate', privileges: ['SELECT', 'DELETE'] },
    ],
  },
  operator: {
    who: "an operator (`list`, `history`, `stats`, `inspect`, `forceRelease`; the CLI's `status`, `ls`, `inspect`, `history`, `release`; the operator page)",
    grants: [
      { on: 't_lock_log', privileges: ['SELECT', 'UPDATE'] },
      { on: 't_read_write_lock', privileges: ['SELECT', 'UPDATE'] },
      { on: 't_lock_release_note', privileges: ['SELECT', 'INSERT'] },
    ],
  },
  checker: {
    who: "`checkLockCounts`, the CLI's `check`",
    grants: [
      { on: 't_lock_log', privileges: ['SELECT'] },
      { on: 't_read_write_lock', privileges: ['SELECT'] },
    ],
  },
  repairer: {
    who: "`repairLockCounts`, the CLI's `check --repair`",
    grants: [
      { on: 't_lock_log', privileges: ['SELECT'] },
      { on: 't_read_write_lock', privileges: ['SELECT', 'INSERT', 'UPDATE'] },
    ],
  },
  migrate: {
    who: "`migrate`, the CLI's `migrate`",
    grants: [
      {
        on: 'database',
        privileges: ['SELECT', 'INSERT', 'UPDATE', 'CREATE', 'ALTER', 'INDEX', 'CREATE ROUTINE', 'ALTER ROUTINE'],
      },
    ],
  },
} satisfies Record<string, Role>);

export type RoleName = keyof typeof ROLES;
export const ROLE_NAMES = Object.keys(ROLES) as RoleName[];

export function isRoleName(name: string): name is RoleName {
  return Object.hasOwn(ROLES, name);
}

/** A quoted string part of an account name: quotes doubled, backslashes escaped. */
const ACCOUNT_PART = String.raw`'(?:[^'\\]|''|\\.)*'|[A-Za-z0-9_.\-]+|%`;
const ACCOUNT = new RegExp(`^(${ACCOUNT_PART})@(${ACCOUNT_PART})$`);

/**
 * An account as GRANT takes it: `'name'@'host'` (single-quoted parts as MySQL writes them), or
 * `name@host` with plain names, quoted here. Throws InvalidOptionsError for anything else, so
 * nothing but an account reaches the printed statements.
 */
export function accountName(user: string): string {
  const m = ACCOUNT.exec(user);
  if (!m)
    throw new InvalidOptionsError(
      `user must be an account such as 'app'@'10.0.%' (or app@localhost), got ${JSON.stringify(user)}`,
    );
  const quote = (part: string): string => (part.startsWith("'") ? part : `'${part}'`);
  return `${quote(m[1]!)}@${quote(m[2]!)}`;
}

/** A database name as an identifier; at most 64 characters, as the servers allow. */
function databaseIdentifier(database: string): string {
  if (database.length === 0 || database.length > 64 || database.includes('\0') || database.endsWith(' ')) {
    throw new InvalidOptionsError(
      `database must be a database name (1 to 64 characters, not ending in a space), got ${JSON.stringify(database)}`,
    );
  }
  return `\`${database.replaceAll('`', '``')}\``;
}

/**
 * The GRANT statements that give `user` exactly what `role` needs on `database`, one per grant.
 * In a database-level grant `_` and `%` are wildcards, so they are escaped there: the grant names
 * this database and no other.
 */
export function grantStatements(role: RoleName, user: string, database: string): string[] {
  if (!isRoleName(role))
    throw new InvalidOptionsError(`role must be one of ${ROLE_NAMES.join(', ')}, got ${JSON.stringify(role)}`);
  const account = accountName(user);
  const db = databaseIdentifier(database);
  const pattern = db.replace(/[_%\\]/g, (c) => `\\${c}`);
  return ROLES[role].grants.map((g) => {
    const on = g.on === 'database' ? `${pattern}.*` : `${db}.\`${g.on}\``;
    return `GRANT ${g.privileges.join(', ')} ON ${on} TO ${account};`;
  });
}

/** The docs' table: one row per role, its grants in words. */
export function privilegesTable(): string {
  const rows = ROLE_NAMES.map((name) => {
    const grants = ROLES[name].grants
      .map(
        (g) =>
          `${g.privileges.map((p) => `\`${p}\``).join(', ')} on ${g.on === 'database' ? 'the database' : `\`${g.on}\``}`,
      )
      .join('; ');
    return `| \`${name}\` | ${ROLES[name].who} | ${grants} |`;
  });
  return ['| role | who | needs |', '|---|---|---|', ...rows].join('\n');
}
