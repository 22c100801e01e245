// A worker process of the reliability suite: runs business operations under the lock through the
// public API and appends its history. The orchestrator talks to it over the IPC channel:
//   -> { type: 'arm', token, phase }   stop at `phase` of the next operation and report
//   <- { type: 'at', token, phase, grant, connectionId }   ...then wait for
//   -> { type: 'go', token }           (or a signal: SIGKILL, SIGSTOP/SIGCONT)
//   <- { type: 'done', token, outcome, err }   when that operation ended
//   -> { type: 'disarm' } / { type: 'stop' }
// Usage: node --import tsx test/faults/worker.ts '<WorkerConfig JSON>'
import { setTimeout as sleep } from 'node:timers/promises';
import type { Knex } from 'knex';
import { connectKnex } from '../../harness/database.js';
import {
  createLockManager,
  LockOutcomeUnknownError,
  LockTimeoutError,
  LockLostError,
  type Grant,
  type LockManager,
} from '../../src/index.js';
import { fromKnex } from '../../src/adapters/index.js';
import { isConflict, isConnectionLost } from '../../src/sql/connection.js';
import { connectFollowingPrimary, refusedAsReadOnly } from '../support/group-replication.js';
import { referenceFence, splitDowngrade, unguardedRelease } from './broken.js';
import { testSwitches } from '../../src/test-switches.js';
import { readStep, writeStep } from './business.js';
import { appendJsonl, now, type OpEvent, type OpKind, type Outcome } from './history.js';
import { inSection, withMany, type Held } from './modes.js';

export type WorkerVariant =
  | 'correct'
  | 'nofence'
  | 'release-unguarded'
  | 'downgrade-split'
  | 'section-unguarded'
  | 'multi-first-fence'
  | 'multi-caller-order'
  | 'permit-unguarded';
export type Phase = 'before' | 'during' | 'after';

export interface WorkerConfig {
  id: string;
  serverUrl: string;
  /** A single-primary group's nodes: connect to whichever reports itself the writable primary, not to serverUrl. */
  followPrimary?: string[];
  database: string;
  history: string;
  resources: string[];
  slowResources: string[];
  slowFraction: number;
  readFraction: number;
  /** Of the scoped operations, the share that change mode: writes downgrade, reads try to upgrade. */
  transitionFraction: number;
  /** Of the scoped operations, the share run as one-commit sections (`section: true`). */
  sectionFraction: number;
  /** Of all operations, the share on two resources (half of them as sections). */
  multiFraction: number;
  /** Semaphores (used by permit operations only), each of `permitLimit` permits. */
  semaphores?: string[];
  permitLimit?: number;
  /** Of all operations, the share run as `withPermit` on a semaphore, taking 1 or 2 permits. */
  permitFraction?: number;
  /**
   * Semaphores whose limit changes mid-run, as a redeploy changes it: `limits` in turn, each for
   * `stepMs` of the wall clock every worker shares. Old and new holders overlap only where the lock
   * refuses the new limit (PermitLimitError) while a live holder keeps the old one.
   */
  changingLimits?: { semaphores: string[]; limits: number[]; stepMs: number };
  /**
   * Resources that are semaphores (of `permitLimit`) to permit operations and write locks to armed
   * writes: a process killed holding one as a write lock leaves a stale grant of the other kind in
   * the way of the next permit, which heals it and takes the resource as a semaphore.
   */
  flipResources?: string[];
  /**
   * Of the scoped durable operations (writes and reads that are not slow, permits; sections take no
   * lease), the share taken with `leaseMs: leaseMs`: kept ahead while the process runs, stale at
   * its end plus the grace once the process is killed or paused.
   */
  leaseMs?: number;
  leaseFraction?: number;
  staleAfterMs: number;
  /** The reapers' tick: slow operations aim their final commit at a reaper round. */
  reaperPeriodMs: number;
  resolveTimeoutMs: number;
  waitMs: number;
  variant: WorkerVariant;
}

