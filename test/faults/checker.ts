// Decides, from worker histories and database state, whether a run kept the lock's promises.
// Pure functions over plain data, so they can be unit-tested on hand-made histories.
import type { OpEvent, Outcome } from './history.js';

export const LOCK_TYPE_WRITE = 0;
export const LOCK_TYPE_READ = 1;
export const BY_HOLDER = 1;

export interface GrantRow {
  id: number;
  resource: string;
  type: 0 | 1;
  status: number;
  /** create_time, epoch ms (database clock, microsecond precision kept as a fraction). */
  createdMs: number;
  releasedMs: number | null;
  releasedBy: number | null;
  owner: string;
  /**
   * mode_changed_at, epoch ms: the grant was downgraded (now a read grant) or upgraded (now a write
   * grant) in place then. The log keeps one change time, so the workload changes a grant's mode
   * at most once and the `transition` check holds it to that.
   */
  modeChangedMs?: number | null;
  /** A permit grant's permits (`t_lock_log.permits`); null or absent for read and write grants. */
  permits?: number | null;
  /** The grant had a lease (`lease_until` set: `leaseMs`, or a slow group's extend). */
  leased?: boolean;
}

export interface LockRow {
  resource: string;
  w: number;
  r: number;
  /** `permit_limit`: the limit of the semaphore whose permits the row counts (null: a read-write lock). */
  limit?: number | null;
}

export interface EffectRow {
  op: string;
  resource: string;
  grant: number;
  prev: number;
  next: number;
  /** Written by a one-commit section: judged over [fromMs, atMs], not through a grant row. */
  section?: boolean;
  /** The database time of the operation's first business statement; atMs that of its last. */
  fromMs?: number;
  atMs: number;
}

export interface ReadRow {
  op: string;
  resource: string;
  grant: number;
  seen: number;
  seenAgain: number;
  /** Read inside the fenced commit (withReadLock); unfenced reads (acquire + release) are not fenced by design. */
  fenced?: boolean;
  section?: boolean;
  fromMs?: number;
  atMs: number;
}

export interface DbState {
  grants: GrantRow[];
  locks: LockRow[];
  effects: EffectRow[];
  reads: ReadRow[];
  counters: Array<{ resource: string; value: number }>;
}

/** Counts and live grants read in one consistent snapshot during the run. */
export interface Sample {
  t: number;
  locks: LockRow[];
  live: Array<{ resource: string; type: 0 | 1; n: number }>;
}

/**
 * Once the last holder process has exited, every grant still live was created before that, so the
 * reaper must release it within the cutoff, one reaper period and a reaper round's run time.
 */
export interface Liveness {
  holdersGoneAt: number;
  /** When every resource was first seen free (no counts, no live grants); null if never. */
  freeAt: number | null;
  boundMs: number;
}

export type CheckName =
  | 'invariant'
  | 'overlap'
  | 'lost-update'
  | 'read-stability'
  | 'fence'
  | 'ack'
  | 'transition'
  | 'liveness'
  | 'order'
  | 'deadlock'
  | 'permits';

export interface Violation {
  check: CheckName;
  detail: string;
}

export interface CheckInput {
  events: OpEvent[];
  db: DbState;
  samples?: Sample[];
  liveness?: Liveness;
  /**
   * Each semaphore's limit, as the workload used it. The row's `permit_limit` at the end is not
   * evidence of it: once idle, a resource takes the kind and limit of its next holder (a liveness
   * probe's, say). Without it the rows' limits are used.
   */
  permitLimits?: Record<string, number>;
}

export interface CheckResult {
  violations: Violation[];
  /** Acquires and releases whose effects on the tables were checked (grant rows + releases). */
  lockOps: number;
  /** Business operations by kind and outcome. */
  ops: Record<string, number>;
  samples: number;
}

const MAX_PER_CHECK = 20;

