// The verdict of a run through a failover to an asynchronous replica, judged on the new primary's
// state, the only one that survives. Asynchronous replication acknowledges a commit before any
// replica has it, so a primary killed at the wrong moment takes its last transactions with it:
// grants, releases and business rows, each transaction whole. That is a loss the topology allows,
// not a broken promise of the lock, so an acknowledged operation whose row is missing counts as
// lost instead of as a violation when, and only when, it was acknowledged inside the loss window:
// after the last primary position the replica was seen to apply, and before the replica could
// take a write. Everything else the checker decides stays as it is. Pure functions over plain data.
import {
  ackViolations,
  BY_HOLDER,
  summarizeOps,
  transitionViolations,
  type CheckResult,
  type DbState,
  type Violation,
} from './checker.js';
import type { OpEvent } from './history.js';

/**
 * Acknowledgements inside [from, to] (now() clock) may be lost: `from` is when the primary's
 * position was read that the replica then applied (anything acknowledged earlier had committed
 * before it, so the replica has it); `to` is just before the promoted replica became writable
 * (anything acknowledged earlier was committed on the old primary, which no one reads again).
 */
export interface LossWindow {
  from: number;
  to: number;
}

export interface FailoverLosses {
  /** Operations acknowledged inside the window whose business row the new primary does not have. */
  acknowledgedLost: string[];
  /** Downgrades and upgrades acknowledged inside the window, or of a lost grant: not on the new primary. */
  modeChangesLost: number;
  /** Grants the workers were given that the new primary does not have (no row with that id and owner). */
  grantsLost: number[];
  /** Of those, ids the new primary gave again to another grant (AUTO_INCREMENT restarts after what it applied). */
  idsReissued: number[];
  /**
   * Grants the database shows released by their holder while that holder found them gone (its
   * fence refused with ERR_RWLOCK_LOST, or its manual release returned false): released by another
   * client's stale release of a reissued id. Every statement names a grant by id and token, which
   * rules that out: the failover lane requires none.
   */
  releasedByOthers: number[];
}

const MAX_PER_CHECK = 20;

/** The ack check's wording for a missing acknowledged row (checker.ts's ackViolations). */
const missingRow = (kind: string, op: string): string =>
  `${kind} ${op} was acknowledged but its business row is missing`;

/** When each operation was acknowledged: its business commit (a manual read's commit-ok) or its ok. */
export function ackTimes(events: OpEvent[]): Map<string, number> {
  const at = new Map<string, number>();
  for (const e of events) {
    if (e.ev !== 'ok' && e.ev !== 'commit-ok') continue;
    const t = at.get(e.op);
    if (t === undefined || e.t < t) at.set(e.op, e.t);
  }
  return at;
}

/**
 * A business row under a grant that, on this database, belongs to another worker or resource: the
 * id was given again after a failover lost the original, and a stale holder committed (or read)
 * under someone else's grant. The fence names the grant by id and token, which rules that out;
 * this check is what would show it, as the business rows are the only record of who committed.
 */
export function foreignGrantViolations(events: OpEvent[], db: DbState): Violation[] {
  const out: Violation[] = [];
  const workerOf = new Map<string, string>();
  for (const e of events) workerOf.set(e.op, e.w);
  const grants = new Map(db.grants.map((g) => [g.id, g]));
  const checkOne = (what: string, op: string, resource: string, grantId: number): void => {
    const g = grants.get(grantId);
    const w = workerOf.get(op);
    if (!g || w === undefined) return; // a missing grant is the fence check's, an uninvoked op the ack check's
    if (g.owner !== w || g.resource !== resource) {
      out.push({
        check: 'fence',
        detail: `${what} of ${op} (${w}, ${resource}) names grant ${grantId}, which this database holds as ${g.owner}'s on ${g.resource}`,
      });
    }
  };
  for (const e of db.effects) checkOne('effect', e.op, e.resource, e.grant);
  for (const r of db.reads) checkOne('read', r.op, r.resource, r.grant);
  return out;
}

