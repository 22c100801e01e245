import { firstRow, query, type RawConnection, type SqlValue } from './connection.js';
import { LOCK_TYPE, type LockMode } from '../types.js';
import { DB_NOW } from './clock.js';
import {
  createGate,
  gateRead,
  LOCKING,
  logSection as logSectionRow,
  NO_WRITER_INTENT,
  READER_FREE,
  rowRead,
  sectionGuard,
  sectionReleased,
} from './decision.js';

/*
 * The statements of a one-commit section (see runSection in src/lock/section.ts). A section takes
 * the lock with the business transaction's first statements, on the resource's gate row and lock
 * row, and keeps it by their InnoDB locks until that transaction commits: the counts never change,
 * so a section that dies or is rolled back leaves nothing behind.
 */

/**
 * The gate (`t_lock_gate`, migration 008), taken first: shared by a reading section where shared
 * locks are certified, so reading sections (and durable readers' acquires) share it; exclusive
 * otherwise (a writing section, a reading section at SERIALIZABLE, and a reading section on a
 * cluster that does not certify shared locks). A durable writer's acquire takes it exclusively,
 * without waiting: so it is refused while a reading section runs, though a reading section never
 * locks the lock row. Each returns 1 row when taken, none when the gate row does not exist yet
 * (`CREATE_GATE`).
 */
export const GATE_TAKE: Readonly<Record<'shared' | 'exclusive', string>> = {
  shared: gateRead('1 AS taken', '?', LOCKING.shared),
  exclusive: gateRead('1 AS taken', '?', LOCKING.exclusive),
};

/**
 * How a section takes a resource's lock row, after the gates: `write` and `readExclusive` change
 * the row (an exclusive row lock); each changes 1 row when taken. The guards are the durable
 * acquire's: a writer needs no holder at all (and, like a durable writer, ignores the writer intent,
 * which holds back readers only); a reader needs no writer and no writer intent in force.
 */
export const TAKE: Readonly<Record<'write' | 'readExclusive', string>> = {
  write: sectionGuard('write', '?', ''),
  readExclusive: sectionGuard('read', '?', ''),
};

/**
 * A reading section's decision, under its shared gate: a plain read of the lock row, which locks
 * nothing, so a durable reader's acquire (an UPDATE of that row) is never held up by it. It must see
 * every writer that committed before the gate was granted: under READ COMMITTED each read takes a
 * fresh snapshot, and under REPEATABLE READ this is the transaction's first plain read (the section
 * reads only after every gate and row is taken), which takes its snapshot. Under SERIALIZABLE InnoDB
 * makes every read a shared-lock read, so a section asked for at that level takes the gate
 * exclusively instead (src/lock/section-take.ts).
 * `free` is 1 when no writer and no semaphore's permits hold and no writer intent is in force; no
 * row: never used.
 */
export const READ_DECISION = `SELECT ${READER_FREE} AS free
 FROM t_read_write_lock WHERE resource_id = ?`;

/**
 * Before migration 008, and the negative control of the mixed-mode tests: a reading section that
 * takes the lock row itself with a shared lock. A durable reader's acquire must then wait for (or,
 * without waiting, be refused by) every reading section.
 */
export const READ_LOCKING_ROW = `SELECT 1 AS taken FROM t_read_write_lock
 WHERE resource_id = ? AND w_count = 0 AND ${NO_WRITER_INTENT} ${LOCKING.shared}`;

/** After a refused take: whether the row exists at all (a resource never used has none). */
export const ROW_EXISTS = rowRead('1 AS found', '?', '');

/** First use of a resource by a section: a free row. IGNORE: nothing when another first user made it. */
export const CREATE_ROW = 'INSERT IGNORE INTO t_read_write_lock (resource_id) VALUES (?)';

/** First use of a resource's gate by a section. IGNORE: nothing when another first user made it. */
export const CREATE_GATE = createGate('?');

/**
 * The section's log row, marked `released_by = section` so that history tells it from a durable
 * grant (which ends as `holder`, `reaper` or `operator`). Written right after the take, so its id
 * (the fencing token) is known to the work, in status `sectionInProgress` with `released_at` NULL;
 * `SET_RELEASED` (or `rwlock_section_commit`) makes it released now, just before the commit, so
 * history gives the section's true span. Nobody but a READ UNCOMMITTED reader (the operator's view
 * of sections in progress, `SECTIONS_IN_PROGRESS`) ever sees it in progress.
 */
const LOG_SECTION = logSectionRow({ resource: '?', type: '?', owner: 'CONVERT(? USING utf8mb4)', token: '?' }, '');

/** The section's end, just before its COMMIT and in its transaction: its log rows released now. */
export const SET_RELEASED = sectionReleased(DB_NOW, 'id IN (?)', '');

/**
 * How `rwlock_section_take` (migration 009) takes one target: `w` a writer (exclusive gate, guarded
 * UPDATE), `x` a reader where shared locks are not certified (exclusive gate, a reader's guarded
 * UPDATE), `s` a reader (shared gate, plain read of the lock row), `e` a reader at SERIALIZABLE
 * (exclusive gate, the read InnoDB makes a shared-lock one).
 */