export type ToWorker =
  { type: 'arm'; token: number; phase: Phase } | { type: 'go'; token: number } | { type: 'disarm' } | { type: 'stop' };
export type FromWorker =
  | { type: 'ready' }
  | { type: 'at'; token: number; phase: Phase; grant: number; connectionId: number; node?: string }
  | { type: 'done'; token: number; outcome: Outcome; err?: string };

const config = JSON.parse(process.argv[2] ?? '{}') as WorkerConfig;
const send = (m: FromWorker): void => {
  process.send?.(m);
};
const pick = <T>(list: T[]): T => list[Math.floor(Math.random() * list.length)]!;
/** Two distinct items, in random order (the caller's order, not the lock's). */
const twoOf = <T>(list: T[]): [T, T] => {
  const i = Math.floor(Math.random() * list.length);
  const j = (i + 1 + Math.floor(Math.random() * (list.length - 1))) % list.length;
  return [list[i]!, list[j]!];
};
const rand = (lo: number, hi: number): number => lo + Math.random() * (hi - lo);
/** A short lease for this operation, or none (`leaseFraction` of them). */
const lease = (): { leaseMs?: number } =>
  config.leaseMs && Math.random() < (config.leaseFraction ?? 0) ? { leaseMs: config.leaseMs } : {};
/** A semaphore's limit now: a changing one's step of the shared wall clock, else `permitLimit`. */
function limitOf(resource: string): number {
  const c = config.changingLimits;
  if (c?.semaphores.includes(resource)) return c.limits[Math.floor(Date.now() / c.stepMs) % c.limits.length]!;
  return config.permitLimit ?? 2;
}

let armed: { token: number; phase: Phase } | undefined;
const goWaiters = new Map<number, () => void>();
const stopper = new AbortController();

process.on('message', (m: ToWorker) => {
  if (m.type === 'arm') armed = { token: m.token, phase: m.phase };
  else if (m.type === 'disarm') armed = undefined;
  else if (m.type === 'go') goWaiters.get(m.token)?.();
  else if (m.type === 'stop') stopper.abort(new Error('stop'));
});
process.on('disconnect', () => stopper.abort(new Error('orchestrator gone')));

const connect = (): Knex =>
  config.followPrimary
    ? connectFollowingPrimary(config.followPrimary, config.database, 4)
    : connectKnex(config.serverUrl, config.database, { poolMax: 4 });
const lockManager = (knex: Knex): LockManager =>
  createLockManager({
    knex,
    owner: config.id,
    staleAfterMs: config.staleAfterMs,
    resolveTimeoutMs: config.resolveTimeoutMs,
    deadlockRetries: 20,
    // The permit control breaks the plain-statement permit acquire: this worker uses it.
    ...(config.variant === 'permit-unguarded' ? { procedures: false } : {}),
  });
/** Scoped calls (withWriteLock/withReadLock) as the library runs them; the other variants break only their own kind of operation. */
const scoped = config.variant !== 'nofence' && config.variant !== 'release-unguarded';
// The library's test-only switches, one per negative control: sections take their row with a plain
// read (no guard, no lock); a group's fence covers its first grant alone; a group is taken in the caller's order.
if (config.variant === 'section-unguarded') testSwitches.section.guard = false;
if (config.variant === 'multi-first-fence') testSwitches.group.fenceFirstOnly = true;
if (config.variant === 'multi-caller-order') testSwitches.group.callerOrder = true;
// A permit's limit checked on a count read first, then written unguarded.
if (config.variant === 'permit-unguarded') testSwitches.acquire.permitUnguarded = true;
let db = connect();
let locks = lockManager(db);

/** A write refused by super_read_only: this pool holds connections to a node that is no longer primary; start afresh. */
async function moveToPrimary(): Promise<void> {
  const old = db;
  db = connect();
  locks = lockManager(db);
  await old.destroy().catch(() => undefined);
}

function log(e: Omit<OpEvent, 't' | 'w'>): void {
  appendJsonl(config.history, { t: now(), w: config.id, ...e });
}

