// The session settings the library's own statements need, whatever a DBA or the application gave
// the connection (init_connect, a pool's afterCreate, a user's or the server's defaults). Kept apart
// from connection.ts, which imports it: it sends its few statements itself.
import { UnsupportedSettingError } from '../errors.js';
import { testSwitches } from '../test-switches.js';

/** What this module needs of a pool connection (mysql2's callback API). */
interface SessionConnection {
  query(sql: string, values: unknown[], cb: (err: (Error & { errno?: number }) | null, rows: unknown) => void): void;
  destroy?(): void;
}

function send<T>(conn: SessionConnection, sql: string): Promise<T> {
  return new Promise((resolve, reject) => conn.query(sql, [], (err, rows) => (err ? reject(err) : resolve(rows as T))));
}

/**
 * What the library's statements need, and why:
 * - `autocommit` on: a release, an extension or a withdrawal is one statement that must be durable
 *   when it replies; under autocommit=0 it would sit in an open transaction until the pool closed
 *   the connection and rolled it back (and the acquire procedure's SET TRANSACTION would fail with
 *   1568 inside that transaction);
 * - an isolation of READ COMMITTED or stronger: under READ UNCOMMITTED a lookup sees another
 *   transaction's release before it commits (a holder would think its grant lost because a reap
 *   that then rolled back had touched it), and the count check sees half of an acquire;
 * - `sql_safe_updates` off: the reaper's and the purge's statements select their rows by index
 *   ranges the server's safe mode does not accept as keys.
 * Each is set for the library's work only, when the session differs, and put back after.
 */
export interface SessionNeeds {
  /** `SET SESSION …` that gives the library what it needs; null when the session already does. */
  readonly enter: string | null;
  /** `SET SESSION …` that puts back what the session had. */
  readonly leave: string | null;
  /** The settings that differed, for the report: e.g. `autocommit=0`. */
  readonly differs: readonly string[];
}

/**
 * MySQL 8+ and MariaDB 11.1+ name it transaction_isolation; MariaDB before 11.1 only tx_isolation.
 * Asked of each connection, not remembered for the process: one app may use servers of both kinds.
 */
type IsolationVariable = 'transaction_isolation' | 'tx_isolation';
const ER_UNKNOWN_SYSTEM_VARIABLE = 1193;

/** Sessions already read, by connection: settings a connection is given when it is made are read once. */
const known = new WeakMap<object, Promise<SessionNeeds>>();

async function readSession(conn: SessionConnection): Promise<SessionNeeds> {
  let row: { ac: number | string; su: number | string; iso: string; mode: string } | undefined;
  let isolationVariable: IsolationVariable = 'transaction_isolation';
  for (;;) {
    try {
      [row] = await send<Array<typeof row>>(
        conn,
        `SELECT @@SESSION.autocommit AS ac, @@SESSION.sql_safe_updates AS su, @@SESSION.${isolationVariable} AS iso, @@SESSION.sql_mode AS mode`,
      );
      break;
    } catch (err) {
      if ((err as { errno?: number }).errno !== ER_UNKNOWN_SYSTEM_VARIABLE || isolationVariable === 'tx_isolation')
        throw err;
      isolationVariable = 'tx_isolation';
    }
  }
  // MariaDB's Oracle mode reads BEGIN as the start of a block: knex cannot open the transaction a
  // with*Lock call or a section runs in (1064).
  if (
    testSwitches.session.guard &&
    String(row?.mode ?? '')
      .split(',')
      .includes('ORACLE')
  )
    throw new UnsupportedSettingError(
      'sql_mode=ORACLE',
      "knex's transactions cannot start under it (BEGIN is a block there)",
    );
  const enter: string[] = [];
  const leave: string[] = [];
  const differs: string[] = [];
  // autocommit first: switching it on commits a transaction the session had open, as knex's own
  // BEGIN would, so the isolation is then set outside any transaction.
  if (Number(row?.ac) !== 1) {
    enter.push('autocommit = 1');
    leave.push('autocommit = 0');
    differs.push('autocommit=0');
  }
  const iso = String(row?.iso ?? '').toUpperCase();
  if (iso === 'READ-UNCOMMITTED') {
    enter.push(`${isolationVariable} = 'READ-COMMITTED'`);
    leave.push(`${isolationVariable} = 'READ-UNCOMMITTED'`);
    differs.push(`${isolationVariable}=READ-UNCOMMITTED`);
  }
  if (Number(row?.su) === 1) {
    enter.push('sql_safe_updates = 0');
    leave.push('sql_safe_updates = 1');
    differs.push('sql_safe_updates=1');
  }
  return {
    enter: enter.length > 0 ? `SET SESSION ${enter.join(', ')}` : null,
    leave: leave.length > 0 ? `SET SESSION ${leave.join(', ')}` : null,
    differs,
  };
}

/**
 * What `conn`'s session needs changed for the library: read on the library's first use of the
 * connection (one round trip), then remembered for as long as the pool keeps it.
 */
export function sessionNeeds(conn: SessionConnection): Promise<SessionNeeds> {
  let needs = known.get(conn);
  if (needs === undefined) {
    needs = readSession(conn);
    known.set(conn, needs);
    // A failed read (a connection dying) is read again on the next use.
    needs.catch(() => known.delete(conn));
  }
  return needs;
}

/**
 * Runs the library's `work` on `conn` in the session it needs (see SessionNeeds), and gives the
 * connection back to the pool with the settings it came with. A connection whose settings cannot be
 * put back is destroyed rather than handed to the application changed.
 */
export async function inLibrarySession<C extends SessionConnection, T>(
  conn: C,
  work: (conn: C) => Promise<T>,
): Promise<T> {
  if (!testSwitches.session.guard) return work(conn);
  const needs = await sessionNeeds(conn);
  if (needs.enter === null) return work(conn);
  await send(conn, needs.enter);
  try {
    return await work(conn);
  } finally {
    await send(conn, needs.leave!).catch(() => conn.destroy?.());
  }
}

/** SERVER_STATUS_IN_TRANS in an OK packet's status flags: the session has a transaction open. */
const SERVER_STATUS_IN_TRANS = 0x0001;

/**
 * For a statement that must be its own transaction: when its reply says it ran inside an open one
 * (the session's autocommit was switched off after the library first read it), commits it, so
 * what the statement changed is durable before the library reports it, and has the session read
 * again on its next use.
 */
export async function commitIfLeftOpen(conn: SessionConnection, reply: { serverStatus?: number }): Promise<void> {
  if (!testSwitches.session.guard || ((reply.serverStatus ?? 0) & SERVER_STATUS_IN_TRANS) === 0) return;
  known.delete(conn);
  await send(conn, 'COMMIT');
}