export type TakeLetter = 'w' | 'x' | 's' | 'e';

/** What `rwlock_section_take` answered: see migration 009. `at` indexes the targets; `ids` their log rows. */
export interface TakeReply {
  outcome: 'taken' | 'gate' | 'row' | 'refused' | 'intent';
  at: number;
  ids: number[];
}

/** The take's call after the transaction's BEGIN (`rwlock_section_take`, migration 009). */
export const SECTION_TAKE = 'CALL rwlock_section_take(?, CONVERT(? USING ascii), CONVERT(? USING utf8mb4), ?, ?, ?, ?)';
/** The same take with the transaction's start, in place of its BEGIN (`rwlock_section_begin`, migration 012). */
export const SECTION_BEGIN =
  'CALL rwlock_section_begin(?, CONVERT(? USING ascii), CONVERT(? USING utf8mb4), ?, ?, ?, ?)';
/**
 * A one-resource section's start and take (`rwlock_section_begin_one`, migration 013): the same
 * values and reply as `SECTION_BEGIN`, with no nested CALL and no loop over packed targets.
 */
export const SECTION_BEGIN_ONE =
  'CALL rwlock_section_begin_one(?, CONVERT(? USING ascii), CONVERT(? USING utf8mb4), ?, ?, ?, ?)';

/**
 * A one-resource section's start and take without history (`rwlock_section_begin_bare`, migration
 * 014): as `SECTION_BEGIN_ONE`, with no log row; its reply's `ids` are empty.
 */
export const SECTION_BEGIN_BARE =
  'CALL rwlock_section_begin_bare(?, CONVERT(? USING ascii), CONVERT(? USING utf8mb4), ?, ?, ?, ?)';

/** The procedure each take's call runs, as its reply names it. */
const PROCEDURE_OF = {
  [SECTION_TAKE]: 'rwlock_section_take',
  [SECTION_BEGIN]: 'rwlock_section_begin',
  [SECTION_BEGIN_ONE]: 'rwlock_section_begin_one',
  [SECTION_BEGIN_BARE]: 'rwlock_section_begin_bare',
} as const;

/**
 * The whole take in one round trip: the bounds, every gate, every lock row, the log rows, sent by
 * `send` as `sql` (`SECTION_TAKE` inside the open transaction, or `SECTION_BEGIN` in place of its
 * BEGIN). The targets go packed; the owner as UTF-8 bytes converted on the server.
 */
export async function callSectionTake(
  send: (sql: string, values: SqlValue[]) => Promise<unknown>,
  sql: keyof typeof PROCEDURE_OF,
  targets: ReadonlyArray<{ resource: Buffer; letter: TakeLetter }>,
  owner: Buffer,
  tokens: readonly Buffer[],
  idleSec: number | null,
  lockWaitSec: number,
  intentMs: number,
): Promise<TakeReply> {
  const packed = Buffer.concat(targets.flatMap((t) => [Buffer.from([t.resource.length]), t.resource]));
  const result = await send(sql, [
    packed,
    Buffer.from(targets.map((t) => t.letter).join(''), 'latin1'),
    owner,
    Buffer.concat(tokens),
    idleSec,
    lockWaitSec,
    intentMs,
  ]);
  const row = firstRow<{ outcome: string | Buffer; at: number | string | null; ids: string | Buffer | null }>(
    result,
    PROCEDURE_OF[sql],
  );
  const ids = String(row.ids ?? '');
  return {
    outcome: String(row.outcome) as TakeReply['outcome'],
    at: Number(row.at ?? 0),
    ids: ids === '' ? [] : ids.split(',').map(Number),
  };
}

/** The section's commit in one call (`rwlock_section_commit`): release times, COMMIT, idle bound restored. */
export const SECTION_COMMIT = 'CALL rwlock_section_commit(CONVERT(? USING ascii), ?)';
/** A one-resource section's commit (`rwlock_section_commit_one`, migration 013): the same values as `SECTION_COMMIT`. */
export const SECTION_COMMIT_ONE = 'CALL rwlock_section_commit_one(CONVERT(? USING ascii), ?)';
/** A section without history's commit (`rwlock_section_commit_bare`, migration 014): COMMIT, idle bound restored. */
export const SECTION_COMMIT_BARE = 'CALL rwlock_section_commit_bare(?)';

/** The ids `SECTION_COMMIT` takes: comma-separated, as bytes (the library sends no strings). */
export function idList(ids: readonly number[]): Buffer {
  return Buffer.from(ids.join(','), 'latin1');
}

export async function logSection(
  conn: RawConnection,
  resource: Buffer,
  mode: LockMode,
  owner: Buffer,
  token: Buffer,
): Promise<number> {
  const result = await query<{ insertId: number | string }>(conn, LOG_SECTION, [
    resource,
    LOCK_TYPE[mode],
    owner,
    token,
  ]);
  return Number(result.insertId);
}