/** At an armed phase: report where we are and with which grant, then wait for the orchestrator. */
async function checkpoint(
  phase: Phase,
  grant: Grant,
  conn: () => Promise<{ id: number; port: number }>,
  active: { token?: number },
): Promise<void> {
  if (!armed || armed.phase !== phase || active.token === undefined || armed.token !== active.token) return;
  const { token } = armed;
  armed = undefined;
  const { id: connectionId, port } = await conn();
  const go = new Promise<void>((resolve) => goWaiters.set(token, resolve));
  const node = config.followPrimary?.find((u) => new URL(u).port === String(port));
  send({ type: 'at', token, phase, grant: grant.id, connectionId, ...(node ? { node } : {}) });
  await go;
  goWaiters.delete(token);
}

/** The server thread of the connection, and the port of the server it is on (which node, in a cluster). */
async function connectionIdOf(trx: Knex.Transaction | Knex): Promise<{ id: number; port: number }> {
  const [rows] = (await trx.raw('SELECT CONNECTION_ID() AS id, @@port AS port')) as unknown as [
    Array<{ id: number; port: number }>,
  ];
  return { id: Number(rows[0]?.id), port: Number(rows[0]?.port) };
}

/** The unfenced read's own business COMMIT lost its connection: whether it committed is not known here. */
class OwnCommitUnknown extends Error {
  constructor(cause: unknown) {
    super('business commit outcome unknown', { cause });
    this.name = 'OwnCommitUnknown';
  }
}

function classify(err: unknown): { outcome: Outcome; err: string } {
  const e = err as { code?: string; name?: string; message?: string; fatal?: boolean };
  // knex prefixes the failing SQL ("UPDATE ... - reason"): group by the reason alone.
  const reason = (e?.message ?? String(err)).split(' - ').pop()!.slice(0, 60);
  const name = e?.code ?? (e?.name && e.name !== 'Error' ? e.name : `${e?.fatal ? 'fatal ' : ''}Error(${reason})`);
  return {
    outcome: err instanceof LockOutcomeUnknownError || err instanceof OwnCommitUnknown ? 'unknown' : 'fail',
    err: name,
  };
}

async function writeOp(op: string, resource: string, slow: boolean, active: { token?: number }): Promise<void> {
  // A slow operation finishes its work just as the grant is stale and the reapers start a round
  // (they tick on wall-clock multiples of the period), so its fenced commit races them.
  let grantedAt = now();
  const pause = slow
    ? (): number => {
        const tick = Math.ceil((grantedAt + config.staleAfterMs) / config.reaperPeriodMs) * config.reaperPeriodMs;
        return tick + rand(-6, 4) - now();
      }
    : rand(2, 25);
  const opts = { waitMs: slow ? 300 : config.waitMs, signal: stopper.signal };
  if (scoped) {
    // A slow write races the reaper at the cutoff: it takes no lease, which would keep it ahead. An
    // armed write on an even token always takes one, so the kills meet leased grants.
    const armedEven = active.token !== undefined && active.token % 2 === 0;
    const leased = slow ? {} : armedEven && config.leaseMs ? { leaseMs: config.leaseMs } : lease();
    await locks.withWriteLock(
      resource,
      async (trx, grant) => {
        grantedAt = now();
        log({ op, kind: 'write', resource, ev: 'granted', grant: grant.id });
        await checkpoint('before', grant, () => connectionIdOf(trx), active);
        await writeStep(trx, op, resource, grant.id, pause, () =>
          checkpoint('during', grant, () => connectionIdOf(trx), active),
        );
        log({ op, kind: 'write', resource, ev: 'work-done', grant: grant.id });
      },
      { ...opts, ...leased },
    );
    return;
  }
  // Broken variants: a separate acquire, a business transaction, a separate release.
  const grant = await locks.acquireWrite(resource, opts);
  grantedAt = now();
  log({ op, kind: 'write', resource, ev: 'granted', grant: grant.id });
  try {
    await db.transaction(async (trx) => {
      await checkpoint('before', grant, () => connectionIdOf(trx), active);
      await writeStep(trx, op, resource, grant.id, pause, () =>
        checkpoint('during', grant, () => connectionIdOf(trx), active),
      );
      log({ op, kind: 'write', resource, ev: 'work-done', grant: grant.id });
      // 'nofence': commit whatever happened to the grant meanwhile.
      if (config.variant === 'release-unguarded' && !(await referenceFence(trx, grant)))
        throw new LockLostError(grant.id);
    });
    log({ op, kind: 'write', resource, ev: 'commit-ok', grant: grant.id });
  } finally {
    if (config.variant === 'release-unguarded') await unguardedRelease(db, grant);
    else await grant.release();
  }
}

