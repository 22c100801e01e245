// The errors of the database a manager is set up on rather than of a lock's decision: its schema, its
// server's settings and role, the privileges of its user. `src/errors.ts` re-exports them.
import { RwLockError } from './error-base.js';

/** The lock tables or procedures are missing: run `migrate(db)` (or apply sql/schema.sql) first. */
export class SchemaMissingError extends RwLockError {
  constructor(cause: unknown) {
    super(
      'ERR_RWLOCK_SCHEMA_MISSING',
      'mysql-rwlock tables or procedures not found: run migrate(db) or apply sql/schema.sql',
      { cause },
    );
  }
}

/**
 * The server refused one of the lock's writes because it is read-only: `read_only` or
 * `super_read_only` (1290: a replica, or a primary that stepped down in a failover), or a read-only
 * session or transaction (1792). Nothing was changed. Connect to the writable primary (a pool may
 * still hold connections to a node that stopped being it).
 */
export class ServerReadOnlyError extends RwLockError {
  constructor(cause: unknown) {
    super(
      'ERR_RWLOCK_READ_ONLY',
      "the server refused the lock's write: it is read-only (a replica, a primary that stepped down, or a read-only session); nothing was changed: connect to the writable primary",
      { cause },
    );
  }
}

/**
 * A Galera node refused the lock's statement because it is not ready for clients (1047, "WSREP has
 * not yet prepared node for application use"): it is outside the cluster's primary component (cut
 * off from the majority) or still joining. Nothing was changed. Connect to a node of the primary
 * component, or try again once this one has rejoined.
 */
export class NodeNotReadyError extends RwLockError {
  constructor(cause: unknown) {
    super(
      'ERR_RWLOCK_NODE_NOT_READY',
      "the Galera node refused the lock's statement: it is not ready for clients (outside the primary component, or still joining); nothing was changed: connect to a node of the primary component",
      { cause },
    );
  }
}

/** Another migrate() held the migration lock for longer than `waitMs`, or a crashed one left it taken. */
export class MigrationLockedError extends RwLockError {
  constructor(message: string, cause?: unknown) {
    super('ERR_RWLOCK_MIGRATION_LOCKED', message, { cause });
  }
}

/**
 * The schema is not the one this version needs: its migrations stop short of what the lock's
 * statements depend on (an app upgraded without migrating, a database restored from before a
 * migration), or an object was changed by hand (a narrowed column, a procedure with another
 * signature). Nothing was changed. A SchemaMissingError, with its code and its fix: run migrate(db).
 */
export class SchemaOutdatedError extends SchemaMissingError {
  constructor(detail: string, cause?: unknown) {
    super(cause);
    this.message = `mysql-rwlock schema is not the one this version needs (${detail}): run migrate(db) or apply sql/schema.sql`;
  }
}

/**
 * The server refused one of the lock's statements, or the login, for lack of a privilege (on a
 * table, column, routine or the database, or a global one), or refused the account itself (a wrong
 * user, host or password, a locked account). The message starts with the server's, `denied`, which
 * names what was refused; `mysql-rwlock privileges --role ROLE` prints the GRANT statements each role
 * needs. The refused statement changed nothing.
 */
export class PrivilegeError extends RwLockError {
  readonly denied: string;
  /** The role whose grants the refused operation needs, when the library knows it. */
  readonly role: string | undefined;
  constructor(denied: string, cause: unknown, role?: string) {
    const roleFlag = role ?? 'ROLE';
    super(
      'ERR_RWLOCK_PRIVILEGE',
      `${denied}; a privilege the lock needs is missing, or the login was refused: \`mysql-rwlock privileges --role ${roleFlag} --user "'name'@'host'" --database DB\` ` +
        `prints the grants ${role === undefined ? 'a role needs (`mysql-rwlock privileges --help` lists the roles)' : `the ${role} role needs`}`,
      { cause },
    );
    this.denied = denied;
    this.role = role;
  }
}

/**
 * A server or session setting under which the lock cannot keep its contract, refused on the
 * library's first use of a connection that has it, before anything is written; `setting` names it
 * (e.g. `sql_mode=ORACLE`). The tolerated and refused settings: docs/operating.md.
 */
export class UnsupportedSettingError extends RwLockError {
  readonly setting: string;
  constructor(setting: string, why: string) {
    super('ERR_RWLOCK_UNSUPPORTED_SETTING', `the session runs with ${setting}, which mysql-rwlock refuses: ${why}`);
    this.setting = setting;
  }
}