export function check(input: CheckInput): CheckResult {
  const out: Violation[] = [];
  const add = (v: Violation): void => {
    if (out.filter((x) => x.check === v.check).length < MAX_PER_CHECK) out.push(v);
  };
  const { db } = input;
  // (1) invariants, at the end and at every sample
  for (const v of invariantViolations(db.locks, liveCounts(db.grants), 'end')) add(v);
  for (const s of input.samples ?? [])
    for (const v of invariantViolations(s.locks, s.live, `sample@${Math.round(s.t)}`)) add(v);
  // (2) no overlapping write grants, nor a write grant overlapping a read grant, on the database clock
  for (const v of overlapViolations(db.grants)) add(v);
  // ... nor a one-commit section's span overlapping a grant or another section in a conflicting mode
  for (const v of sectionViolations(db)) add(v);
  // ... nor more permits held of a semaphore than its limit, nor a permit beside a read or write grant
  for (const v of permitViolations(db.grants, db.locks, input.permitLimits, grantLimits(input.events))) add(v);
  // (3) effect chains without lost updates; readers saw a stable value
  for (const v of chainViolations(db.effects, db.counters)) add(v);
  for (const r of db.reads) {
    if (r.seen !== r.seenAgain)
      add({
        check: 'read-stability',
        detail: `read ${r.op} under grant ${r.grant} saw ${r.resource}=${r.seen} then ${r.seenAgain}`,
      });
  }
  // (4) fencing: no business effect from a grant released by the reaper/an operator before it committed
  for (const v of fenceViolations(db)) add(v);
  // (5) acknowledged ops present, failed ops absent
  const { violations: ackV, ops } = ackViolations(input.events, db);
  for (const v of ackV) add(v);
  // (6) mode changes the workers were told of are in the log, once per grant
  for (const v of transitionViolations(input.events, db.grants)) add(v);
  // (7) operations on several resources: taken in one order, and no two of them each holding what the other waits for
  for (const v of orderViolations(input.events, db.grants)) add(v);
  for (const v of deadlockViolations(input.events)) add(v);
  // (8) liveness
  const l = input.liveness;
  if (l) {
    if (l.freeAt === null) add({ check: 'liveness', detail: 'resources never became free after the faults stopped' });
    else if (l.freeAt - l.holdersGoneAt > l.boundMs) {
      add({
        check: 'liveness',
        detail: `resources free ${Math.round(l.freeAt - l.holdersGoneAt)} ms after the last holder exited; bound ${l.boundMs} ms`,
      });
    }
  }
  const releases = db.grants.filter((g) => g.status === 2).length;
  return { violations: out, lockOps: db.grants.length + releases, ops, samples: input.samples?.length ?? 0 };
}

export function liveCounts(grants: GrantRow[]): Sample['live'] {
  const m = new Map<string, number>();
  for (const g of grants) {
    if (g.status !== 0 && g.status !== 1) continue;
    const key = `${g.type}\u0000${g.resource}`;
    m.set(key, (m.get(key) ?? 0) + (g.permits ?? 1));
  }
  return [...m].map(([key, n]) => {
    const [type, resource] = key.split('\u0000') as [string, string];
    return { resource, type: Number(type) as 0 | 1, n };
  });
}