/**
 * A write that ends as a read: the counter read under the write grant, the grant downgraded, the
 * counter read again under the read grant, at READ COMMITTED, and the fence releases the read
 * grant. A downgrade lets no writer in, so both reads agree; a split one (the 'downgrade-split'
 * variant: release, then acquire a read) lets a waiting writer change the value in between. A
 * slow one sleeps after the downgrade until its grant is stale and a reaper round starts, so the
 * reapers reap it as the read grant it has become and its fence must refuse.
 */
async function downgradeOp(op: string, resource: string, slow: boolean): Promise<number> {
  let grantedAt = now();
  const pause = (): number =>
    slow
      ? Math.ceil((grantedAt + config.staleAfterMs) / config.reaperPeriodMs) * config.reaperPeriodMs +
        rand(-6, 4) -
        now()
      : rand(2, 20);
  const opts = { waitMs: slow ? 300 : config.waitMs, signal: stopper.signal };
  if (config.variant === 'downgrade-split') {
    const grant = await locks.acquireWrite(resource, opts);
    log({ op, kind: 'write', resource, ev: 'granted', grant: grant.id });
    let held = grant;
    try {
      return await db.transaction(
        async (trx) => {
          const seen = await readStep(trx, op, resource, grant.id, 0, true, async () => {
            held = await splitDowngrade(locks, grant, 30, opts);
            await sleep(pause());
          });
          log({ op, kind: 'write', resource, ev: 'work-done', grant: grant.id });
          await held.fence(fromKnex(trx));
          return seen;
        },
        { isolationLevel: 'read committed' },
      );
    } finally {
      await held.release();
    }
  }
  return locks.withWriteLock(
    resource,
    async (trx, grant) => {
      grantedAt = now();
      log({ op, kind: 'write', resource, ev: 'granted', grant: grant.id });
      const seen = await readStep(trx, op, resource, grant.id, 0, true, async () => {
        await grant.downgrade();
        log({ op, kind: 'write', resource, ev: 'downgraded', grant: grant.id });
        await sleep(pause());
      });
      log({ op, kind: 'write', resource, ev: 'work-done', grant: grant.id, seen });
      return seen;
    },
    { ...opts, isolationLevel: 'read committed' },
  );
}

/** One attempt at a read grant: null (held by a writer, a writing section, or a waiting writer) as LockTimeoutError. */
async function tryRead(resource: string): Promise<Grant> {
  const grant = await locks.tryAcquireRead(resource);
  if (grant === null) throw new LockTimeoutError(resource, 'read', 0);
  return grant;
}