/** What a section needs to know of the server: asked once per manager. */
export interface SectionServer {
  mariadb: boolean;
  /**
   * Whether a shared row lock excludes writers on every member that can write: true on a single
   * server or a single primary; false on Galera and Group Replication multi-primary, where
   * certification checks only the rows a transaction writes.
   */
  sharedLocksCertified: boolean;
  /** What was found, for the error message of a refused option and for diagnostics. */
  topology: 'single' | 'galera' | 'group-replication-single-primary' | 'group-replication-multi-primary';
}

export async function detectSectionServer(conn: RawConnection): Promise<SectionServer> {
  const [v] = await query<Array<{ version: string }>>(conn, 'SELECT VERSION() AS version');
  const rows = await query<Array<{ Variable_name: string; Value: string }>>(
    conn,
    "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('wsrep_on', 'group_replication_single_primary_mode', 'group_replication_group_name')",
  );
  return sectionServerOf(v?.version ?? '', new Map(rows.map((r) => [r.Variable_name.toLowerCase(), String(r.Value)])));
}

/**
 * The decision of `detectSectionServer`, from the server's version string and global variables:
 * Galera when `wsrep_on` is ON; Group Replication when its plugin is loaded with a group name,
 * multi-primary unless `group_replication_single_primary_mode` is ON; a single server otherwise.
 */
export function sectionServerOf(version: string, vars: ReadonlyMap<string, string>): SectionServer {
  const on = (name: string): boolean => ['ON', '1'].includes((vars.get(name) ?? '').toUpperCase());
  let topology: SectionServer['topology'] = 'single';
  if (on('wsrep_on')) topology = 'galera';
  else if (vars.has('group_replication_single_primary_mode') && (vars.get('group_replication_group_name') ?? '') !== '')
    topology = on('group_replication_single_primary_mode')
      ? 'group-replication-single-primary'
      : 'group-replication-multi-primary';
  return {
    mariadb: /mariadb/i.test(version),
    topology,
    sharedLocksCertified: topology === 'single' || topology === 'group-replication-single-primary',
  };
}

/**
 * Bounds, for the section's transaction, how long the server waits for the client's next
 * statement (MariaDB: idle_transaction_timeout, which counts only inside a transaction; MySQL:
 * wait_timeout, which has no in-transaction variant) and, on MySQL, how long a statement waits for
 * a row lock (MariaDB sets that per statement instead, see `takeStatement`). Whole seconds, as the
 * server counts them. The previous values are kept in user variables for `restoreBounds`.
 */
export function boundStatement(server: SectionServer, idleSec: number | null, lockWaitSec: number): string | null {
  const parts: string[] = [];
  if (idleSec !== null) {
    const v = server.mariadb ? 'idle_transaction_timeout' : 'wait_timeout';
    parts.push(`@rwlock_idle = @@SESSION.${v}`, `SESSION ${v} = ${idleSec}`);
  }
  if (!server.mariadb)
    parts.push('@rwlock_lwt = @@SESSION.innodb_lock_wait_timeout', `SESSION innodb_lock_wait_timeout = ${lockWaitSec}`);
  return parts.length === 0 ? null : `SET ${parts.join(', ')}`;
}

/** MySQL: the work's statements wait for row locks as the session did before the section's take. */
export const RESTORE_LOCK_WAIT = 'SET SESSION innodb_lock_wait_timeout = @rwlock_lwt';

/**
 * After the commit (or rollback): the session's bounds as they were, for the pool's next user.
 * Null when `boundStatement` set none.
 */
export function restoreBounds(server: SectionServer, idle: boolean): string | null {
  const parts: string[] = [];
  if (idle) parts.push(`SESSION ${server.mariadb ? 'idle_transaction_timeout' : 'wait_timeout'} = @rwlock_idle`);
  if (!server.mariadb) parts.push('SESSION innodb_lock_wait_timeout = @rwlock_lwt');
  return parts.length === 0 ? null : `SET ${parts.join(', ')}`;
}

/**
 * After a failure of a section that called `rwlock_section_take`: the lock wait bound (which the
 * procedure set on both servers, and restores itself unless its statement was interrupted) and the
 * idle bound (`wait_timeout` on both servers, see migration 009), from the values the procedure kept.
 */
export function restoreAfterTake(idle: boolean): string {
  const parts = ['SESSION innodb_lock_wait_timeout = @rwlock_lwt'];
  if (idle) parts.push('SESSION wait_timeout = @rwlock_idle');
  return `SET ${parts.join(', ')}`;
}

/** The take, with MariaDB's per-statement lock wait bound (`SET STATEMENT ... FOR`). */
export function takeStatement(server: SectionServer, sql: string, lockWaitSec: number): string {
  return server.mariadb ? `SET STATEMENT innodb_lock_wait_timeout = ${lockWaitSec} FOR ${sql}` : sql;
}