export function invariantViolations(locks: LockRow[], live: Sample['live'], where: string): Violation[] {
  const out: Violation[] = [];
  const liveOf = new Map<string, { w: number; r: number }>();
  for (const l of live) {
    const e = liveOf.get(l.resource) ?? { w: 0, r: 0 };
    if (l.type === LOCK_TYPE_WRITE) e.w += l.n;
    else e.r += l.n;
    liveOf.set(l.resource, e);
  }
  const seen = new Set<string>();
  for (const row of locks) {
    seen.add(row.resource);
    const e = liveOf.get(row.resource) ?? { w: 0, r: 0 };
    const bad: string[] = [];
    if (row.w !== 0 && row.w !== 1) bad.push(`w_count=${row.w}`);
    if (row.r < 0) bad.push(`r_count=${row.r}`);
    if (row.w > 0 && row.r > 0) bad.push(`writer and ${row.r} readers`);
    if (row.w !== e.w || row.r !== e.r) bad.push(`counts w=${row.w} r=${row.r} but live grants w=${e.w} r=${e.r}`);
    if (bad.length > 0) out.push({ check: 'invariant', detail: `${where} ${row.resource}: ${bad.join(', ')}` });
  }
  for (const [resource, e] of liveOf) {
    if (!seen.has(resource) && (e.w > 0 || e.r > 0))
      out.push({ check: 'invariant', detail: `${where} ${resource}: live grants w=${e.w} r=${e.r} but no lock row` });
  }
  return out;
}

/** The limit each permit grant was asked with, from its operation's `granted` event. */
export function grantLimits(events: OpEvent[]): Map<number, number> {
  const out = new Map<number, number>();
  for (const e of events)
    if (e.ev === 'granted' && e.kind === 'permit' && e.grant !== undefined && e.limit !== undefined)
      out.set(e.grant, e.limit);
  return out;
}

/**
 * Never more than N holders: on each semaphore (with the limit the workload used, else its row's
 * `permit_limit`), the permits of permit grants live at once on the database clock,
 * from each grant's creation to its release, never exceed the limit; and no read or write grant is
 * live beside a permit grant. A grant created when another was released is not beside it (the
 * acquire waited for that release's commit, so it is dated after).
 * Where a semaphore's limit changes mid-run, `byGrant` gives each grant's own limit (a grant with
 * none, killed before it logged, takes the semaphore's): no grant starts while a live one has
 * another limit (the new limit waits for the old holders, or heals them once stale), and the permits
 * held never exceed the lowest limit among the live grants.
 */
export function permitViolations(
  grants: GrantRow[],
  locks: LockRow[],
  permitLimits?: Record<string, number>,
  byGrant: Map<number, number> = new Map(),
): Violation[] {
  const out: Violation[] = [];
  const limits = new Map(
    permitLimits
      ? Object.entries(permitLimits)
      : locks.filter((l) => l.limit != null).map((l) => [l.resource, l.limit!] as const),
  );
  const byResource = new Map<string, GrantRow[]>();
  for (const g of grants) byResource.set(g.resource, [...(byResource.get(g.resource) ?? []), g]);
  for (const [resource, list] of byResource) {
    const permits = list.filter((g) => g.permits != null);
    if (permits.length === 0) continue;
    const limit = limits.get(resource);
    // Every start and end, an end before a start at the same time.
    const edges = list.flatMap((g) => [
      { t: g.createdMs, d: 1, g },
      { t: g.releasedMs ?? Number.POSITIVE_INFINITY, d: -1, g },
    ]);
    edges.sort((a, b) => a.t - b.t || a.d - b.d);
    let held = 0;
    const live = new Set<GrantRow>();
    let reported = 0;
    for (const e of edges) {
      if (e.d < 0) {
        live.delete(e.g);
        if (e.g.permits != null) held -= e.g.permits;
        continue;
      }
      const other = [...live].find((l) => (l.permits != null) !== (e.g.permits != null));
      if (other && reported++ < MAX_PER_CHECK)
        out.push({
          check: 'permits',
          detail: `${resource}: grant ${e.g.id} (${e.g.permits != null ? 'permit' : 'read-write'}) started while grant ${other.id} (${other.permits != null ? 'permit' : 'read-write'}) was live`,
        });
      const own = byGrant.get(e.g.id);
      const disagrees = own === undefined ? undefined : [...live].find((l) => (byGrant.get(l.id) ?? own) !== own);
      if (disagrees && reported++ < MAX_PER_CHECK)
        out.push({
          check: 'permits',
          detail: `${resource}: grant ${e.g.id} of a limit of ${own} started while grant ${disagrees.id} of a limit of ${byGrant.get(disagrees.id)} was live`,
        });
      live.add(e.g);
      if (e.g.permits == null) continue;
      held += e.g.permits;
      const lowest = Math.min(...[...live].map((l) => byGrant.get(l.id) ?? limit ?? Number.POSITIVE_INFINITY));
      if (held > lowest && reported++ < MAX_PER_CHECK)
        out.push({
          check: 'permits',
          detail: `${resource}: ${held} permits held of a semaphore of ${lowest} when grant ${e.g.id} started (live: ${[...live].map((l) => l.id).join(', ')})`,
        });
    }
    if (limit === undefined)
      out.push({ check: 'permits', detail: `${resource}: permit grants but no semaphore limit on its row` });
  }
  return out;
}