async function readOp(
  op: string,
  resource: string,
  manual: boolean,
  upgrade: boolean,
  active: { token?: number },
): Promise<number | undefined> {
  const pause = rand(2, 20);
  const opts = { waitMs: config.waitMs, signal: stopper.signal };
  if (!manual && scoped) {
    const leased = lease();
    return locks.withReadLock(
      resource,
      async (trx, grant): Promise<number | undefined> => {
        log({ op, kind: 'read', resource, ev: 'granted', grant: grant.id });
        await checkpoint('before', grant, () => connectionIdOf(trx), active);
        // A read that turns into a write when it is the only holder, and writes under the same grant.
        if (upgrade && (await grant.tryUpgrade())) {
          log({ op, kind: 'read', resource, ev: 'upgraded', grant: grant.id });
          await writeStep(trx, op, resource, grant.id, pause);
          log({ op, kind: 'read', resource, ev: 'work-done', grant: grant.id });
          return undefined;
        }
        const seen = await readStep(trx, op, resource, grant.id, pause, true, () =>
          checkpoint('during', grant, () => connectionIdOf(trx), active),
        );
        log({ op, kind: 'read', resource, ev: 'work-done', grant: grant.id, seen });
        return seen;
      },
      { ...opts, ...leased, isolationLevel: 'read committed' },
    );
  }
  // The unfenced path: acquire, business transaction, then release. A third of these durable readers
  // try once instead of waiting (beside reading sections, which they share with): a refusal ends the
  // operation as a timeout does.
  const grant = Math.random() < 1 / 3 ? await tryRead(resource) : await locks.acquireRead(resource, opts);
  log({ op, kind: 'read', resource, ev: 'granted', grant: grant.id });
  let seen = -1;
  let businessFailed = false;
  try {
    await checkpoint('before', grant, () => connectionIdOf(db), active);
    let stepDone = false;
    await db
      .transaction(
        async (trx) => {
          seen = await readStep(trx, op, resource, grant.id, pause, false);
          stepDone = true;
        },
        { isolationLevel: 'read committed' },
      )
      .catch((err: unknown) => {
        if (stepDone && isConnectionLost(err)) throw new OwnCommitUnknown(err);
        // The worker's own transaction, not the library's: its driver errors reach it raw by design, and
        // are named here so the summary does not count them against the library.
        if (isConflict(err))
          throw Object.assign(new Error('own business transaction rolled back by a conflict', { cause: err }), {
            name: 'OwnConflict',
          });
        if (isConnectionLost(err))
          throw Object.assign(new Error('own business transaction lost its connection before COMMIT', { cause: err }), {
            name: 'OwnConnectionLost',
          });
        throw err;
      });
    log({ op, kind: 'read', resource, ev: 'commit-ok', grant: grant.id, seen });
    await checkpoint('after', grant, () => connectionIdOf(db), active);
  } catch (err) {
    businessFailed = true;
    throw err;
  } finally {
    // The operation reports its business transaction's outcome. When that failed or is unknown (a COMMIT
    // whose reply was lost), a release that fails too (no primary to connect to, mid-election) must not
    // replace it: a `finally` that throws would report "failed" for a commit that may have happened.
    const release =
      config.variant === 'release-unguarded' ? unguardedRelease(db, grant) : grant.release().then(() => undefined);
    await release.catch((releaseErr: unknown) => {
      if (!businessFailed) throw releaseErr;
    });
  }
  return seen;
}

/**
 * A permit operation: `withPermit` on a semaphore of `permitLimit` permits, taking 1 or 2, whose work
 * reads the semaphore's counter twice in its fenced transaction (a business row the ack check finds).
 */
async function permitOp(op: string, resource: string): Promise<number> {
  const limit = limitOf(resource);
  const count = limit > 1 && Math.random() < 0.25 ? 2 : 1;
  return locks.withPermit(
    resource,
    async (trx, grant) => {
      log({ op, kind: 'permit', resource, ev: 'granted', grant: grant.id, limit });
      const seen = await readStep(trx, op, resource, grant.id, rand(2, 20), true);
      log({ op, kind: 'permit', resource, ev: 'work-done', grant: grant.id, seen });
      return seen;
    },
    {
      permits: limit,
      count,
      ...lease(),
      waitMs: config.waitMs,
      signal: stopper.signal,
      isolationLevel: 'read committed',
    },
  );
}

/**
 * A one-commit section: the business transaction takes the lock with its first statement, writes
 * (or reads twice) and commits once; half of them without history (no log row: judged, as every
 * section is, by its business rows). The 'section-unguarded' variant takes it without the guard.
 */
