// The terms of a leader name as the grant log tells them: who led, since when, until when, and how
// each term ended. One home for the query: `locks.terms()`, `locks.leader()`, `mysql-rwlock leaders`
// and the page's Leaders section all read through `termsOf`. What the log cannot say (which names
// are campaigned for, resign from close, who waits) is said where the view is documented
// (docs/cli.md, "Leaders").
import { query, type RawConnection } from './connection.js';
import { DB_NOW, epochUs, utcDate } from './clock.js';
import { CRON_FIRE_LIKE, EXCLUSIVE_RUN_SUFFIX } from './jobs.js';
import { endedBy, LOCK_TYPE, RELEASED_BY, STATUS } from '../types.js';

/** How a term ended, or where it stands, as the log says it. */
export type TermEnding =
  /** live, its lease ahead on the database clock: this term leads */
  | 'leading'
  /** live, its lease past: its leader stopped renewing; the reaper, or the next attempt of a campaigner, releases it */
  | 'lease-ran-out'
  /** live and never leased: a campaigner between its acquire and its first lease (or one that died there) */
  | 'unleased'
  /** released by its own leader: `resign()`, `close()`, a failed callback, or a renewal that came too late (the log does not say which) */
  | 'resigned'
  /** released by the reaper: its lease had run out */
  | 'reaped'
  /** released by a successor's acquire, which found its lease run out (a self-heal): `releaser` names it */
  | 'healed'
  /** released by an operator (`forceRelease`, `mysql-rwlock release`, the page): `releaser` and `reason` */
  | 'operator'
  /** released in a way this version does not know */
  | 'unknown';

/** One term of a name: its write grant. */
export interface TermRecord {
  /** The term: its write grant's id. */
  term: number;
  /** The owner of the manager that led (or, unleased, that took the grant). */
  owner: string;
  /** When the term's grant was granted, on the database clock. */
  since: Date;
  /** When it was released; null while live. */
  endedAt: Date | null;
  /** Its lease as last renewed (kept after the release); null if it was never leased. */
  leaseUntil: Date | null;
  how: TermEnding;
  /** Who ended it when someone else did: the successor that healed it, the operator; else null. */
  releaser: string | null;
  /** An operator's reason, or the heal's note. */
  reason: string | null;
}

/** A name with its leader (or null) and its latest terms. */
export interface LeaderName {
  name: string;
  /** The term that leads: `terms[0]` when it is `leading`, else null. */
  leading: TermRecord | null;
  /** Newest first, at most the `termsPerName` asked for. */
  terms: TermRecord[];
  /**
   * A writer waits for the name: its writer-intent mark is current, which a campaign waiting to lead
   * sets (as any writer that waits does). It says that one waits, not who or how many.
   */
  writerWaiting: boolean;
}

export interface LeadersView {
  /** The database clock when read. */
  now: Date;
  names: LeaderName[];
  /** More names than `maxNames` hold a leased write grant; the first by name are shown. */
  truncated: boolean;
}

/** How many terms per name, and names, the views show unless told otherwise. */
export const LEADERS_VIEW_DEFAULTS = Object.freeze({ terms: 20, termsOnPage: 6, maxNames: 100 });

type Row = {
  id: number | string;
  owner: string;
  status: number;
  released_by: number | null;
  since_us: number | string;
  ended_us: number | string | null;
  lease_us: number | string | null;
  lease_ahead: number | string | null;
  releaser: string | null;
  reason: string | null;
};

/** A write grant that was a grant: live, or released other than as a withdrawn acquire or a section. */
const TERM_ROW = `l.lock_type = ${LOCK_TYPE.write} AND (l.status = ${STATUS.live} OR (l.status = ${STATUS.released}
  AND l.released_by NOT IN (${RELEASED_BY.withdrawn}, ${RELEASED_BY.section})))`;

function endingOf(r: Row): TermEnding {
  if (Number(r.status) === STATUS.live) {
    if (r.lease_us === null) return 'unleased';
    return Number(r.lease_ahead) === 1 ? 'leading' : 'lease-ran-out';
  }
  const by = endedBy(r.released_by);
  if (by === 'holder') return 'resigned';
  if (by === 'operator') return 'operator';
  // A self-heal is a reap whose note names the acquire's manager; the reaper's own note names nobody.
  if (by === 'reaper') return r.releaser ? 'healed' : 'reaped';
  return 'unknown';
}