/** A stretch of a grant's life in one mode: created to mode change, and mode change to release. */
export interface Phase {
  grant: GrantRow;
  type: 0 | 1;
  fromMs: number;
  toMs: number;
}

/** The grant's phases: one, or two when its mode changed in place (the first in the other mode). */
export function phasesOf(g: GrantRow): Phase[] {
  const end = g.releasedMs ?? Number.POSITIVE_INFINITY;
  const changed = g.modeChangedMs;
  if (changed === null || changed === undefined) return [{ grant: g, type: g.type, fromMs: g.createdMs, toMs: end }];
  const before = (1 - g.type) as 0 | 1;
  return [
    { grant: g, type: before, fromMs: g.createdMs, toMs: changed },
    { grant: g, type: g.type, fromMs: changed, toMs: end },
  ];
}

/** The grant's mode at `atMs`. */
export function typeAt(g: GrantRow, atMs: number): 0 | 1 {
  const phases = phasesOf(g);
  return (phases.find((p) => atMs >= p.fromMs && atMs < p.toMs) ?? phases[phases.length - 1]!).type;
}

/**
 * No write phase overlaps another grant's phase on the same resource, on the database clock. A
 * downgrade's write phase ends where its read phase starts, so readers that join then are fine; a
 * writer that got in between two grants' phases, or an upgrade beside another reader, is not.
 */
export function overlapViolations(grants: GrantRow[]): Violation[] {
  const out: Violation[] = [];
  const byResource = new Map<string, Phase[]>();
  for (const g of grants) byResource.set(g.resource, [...(byResource.get(g.resource) ?? []), ...phasesOf(g)]);
  const name = (p: Phase): string =>
    `${p.type === LOCK_TYPE_WRITE ? 'write' : 'read'} ${p.grant.modeChangedMs != null ? `phase of grant ${p.grant.id} (${p.grant.type === LOCK_TYPE_WRITE ? 'upgraded' : 'downgraded'})` : `grant ${p.grant.id}`}`;
  for (const [resource, list] of byResource) {
    const sorted = [...list].sort((a, b) => a.fromMs - b.fromMs);
    // Sweep: every phase against the phases of other grants still open when it starts.
    let openWrites: Phase[] = [];
    let openReads: Phase[] = [];
    for (const p of sorted) {
      openWrites = openWrites.filter((w) => w.toMs > p.fromMs);
      openReads = openReads.filter((r) => r.toMs > p.fromMs);
      for (const w of openWrites)
        if (w.grant !== p.grant)
          out.push({ check: 'overlap', detail: `${resource}: ${name(p)} started while ${name(w)} was live` });
      if (p.type === LOCK_TYPE_WRITE) {
        for (const r of openReads)
          if (r.grant !== p.grant)
            out.push({ check: 'overlap', detail: `${resource}: ${name(p)} started while ${name(r)} was live` });
        openWrites.push(p);
      } else {
        openReads.push(p);
      }
    }
  }
  return out;
}

/** What a one-commit section held: its resource, in its mode, at least from its first business statement to its last. */
interface SectionSpan {
  op: string;
  resource: string;
  type: 0 | 1;
  grant: number;
  fromMs: number;
  toMs: number;
}