async function sectionOp(op: string, kind: 'write' | 'read', resource: string): Promise<number | undefined> {
  const pause = rand(2, 15);
  const work = async (trx: Knex.Transaction, grant: number | undefined): Promise<number | undefined> => {
    log({ op, kind, resource, ev: 'granted', ...(grant ? { grant } : {}) });
    let seen: number | undefined;
    if (kind === 'write') await writeStep(trx, op, resource, grant ?? 0, pause, undefined, true);
    else seen = await readStep(trx, op, resource, grant ?? 0, pause, true, undefined, true);
    log({ op, kind, resource, ev: 'work-done', ...(grant ? { grant } : {}), ...(seen !== undefined ? { seen } : {}) });
    return seen;
  };
  return inSection(locks, kind, resource, (trx, held) => work(trx, held.grant), {
    waitMs: config.waitMs,
    signal: stopper.signal,
    isolationLevel: 'read committed',
    history: Math.random() < 0.5,
  });
}

/** The business work of an operation on several resources: a row on each, under its own grant. */
async function manyStep(
  trx: Knex.Transaction,
  op: string,
  held: Held[],
  pauseMs: number,
  section: boolean,
): Promise<void> {
  // The pause comes first, so the rows (and their `at`) come after anything that happened to the grants meanwhile.
  if (pauseMs > 0) await sleep(pauseMs);
  for (const h of held) {
    if (h.mode === 'write') await writeStep(trx, op, h.resource, h.grant ?? 0, 0, undefined, section);
    else await readStep(trx, op, h.resource, h.grant ?? 0, 0, true, undefined, section);
  }
}

/**
 * An operation on two resources (a transfer between two loans) through `withLocks`, durable or as
 * sections. A slow one keeps its first grant's lease ahead and pauses until the reapers have taken
 * the other: the group's fence, covering every grant, must refuse the commit. The broken variants
 * set the multi-resource branch's test-only switches: 'multi-first-fence' fences the first grant
 * alone; 'multi-caller-order' takes the grants in the caller's order, and says what it holds and
 * waits for once the first is held.
 */
async function manyOp(
  op: string,
  set: { write: string[]; read: string[] },
  section: boolean,
  slow: boolean,
): Promise<void> {
  // A slow one waits out the cutoff and two reaper periods: by then the reapers have taken every grant
  // whose lease was not kept ahead.
  const grantedAt = now();
  const pause = (): number =>
    slow ? grantedAt + config.staleAfterMs + 2 * config.reaperPeriodMs - now() : rand(2, 15);
  const kind: OpKind = set.write.length > 0 ? 'write' : 'read';
  const named = [...set.write, ...set.read];
  testSwitches.group.afterFirst =
    config.variant === 'multi-caller-order'
      ? async () => {
          log({ op, kind, resource: named[0]!, ev: 'granted' });
          log({ op, kind, resource: named[1]!, ev: 'waiting' });
        }
      : undefined;
  await withMany(
    locks,
    set,
    async (trx, held) => {
      for (const h of held)
        log({ op, kind, resource: h.resource, ev: 'granted', ...(h.grant ? { grant: h.grant } : {}) });
      if (slow) await held[0]?.extend?.(config.staleAfterMs * 4);
      await manyStep(trx, op, held, pause(), section);
      log({ op, kind, resource: held[0]!.resource, ev: 'work-done' });
    },
    // A slow one waits as long as the others (under the cutoff, so its first grant is not reaped while it waits for the second).
    {
      waitMs: config.waitMs,
      signal: stopper.signal,
      section,
      isolationLevel: 'read committed',
      // Half the section groups without history, as half the one-resource sections.
      ...(section ? { history: Math.random() < 0.5 } : {}),
    },
  );
}