/**
 * Re-decides the ack and mode-change checks of `result` with the loss window, adds the foreign-grant check, and
 * counts what the failover lost. The ack check is run again here uncapped, so a loss can never
 * push a real ack violation out of the checker's per-check limit.
 */
export function judgeFailover(
  result: CheckResult,
  events: OpEvent[],
  db: DbState,
  window: LossWindow,
): { result: CheckResult; losses: FailoverLosses } {
  const ops = summarizeOps(events);
  const acked = ackTimes(events);
  const withRow = new Set([...db.effects.map((e) => e.op), ...db.reads.map((r) => r.op)]);
  const lost = new Set<string>();
  const acknowledgedLost: string[] = [];
  for (const [op, s] of ops) {
    const at = acked.get(op);
    const outcome = s.committed ? 'ok' : s.outcome;
    if (outcome !== 'ok' || withRow.has(op) || at === undefined || at < window.from || at > window.to) continue;
    acknowledgedLost.push(op);
    lost.add(missingRow(s.kind, op));
  }
  const rows = new Map(db.grants.map((g) => [g.id, g]));
  const grantsLost = new Set<number>();
  const idsReissued = new Set<number>();
  for (const e of events) {
    if (e.ev !== 'granted' || e.grant === undefined) continue;
    const g = rows.get(e.grant);
    // The worker's own grant: its owner and resource (not its mode, which a grant may change), and
    // not made by the new primary after the window for a grant given before it (a worker may be
    // given its own lost id again).
    const mine = g && g.owner === e.w && g.resource === e.resource && !(e.t < window.to && g.createdMs > window.to);
    if (mine) continue;
    grantsLost.add(e.grant);
    if (g) idsReissued.add(e.grant);
  }
  // A mode change is a commit of its own: one the old primary acknowledged inside the window, or
  // on a grant the new primary does not hold as the worker's, was lost with it, as acquires were.
  const changes = (e: OpEvent): boolean => e.ev === 'downgraded' || e.ev === 'upgraded';
  const changeLost = (e: OpEvent): boolean =>
    changes(e) && ((e.t >= window.from && e.t <= window.to) || (e.grant !== undefined && grantsLost.has(e.grant)));
  const modeChangesLost = events.filter(changeLost).length;
  const transitions = transitionViolations(
    events.filter((e) => !changeLost(e)),
    db.grants,
  );
  const ack = ackViolations(events, db).violations.filter((v) => !lost.has(v.detail));
  const foreign = foreignGrantViolations(events, db);
  const violations = [
    ...result.violations.filter((v) => v.check !== 'ack' && v.check !== 'transition'),
    ...ack.slice(0, MAX_PER_CHECK),
    ...transitions.slice(0, MAX_PER_CHECK),
    ...foreign.slice(0, MAX_PER_CHECK),
  ];

  const releasedByOthers = new Set<number>();
  const opGrant = new Map<string, number>();
  for (const e of events) {
    if (e.ev === 'granted' && e.grant !== undefined) opGrant.set(e.op, e.grant);
    const dispossessed = (e.ev === 'fail' && e.err === 'ERR_RWLOCK_LOST') || (e.ev === 'ok' && e.released === false);
    const id = opGrant.get(e.op);
    const g = id === undefined ? undefined : rows.get(id);
    if (dispossessed && g && g.owner === e.w && !grantsLost.has(g.id) && g.releasedBy === BY_HOLDER)
      releasedByOthers.add(g.id);
  }
  const sorted = (s: Set<number>): number[] => [...s].sort((a, b) => a - b);
  return {
    result: { ...result, violations },
    losses: {
      acknowledgedLost,
      modeChangesLost,
      grantsLost: sorted(grantsLost),
      idsReissued: sorted(idsReissued),
      releasedByOthers: sorted(releasedByOthers),
    },
  };
}