/**
 * A section holds its resource from its first statement (the guarded lock statement) to its commit.
 * The database clock shows part of that span for certain: from the first business statement to the
 * last (both inside it). No grant phase in a conflicting mode, and no other section's span, may
 * meet that part. The section's own log row (granted and released in its commit) is not another holder.
 */
export function sectionViolations(db: DbState): Violation[] {
  const out: Violation[] = [];
  const spans: SectionSpan[] = [];
  for (const e of db.effects)
    if (e.section)
      spans.push({
        op: e.op,
        resource: e.resource,
        type: LOCK_TYPE_WRITE,
        grant: e.grant,
        fromMs: e.fromMs ?? e.atMs,
        toMs: e.atMs,
      });
  for (const r of db.reads)
    if (r.section)
      spans.push({
        op: r.op,
        resource: r.resource,
        type: LOCK_TYPE_READ,
        grant: r.grant,
        fromMs: r.fromMs ?? r.atMs,
        toMs: r.atMs,
      });
  if (spans.length === 0) return out;
  const own = new Set(spans.map((s) => s.grant));
  const phases = new Map<string, Phase[]>();
  for (const g of db.grants)
    if (!own.has(g.id)) phases.set(g.resource, [...(phases.get(g.resource) ?? []), ...phasesOf(g)]);
  const mode = (t: 0 | 1): string => (t === LOCK_TYPE_WRITE ? 'write' : 'read');
  const bySpanResource = new Map<string, SectionSpan[]>();
  for (const s of spans) bySpanResource.set(s.resource, [...(bySpanResource.get(s.resource) ?? []), s]);
  for (const [resource, list] of bySpanResource) {
    for (const s of list) {
      for (const p of phases.get(resource) ?? []) {
        if (s.type !== LOCK_TYPE_WRITE && p.type !== LOCK_TYPE_WRITE) continue;
        if (s.fromMs < p.toMs && p.fromMs < s.toMs)
          out.push({
            check: 'overlap',
            detail: `${resource}: ${mode(s.type)} section ${s.op} ran ${s.fromMs.toFixed(3)}..${s.toMs.toFixed(3)} while ${mode(p.type)} grant ${p.grant.id} was live (${p.fromMs.toFixed(3)}..${p.toMs.toFixed(3)})`,
          });
      }
    }
    const sorted = [...list].sort((a, b) => a.fromMs - b.fromMs);
    for (let i = 0; i < sorted.length; i++) {
      const a = sorted[i]!;
      for (let j = i + 1; j < sorted.length && sorted[j]!.fromMs < a.toMs; j++) {
        const b = sorted[j]!;
        if (b.op === a.op || (a.type !== LOCK_TYPE_WRITE && b.type !== LOCK_TYPE_WRITE)) continue;
        out.push({
          check: 'overlap',
          detail: `${resource}: ${mode(b.type)} section ${b.op} started while ${mode(a.type)} section ${a.op} ran`,
        });
      }
    }
  }
  return out;
}

/** Resource ids in the lock's order: by their bytes. */
export const byIdBytes = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b));

/**
 * An operation on several resources takes them in one order (by the resource id's bytes), so two
 * of them can never each hold what the other waits for. Judged from the log: the grants an
 * operation was given, in the order the database made them (their ids), name its resources in that order.
 */