async function main(): Promise<void> {
  send({ type: 'ready' });
  for (let n = 0; !stopper.signal.aborted; n++) {
    const op = `${config.id}-${n}`;
    const active: { token?: number } = {};
    // An armed fault aims at the next operation: a write for before/during, a manual read for after.
    if (armed) active.token = armed.token;
    const phase = armed?.phase;
    let kind: OpKind;
    let permit = false;
    let manual = false;
    let slow = false;
    let transition = false;
    let section = false;
    let many: { write: string[]; read: string[] } | undefined;
    if (phase === 'after') {
      kind = 'read';
      manual = true;
    } else if (phase !== undefined) {
      kind = 'write';
    } else if (config.semaphores?.length && Math.random() < (config.permitFraction ?? 0)) {
      kind = 'permit';
      permit = true;
    } else if (Math.random() < config.multiFraction) {
      // Two resources: both written (a transfer), or one written and one read; durable or as sections.
      const [a, b] = twoOf(config.resources);
      // The caller-order control writes both, so a reader sharing the second cannot pass for a waiter.
      many =
        Math.random() < 0.6 || config.variant === 'multi-caller-order'
          ? { write: [a, b], read: [] }
          : { write: [a], read: [b] };
      kind = 'write';
      // As sections where this lane runs sections at all.
      section =
        config.sectionFraction > 0 &&
        Math.random() < 0.5 &&
        config.variant !== 'multi-first-fence' &&
        config.variant !== 'multi-caller-order';
      slow = !section && Math.random() < (config.variant === 'multi-first-fence' ? 1 : config.slowFraction);
    } else {
      kind = Math.random() < config.readFraction ? 'read' : 'write';
      manual = kind === 'read' && Math.random() < 0.5;
      slow = kind === 'write' && Math.random() < config.slowFraction;
      // Of the scoped operations: sections, mode changes, the rest plain (a section is never slow).
      const r = Math.random();
      section = !manual && r < config.sectionFraction;
      transition = !manual && !section && r < config.sectionFraction + config.transitionFraction;
      if (section) slow = false;
    }
    // Every other armed write holds a flip resource as a write lock when its process is killed.
    const flip =
      !!config.flipResources?.length && (phase === 'before' || phase === 'during') && active.token! % 2 === 1;
    const resource = permit
      ? pick([...config.semaphores!, ...(config.flipResources ?? [])])
      : flip
        ? pick(config.flipResources!)
        : many
          ? many.write[0]!
          : slow
            ? pick(config.slowResources)
            : pick(config.resources);
    const resources = many ? [...many.write, ...many.read] : undefined;
    log({ op, kind, resource, ev: 'invoke', ...(section ? { section } : {}), ...(resources ? { resources } : {}) });
    try {
      const seen = permit
        ? await permitOp(op, resource)
        : many
          ? (await manyOp(op, many, section, slow), undefined)
          : section
            ? await sectionOp(op, kind === 'read' ? 'read' : 'write', resource)
            : kind === 'read'
              ? await readOp(op, resource, manual, transition, active)
              : transition
                ? await downgradeOp(op, resource, slow)
                : (await writeOp(op, resource, slow, active), undefined);
      log({ op, kind, resource, ev: 'ok', ...(seen !== undefined ? { seen } : {}) });
      if (active.token !== undefined) send({ type: 'done', token: active.token, outcome: 'ok' });
    } catch (err) {
      const c = classify(err);
      log({ op, kind, resource, ev: c.outcome, err: c.err });
      if (active.token !== undefined) send({ type: 'done', token: active.token, outcome: c.outcome, err: c.err });
      if (config.followPrimary && refusedAsReadOnly(err)) await moveToPrimary();
      // The server may be down (restarting): do not spin.
      if (c.outcome !== 'ok' && !stopper.signal.aborted) await new Promise((r) => setTimeout(r, rand(20, 120)));
    }
    // An arm that did not reach its phase in this operation (e.g. timed out waiting) stays for the next one.
  }
  await db.destroy();
  process.exit(0);
}

main().catch((err: unknown) => {
  process.stderr.write(`worker ${config.id} crashed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
