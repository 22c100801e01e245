// Process faults, one injector per kind. A fault is aimed at one idle worker: it is armed to stop
// at a phase of its next operation with a live grant, the injector does its damage, and the fault
// counts as proven only when the grant was live when it struck and the damage is shown to have
// happened (the reaper released it, the connection was killed, the proxy fired).
import { setTimeout as sleep } from 'node:timers/promises';
import { connectKnex } from '../../harness/database.js';
import { createLockManager } from '../../src/index.js';
import type { FaultProxy } from '../support/proxy.js';
import type { Query, Target } from './admin.js';
import { now, WITNESS_OWNER, type FaultEvent } from './history.js';
import { isRunning, send, waitMessage, type Slot } from './processes.js';
import { grantStatus, isLive } from './state.js';
import type { FromWorker, Phase } from './worker.js';

export type ProcessFault =
  | 'sigkill-before'
  | 'sigkill-during'
  | 'sigkill-after'
  | 'sigstop-past-cutoff'
  | 'kill-connection'
  | 'commit-reply-lost';

const PHASE: Record<ProcessFault, Phase> = {
  'sigkill-before': 'before',
  'sigkill-during': 'during',
  'sigkill-after': 'after',
  'sigstop-past-cutoff': 'during',
  'kill-connection': 'during',
  'commit-reply-lost': 'during',
};

export interface InjectorEnv {
  q: Query;
  /** The scenario's database, for the witness holder's own lock manager. */
  database: string;
  staleAfterMs: number;
  reaperPeriodMs: number;
  proxy?: FaultProxy;
  record(f: FaultEvent): void;
  /** Replaces a worker the injector killed (unless the run is stopping). */
  respawn(slot: Slot): void;
}

/** A worker stopped at its checkpoint, holding `grant` on `target`'s server. */
interface Hit {
  slot: Slot;
  token: number;
  grant: number;
  connectionId: number;
  /** The server the worker's connection is on (a worker that follows a primary says which). */
  target: Target;
  /** The grant was live when the worker stopped. */
  live: boolean;
}

/** What the injector showed: whether its damage happened, and what the holder then saw. */
interface Struck {
  damaged: boolean;
  detail?: string;
}

/** Lets the worker go on and waits for its operation to end: what the holder saw, as a fault detail. */
async function letGo(hit: Hit, timeoutMs: number): Promise<string> {
  const ended = waitMessage(
    hit.slot,
    (m): m is Extract<FromWorker, { type: 'done' }> => m.type === 'done' && m.token === hit.token,
    timeoutMs,
  );
  send(hit.slot, { type: 'go', token: hit.token });
  const end = await ended;
  return end ? `${end.outcome}${end.err ? ` ${end.err}` : ''}` : 'no end';
}

async function sigkill(env: InjectorEnv, hit: Hit): Promise<Struck> {
  hit.slot.child.kill('SIGKILL');
  await hit.slot.exited;
  env.respawn(hit.slot);
  return { damaged: true };
}

/**
 * A holder on the stopped worker's resource, in its mode, taken after the reap and kept until the
 * worker's late operation (and its release) has ended. Then a writer tries to get in: it can only if
 * that late release gave back a count the reaper had already given back, taking the witness's; the
 * overlap check then sees the writer beside the witness. Best effort: undefined when it cannot hold.
 */
async function holdWitness(env: InjectorEnv, hit: Hit): Promise<(() => Promise<void>) | undefined> {
  const [row] = await env
    .q<{ resource: string; lock_type: number }>(
      hit.target,
      'SELECT CAST(resource_id AS CHAR) AS resource, lock_type FROM t_lock_log WHERE id = ?',
      [hit.grant],
    )
    .catch(() => []);
  if (!row) return undefined;
  const knex = connectKnex(hit.target.adminUrl, env.database, { poolMax: 2 });
  const locks = createLockManager({ knex, owner: WITNESS_OWNER });
  const mode = Number(row.lock_type) === 0 ? 'write' : 'read';
  const held = await (
    mode === 'write'
      ? locks.acquireWrite(row.resource, { waitMs: 10_000 })
      : locks.acquireRead(row.resource, { waitMs: 10_000 })
  ).catch(() => undefined);
  if (!held) {
    await knex.destroy();
    return undefined;
  }
  return async () => {
    try {
      const probe = await locks.tryAcquireWrite(row.resource);
      await probe?.release();
      await held.release();
    } catch {
      // a server restarting under a cluster fault: the reaper takes what is left
    } finally {
      await knex.destroy();
    }
  };
}