export function orderViolations(events: OpEvent[], grants: GrantRow[]): Violation[] {
  const out: Violation[] = [];
  const byId = new Map(grants.map((g) => [g.id, g]));
  const given = new Map<string, GrantRow[]>();
  for (const e of events) {
    const g = e.ev === 'granted' && e.grant !== undefined ? byId.get(e.grant) : undefined;
    // The worker's own grant (after a failover an id may name another's grant on the new primary).
    if (g && g.owner === e.w && g.resource === e.resource) given.set(e.op, [...(given.get(e.op) ?? []), g]);
  }
  for (const [op, list] of given) {
    if (list.length < 2) continue;
    const made = [...list].sort((a, b) => a.id - b.id);
    const names = made.map((g) => g.resource);
    const sorted = [...names].sort(byIdBytes);
    if (names.some((n, i) => n !== sorted[i]))
      out.push({
        check: 'order',
        detail: `${op} took ${names.join(', ')} in that order (grants ${made.map((g) => g.id).join(', ')})`,
      });
  }
  return out;
}

/**
 * Two operations each holding a resource the other was waiting for, at the same moment: a wait-for
 * cycle, a deadlock (the lock's waits are bounded, so one of them ends it by giving up). Seen where
 * an operation takes its resources one call at a time and says so (`waiting` events); a wait lasts
 * until the resource is granted or the operation ends.
 */
export function deadlockViolations(events: OpEvent[]): Violation[] {
  const out: Violation[] = [];
  interface Wait {
    op: string;
    held: string[];
    waitsFor: string;
    from: number;
    to: number;
  }
  const held = new Map<string, string[]>();
  const open = new Map<string, Omit<Wait, 'to'>>();
  const waits: Wait[] = [];
  const close = (op: string, t: number): void => {
    const w = open.get(op);
    if (w) waits.push({ ...w, to: t });
    open.delete(op);
  };
  for (const e of events) {
    if (e.ev === 'granted') {
      close(e.op, e.t);
      held.set(e.op, [...(held.get(e.op) ?? []), e.resource]);
    } else if (e.ev === 'waiting') {
      close(e.op, e.t);
      open.set(e.op, { op: e.op, held: held.get(e.op) ?? [], waitsFor: e.resource, from: e.t });
    } else if (e.ev === 'ok' || e.ev === 'fail' || e.ev === 'unknown') close(e.op, e.t);
  }
  waits.sort((a, b) => a.from - b.from);
  for (let i = 0; i < waits.length; i++) {
    const a = waits[i]!;
    for (let j = i + 1; j < waits.length && waits[j]!.from < a.to; j++) {
      const b = waits[j]!;
      if (b.op !== a.op && a.held.includes(b.waitsFor) && b.held.includes(a.waitsFor))
        out.push({
          check: 'deadlock',
          detail: `${a.op} held ${a.held.join(', ')} and waited for ${a.waitsFor} while ${b.op} held ${b.held.join(', ')} and waited for ${b.waitsFor}`,
        });
    }
  }
  return out;
}

/**
 * Every downgrade or upgrade a worker was told succeeded is in the log (the grant's type is the new
 * mode and its change time is set), and no grant was told of two: the log could not show both.
 */
export function transitionViolations(events: OpEvent[], grants: GrantRow[]): Violation[] {
  const out: Violation[] = [];
  const byId = new Map(grants.map((g) => [g.id, g]));
  const told = new Map<number, number>();
  for (const e of events) {
    if ((e.ev !== 'downgraded' && e.ev !== 'upgraded') || e.grant === undefined) continue;
    told.set(e.grant, (told.get(e.grant) ?? 0) + 1);
    const g = byId.get(e.grant);
    const want = e.ev === 'downgraded' ? LOCK_TYPE_READ : LOCK_TYPE_WRITE;
    if (!g)
      out.push({ check: 'transition', detail: `${e.op}: grant ${e.grant} was ${e.ev}, but the log has no such grant` });
    else if (g.type !== want || g.modeChangedMs === null || g.modeChangedMs === undefined) {
      out.push({
        check: 'transition',
        detail: `${e.op}: grant ${e.grant} was ${e.ev}, but the log shows a ${g.type === LOCK_TYPE_WRITE ? 'write' : 'read'} grant${g.modeChangedMs == null ? ' that never changed mode' : ''}`,
      });
    }
  }
  for (const [id, n] of told)
    if (n > 1)
      out.push({ check: 'transition', detail: `grant ${id} changed mode ${n} times; the log keeps one change` });
  return out;
}