function record(r: Row): TermRecord {
  return {
    term: Number(r.id),
    owner: r.owner,
    since: utcDate(r.since_us),
    endedAt: utcDate(r.ended_us),
    leaseUntil: utcDate(r.lease_us),
    how: endingOf(r),
    releaser: r.releaser ? r.releaser : null,
    reason: r.reason,
  };
}

/**
 * The terms of `resource`, newest first: its write grants, through the resource index (so the cost
 * follows `limit`, not the log), each with how it ended from its row and release note. Every write
 * grant of the name counts: the log does not mark a campaign's grant apart from another writer's.
 * `before`: only terms with a lower id (the next page).
 */
export async function termsOf(
  conn: RawConnection,
  resource: Buffer,
  limit: number,
  before?: number,
): Promise<TermRecord[]> {
  const rows = await query<Row[]>(
    conn,
    `SELECT l.id, l.owner, l.status, l.released_by, ${epochUs('l.create_time')} AS since_us,
            ${epochUs('l.released_at')} AS ended_us, ${epochUs('l.lease_until')} AS lease_us,
            l.lease_until > ${DB_NOW} AS lease_ahead, n.releaser, n.reason
       FROM t_lock_log l LEFT JOIN t_lock_release_note n ON n.grant_id = l.id
      WHERE l.resource_id = ? AND ${TERM_ROW}${before === undefined ? '' : ' AND l.id < ?'}
      ORDER BY l.id DESC LIMIT ?`,
    before === undefined ? [resource, limit] : [resource, before, limit],
  );
  return rows.map(record);
}

/**
 * Which of `resources` (as hex) a writer waits for: their writer-intent mark is current. A campaign
 * waiting to lead sets it, as any writer that waits does; it lapses `writerIntentMs` after the last
 * attempt. So it tells that someone waits, not who or how many.
 */
export async function writersWaiting(conn: RawConnection, resources: Buffer[]): Promise<Set<string>> {
  if (resources.length === 0) return new Set();
  const marks = await query<Array<{ resource_id: Buffer }>>(
    conn,
    `SELECT resource_id FROM t_read_write_lock WHERE resource_id IN (?) AND w_wait_until > ${DB_NOW}`,
    [resources],
  );
  return new Set(marks.map((m) => m.resource_id.toString('hex')));
}

/** The database clock now: what the views place lease times against. */
export async function databaseNow(conn: RawConnection): Promise<Date> {
  const [clock] = await query<Array<{ now_us: number | string }>>(conn, `SELECT ${epochUs(DB_NOW)} AS now_us`);
  return utcDate(clock!.now_us);
}

/**
 * The names of the leaders view: every name whose live write grant holds a lease (a term, leading or
 * with its lease run out), and the `names` given; each with its latest `termsPerName` terms. A leased
 * write grant is not always a term (an exclusive job's `lockAtLeastFor` hold, a grant its holder
 * extended): the log cannot tell. node-cron fires and `#run` grants, which it can, are left out.
 * Found among the live grants through the (status, create_time) index.
 */
export async function leadersView(
  conn: RawConnection,
  options: { names: readonly string[]; termsPerName: number; maxNames: number },
): Promise<LeadersView> {
  const now = await databaseNow(conn);
  const leased = await query<Array<{ resource_id: Buffer }>>(
    conn,
    `SELECT l.resource_id FROM t_lock_log l
      WHERE l.status = ${STATUS.live} AND l.lock_type = ${LOCK_TYPE.write} AND l.lease_until IS NOT NULL
        AND l.resource_id NOT LIKE '${CRON_FIRE_LIKE}' AND l.resource_id NOT LIKE '%${EXCLUSIVE_RUN_SUFFIX}'
      ORDER BY l.resource_id LIMIT ?`,
    [options.maxNames + 1],
  );
  // By the bytes the log holds, so that a name is read back as it was written.
  const keys = new Map<string, Buffer>(options.names.map((n) => [n, Buffer.from(n, 'utf8')]));
  for (const r of leased.slice(0, options.maxNames)) keys.set(r.resource_id.toString('utf8'), r.resource_id);
  const all = [...keys.keys()].sort().slice(0, options.maxNames);
  const waiting = await writersWaiting(
    conn,
    all.map((n) => keys.get(n)!),
  );
  const names: LeaderName[] = [];
  for (const name of all) {
    const key = keys.get(name)!;
    const terms = await termsOf(conn, key, options.termsPerName);
    names.push({
      name,
      leading: terms[0]?.how === 'leading' ? terms[0] : null,
      terms,
      writerWaiting: waiting.has(key.toString('hex')),
    });
  }
  return {
    now,
    names,
    truncated: leased.length > options.maxNames || keys.size > options.maxNames,
  };
}