/** Stopped until the reaper has released its grant (past the cutoff by construction), then continued. */
async function sigstopPastCutoff(env: InjectorEnv, hit: Hit): Promise<Struck> {
  hit.slot.child.kill('SIGSTOP');
  const detail = letGo(hit, env.staleAfterMs * 3 + 30_000);
  const deadline = Date.now() + env.staleAfterMs + env.reaperPeriodMs * 4 + 10_000;
  let reaped = false;
  while (Date.now() < deadline) {
    const s = await grantStatus(env.q, hit.target, hit.grant);
    if (s?.status === 2) {
      reaped = s.by === 2;
      break;
    }
    await sleep(100);
  }
  const witness = reaped ? await holdWitness(env, hit) : undefined;
  hit.slot.child.kill('SIGCONT');
  const seen = await detail;
  await witness?.();
  return { damaged: reaped, detail: seen };
}

/** `KILL CONNECTION` of the holder's connection from an admin session on its server. */
async function killConnection(env: InjectorEnv, hit: Hit): Promise<Struck> {
  let killed: boolean;
  try {
    await env.q(hit.target, 'KILL CONNECTION ?', [hit.connectionId]);
    killed = true;
  } catch {
    killed = false;
  }
  return { damaged: killed, detail: await letGo(hit, 30_000) };
}

/** The proxy forwards this connection's COMMIT (or the fence's call that commits) and drops the reply. */
async function commitReplyLost(env: InjectorEnv, hit: Hit): Promise<Struck> {
  if (!env.proxy) throw new Error('commit-reply-lost needs a proxy');
  const arm = env.proxy.armThread(hit.connectionId, /^(COMMIT|CALL rwlock_fence_commit\()/i, 'before-reply');
  let fired = false;
  void arm.fired.then(() => {
    fired = true;
  });
  const detail = await letGo(hit, 30_000);
  arm.cancel();
  return { damaged: fired, detail };
}

const INJECTORS: Record<ProcessFault, (env: InjectorEnv, hit: Hit) => Promise<Struck>> = {
  'sigkill-before': sigkill,
  'sigkill-during': sigkill,
  'sigkill-after': sigkill,
  'sigstop-past-cutoff': sigstopPastCutoff,
  'kill-connection': killConnection,
  'commit-reply-lost': commitReplyLost,
};

let tokens = 0;

/** Aims one fault of `kind` at a random idle worker; records it once it struck. */
export async function injectOne(env: InjectorEnv, slots: Slot[], kind: ProcessFault): Promise<void> {
  const idle = slots.filter((s) => !s.busy && isRunning(s.child));
  if (idle.length === 0) {
    await sleep(50);
    return;
  }
  const slot = idle[Math.floor(Math.random() * idle.length)]!;
  slot.busy = true;
  try {
    const token = ++tokens;
    const at = waitMessage(
      slot,
      (m): m is Extract<FromWorker, { type: 'at' }> => m.type === 'at' && m.token === token,
      8000,
    );
    send(slot, { type: 'arm', token, phase: PHASE[kind] });
    const reached = await at;
    if (!reached) {
      send(slot, { type: 'disarm' });
      return;
    }
    const target = reached.node ? { serverUrl: reached.node, adminUrl: reached.node } : slot.target;
    const live = await isLive(env.q, target, reached.grant);
    const hit: Hit = { slot, token, grant: reached.grant, connectionId: reached.connectionId, target, live };
    const struck = await INJECTORS[kind](env, hit);
    env.record({
      t: now(),
      kind,
      proven: live && struck.damaged,
      grant: hit.grant,
      worker: slot.id,
      ...(struck.detail !== undefined ? { detail: struck.detail } : {}),
    });
  } finally {
    slot.busy = false;
  }
}