export function chainViolations(effects: EffectRow[], counters: DbState['counters']): Violation[] {
  const out: Violation[] = [];
  const byResource = new Map<string, EffectRow[]>();
  for (const e of effects) byResource.set(e.resource, [...(byResource.get(e.resource) ?? []), e]);
  for (const c of counters) if (!byResource.has(c.resource)) byResource.set(c.resource, []);
  for (const [resource, list] of byResource) {
    const byPrev = new Map<number, EffectRow[]>();
    for (const e of list) {
      if (e.next !== e.prev + 1)
        out.push({ check: 'lost-update', detail: `${resource}: effect of ${e.op} wrote ${e.prev} -> ${e.next}` });
      byPrev.set(e.prev, [...(byPrev.get(e.prev) ?? []), e]);
    }
    for (const [prev, same] of byPrev) {
      if (same.length > 1) {
        out.push({
          check: 'lost-update',
          detail: `${resource}: ${same.length} effects read ${prev} (grants ${same.map((e) => e.grant).join(', ')}): an update was lost`,
        });
      }
    }
    const n = byPrev.size;
    for (let k = 0; k < n; k++) {
      if (!byPrev.has(k)) {
        out.push({
          check: 'lost-update',
          detail: `${resource}: chain has no effect from ${k} although ${n} distinct steps exist`,
        });
        break;
      }
    }
    const counter = counters.find((c) => c.resource === resource);
    if (counter && counter.value !== list.length) {
      out.push({
        check: 'lost-update',
        detail: `${resource}: counter is ${counter.value} after ${list.length} committed increments`,
      });
    }
  }
  return out;
}

export function fenceViolations(db: DbState): Violation[] {
  const out: Violation[] = [];
  const grants = new Map(db.grants.map((g) => [g.id, g]));
  const checkOne = (what: string, op: string, grantId: number, atMs: number, type: 0 | 1): void => {
    const g = grants.get(grantId);
    if (!g) {
      out.push({ check: 'fence', detail: `${what} of ${op} names grant ${grantId}, which does not exist` });
      return;
    }
    if (type === LOCK_TYPE_WRITE && typeAt(g, atMs) !== LOCK_TYPE_WRITE)
      out.push({
        check: 'fence',
        detail: `${what} of ${op} under read grant ${grantId}${g.modeChangedMs != null ? ' (in its read phase)' : ''}`,
      });
    if (g.releasedBy !== null && g.releasedBy !== BY_HOLDER && g.releasedMs !== null && atMs >= g.releasedMs) {
      out.push({
        check: 'fence',
        detail: `${what} of ${op} committed at ${atMs.toFixed(3)} under grant ${grantId}, which was ${g.releasedBy === 2 ? 'reaped' : 'force-released'} at ${g.releasedMs.toFixed(3)}`,
      });
    }
  };
  // A section has no grant to fence: its guard is the row lock its first statement took (sectionViolations).
  for (const e of db.effects) if (!e.section) checkOne('effect', e.op, e.grant, e.atMs, LOCK_TYPE_WRITE);
  for (const r of db.reads)
    if (r.fenced !== false && !r.section) checkOne('read', r.op, r.grant, r.atMs, LOCK_TYPE_READ);
  return out;
}

interface OpSummary {
  kind: OpEvent['kind'];
  /** The kind as the summary counts it: `write`, `read`, `write.section`, `write.2-resource` ... */
  label: string;
  /** The resources it names: one business row each. */
  resources: string[];
  outcome: Outcome;
  committed: boolean;
  grants: number[];
  /** The error a failed operation reported. */
  err?: string;
  /** Its events in order, with milliseconds since the first: how far it got, and how long each step took. */
  trail: string[];
  from: number;
}

