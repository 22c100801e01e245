import type { Knex } from 'knex';
import { CLIENT_NEEDS, MIGRATION_TABLE, MIGRATIONS } from '../../migrations/index.js';
import { DatabaseUnreachableError, SchemaOutdatedError } from '../errors.js';
import { errnoOf, query, withConnection, type ConnectionWait } from './connection.js';

const NEEDED = MIGRATIONS.slice(0, MIGRATIONS.findIndex((m) => m.name === CLIENT_NEEDS) + 1).map((m) => m.name);
const ER_NO_SUCH_TABLE = 1146;
const ER_TABLEACCESS_DENIED = 1142;

/** Databases (by knex instance) found recent enough: checked once, then never again. */
const checked = new WeakSet<Knex>();

/**
 * Refuses, with SchemaOutdatedError, a database whose migrations stop short of `CLIENT_NEEDS`:
 * under an older schema the lock would misbehave (version 1's acquire refuses readers that should
 * be granted) rather than fail. One query of a few rows, on the first acquire through a knex
 * instance; a failed check is made again on the next acquire, so a migrate() run meanwhile counts.
 *
 * It can only tell where migrate() keeps its bookkeeping and this user may read it: a schema
 * applied from sql/schema.sql has none, and a user without SELECT on `rwlock_migrations` cannot
 * see it. Both are let through (missing tables still give SchemaMissingError). `wait` bounds its
 * wait for a pool connection as the acquire's own (a wait that ended is asked again next time).
 */
export async function checkSchemaVersion(db: Knex, wait: ConnectionWait = {}): Promise<void> {
  if (checked.has(db)) return;
  const done = await withConnection(
    db,
    (conn) => query<Array<{ name: string }>>(conn, `SELECT name FROM ${MIGRATION_TABLE}`),
    wait,
  ).then(
    (rows) => new Set(rows.map((r) => String(r.name))),
    (err: unknown) => {
      // No connection could be had: nothing the acquire would send could be sent either.
      if (err instanceof DatabaseUnreachableError) throw err;
      // query() wraps a missing table in SchemaMissingError: the server's number is its cause.
      const errno = errnoOf(err) ?? errnoOf((err as { cause?: unknown } | null)?.cause);
      return errno === ER_NO_SUCH_TABLE || errno === ER_TABLEACCESS_DENIED
        ? ('cannot tell' as const)
        : ('ask again' as const);
    },
  );
  // Anything else (a lost connection, a server restarting) is the acquire's to meet and handle:
  // it runs under the retry policy, this check does not. Asked again on the next acquire.
  if (done === 'ask again') return;
  if (done !== 'cannot tell') {
    const missing = NEEDED.filter((name) => !done.has(name));
    if (missing.length > 0) throw new SchemaOutdatedError(`migrations not applied: ${missing.join(', ')}`);
  }
  checked.add(db);
}