export function summarizeOps(events: OpEvent[]): Map<string, OpSummary> {
  const ops = new Map<string, OpSummary>();
  for (const e of events) {
    const o = ops.get(e.op) ?? {
      kind: e.kind,
      label: e.kind,
      resources: [e.resource],
      outcome: 'unknown' as Outcome,
      committed: false,
      grants: [],
      trail: [],
      from: e.t,
    };
    o.trail.push(
      `${e.ev}${e.grant !== undefined ? ` ${e.grant}` : ''}${e.err !== undefined ? ` (${e.err})` : ''} +${Math.round(e.t - o.from)}ms`,
    );
    if (e.ev === 'invoke') {
      o.resources = e.resources ?? [e.resource];
      o.label = `${e.kind}${o.resources.length > 1 ? `.${o.resources.length}-resource` : ''}${e.section ? '.section' : ''}`;
    }
    if (e.ev === 'granted' && e.grant !== undefined) o.grants.push(e.grant);
    if (e.ev === 'commit-ok') o.committed = true;
    if (e.ev === 'ok' || e.ev === 'fail' || e.ev === 'unknown') o.outcome = e.ev;
    if (e.ev === 'fail' && e.err !== undefined) o.err = e.err;
    ops.set(e.op, o);
  }
  return ops;
}

export function ackViolations(
  events: OpEvent[],
  db: DbState,
): { violations: Violation[]; ops: Record<string, number> } {
  const out: Violation[] = [];
  const counts: Record<string, number> = {};
  const rowsByOp = new Map<string, Array<{ grant: number; resource: string }>>();
  for (const e of db.effects) rowsByOp.set(e.op, [...(rowsByOp.get(e.op) ?? []), e]);
  for (const r of db.reads) rowsByOp.set(r.op, [...(rowsByOp.get(r.op) ?? []), r]);
  const ops = summarizeOps(events);
  for (const [op, s] of ops) {
    // A manual read whose business transaction committed is acknowledged even if its release failed.
    const outcome: Outcome = s.committed ? 'ok' : s.outcome;
    counts[`${s.label}.${outcome}`] = (counts[`${s.label}.${outcome}`] ?? 0) + 1;
    const rows = rowsByOp.get(op) ?? [];
    // One business row per resource the operation names, all in one commit: all of them or none.
    const named = new Set(s.resources);
    const perResource = new Set(rows.map((r) => r.resource));
    if (rows.length > named.size || perResource.size !== rows.length)
      out.push({
        check: 'ack',
        detail: `${op}: ${rows.length} business rows for one operation${named.size > 1 ? ` on ${named.size} resources` : ''}`,
      });
    for (const r of rows)
      if (!named.has(r.resource))
        out.push({ check: 'ack', detail: `${op}: a business row on ${r.resource}, which it did not name` });
    if (outcome === 'ok' && rows.length === 0)
      out.push({ check: 'ack', detail: `${s.kind} ${op} was acknowledged but its business row is missing` });
    else if (rows.length > 0 && rows.length < named.size)
      out.push({
        check: 'ack',
        detail: `${op} named ${named.size} resources but committed ${rows.length} business rows (${[...perResource].join(', ')})`,
      });
    if (outcome === 'fail' && rows.length > 0)
      out.push({
        check: 'ack',
        detail: `${s.kind} ${op} failed (${s.err ?? 'no error recorded'}) but its business row (grant ${rows[0]!.grant}) committed; its events: ${s.trail.join(', ')}`,
      });
    for (const r of rows)
      if (s.grants.length > 0 && !s.grants.includes(r.grant))
        out.push({
          check: 'ack',
          detail: `${op}: business row names grant ${r.grant}, the worker held ${s.grants.join(', ')}`,
        });
  }
  for (const op of rowsByOp.keys())
    if (!ops.has(op)) out.push({ check: 'ack', detail: `business row of ${op}, which no worker invoked` });
  return { violations: out, ops: counts };
}
