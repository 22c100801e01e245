import type { LockContext } from '../context/lock-context.js';
import { LockTimeoutError, SchemaMissingError } from '../../errors.js';
import type { IsolationLevel } from '../../options.js';
import { errnoOf, ER_SP_DOES_NOT_EXIST, query, type RawConnection } from '../../sql/connection.js';
import type { Send } from './section-calls.js';
import { WRITER_INTENT } from '../../sql/acquire.js';
import {
  callSectionTake,
  GATE_TAKE,
  logSection,
  SECTION_BEGIN,
  SECTION_BEGIN_BARE,
  SECTION_BEGIN_ONE,
  READ_DECISION,
  READ_LOCKING_ROW,
  RESTORE_LOCK_WAIT,
  ROW_EXISTS,
  TAKE,
  type SectionServer,
  type TakeLetter,
  type TakeReply,
} from '../../sql/section.js';
import { testSwitches } from '../../test-switches.js';
import type { SectionTarget } from './section-types.js';
import type { SectionWaits } from './section-waits.js';

/** Thrown inside the transaction to roll it back; carries why. */
export class Refused {
  constructor(
    readonly target: SectionTarget,
    /** What does not exist yet: created after the rollback, in autocommit, then the section decides again. */
    readonly missing: 'gate' | 'row' | null,
  ) {}
}

/** How a section takes one target: its gate's lock mode, and how it takes or reads the lock row. */
export function takeKind(
  server: SectionServer,
  t: SectionTarget,
): 'unguarded' | 'write' | 'readShared' | 'readExclusive' {
  if (!testSwitches.section.guard) return 'unguarded';
  if (t.mode === 'write') return 'write';
  return server.sharedLocksCertified ? 'readShared' : 'readExclusive';
}

/** A take done: the log rows' ids (none without history), or a refusal that marked a writer's intent (for the caller to commit). */
export type Taken = { ids: number[] } | { refused: SectionTarget };

/**
 * The take as one call (bounds, gates, rows, log rows), its wait ended by the deadline and the
 * signal: `rwlock_section_take` inside the open transaction, or `rwlock_section_begin` in place of
 * its BEGIN (`send` then arms it, see SectionCalls). What was taken, or `again` when the procedure
 * is missing (from the next try: the BEGIN and the take apart, or the statements); other refusals
 * throw Refused.
 */
export async function takeWithProcedure(
  ctx: LockContext,
  send: Send,
  sql: Parameters<typeof callSectionTake>[1],
  targets: readonly SectionTarget[],
  kinds: ReadonlyArray<ReturnType<typeof takeKind>>,
  tokens: readonly Buffer[],
  o: {
    isolationLevel: IsolationLevel | undefined;
    idleSec: number | null;
    lockWaitSec: number;
    intentMs: number;
    waits: SectionWaits;
    deadline: number;
    signal: AbortSignal | undefined;
    waitMs: number;
    /** Whether the call has gone, when `send` sends it later (see SectionWaits.run). */
    sent?: () => boolean;
  },
): Promise<Taken | { again: true }> {
  const { isolationLevel, idleSec, lockWaitSec, intentMs, waits, deadline, signal, waitMs } = o;
  const letters = kinds.map((kind) => takeLetter(kind, isolationLevel));
  let reply: TakeReply;
  try {
    reply = await waits.run(
      () =>
        callSectionTake(
          send,
          sql,
          targets.map((t, i) => ({ resource: t.resource, letter: letters[i]! })),
          ctx.ownerBytes,
          tokens,
          idleSec,
          lockWaitSec,
          intentMs,
        ),
      deadline,
      signal,
      () => new LockTimeoutError(targets[0]!.resourceId, targets[0]!.mode, waitMs),
      o.sent,
    );
  } catch (err) {
    // A CALL of a missing procedure fails before running anything. Without migration 014 a section
    // without history takes through statements from the next try; without 013 a
    // one-resource section takes through the packed begin from the next try; without 012 the BEGIN
    // and the take go apart (lock managers need neither), whatever `procedures` says; without 009,
    // under 'auto', the statements.
    if (err instanceof SchemaMissingError && errnoOf(err.cause) === ER_SP_DOES_NOT_EXIST) {
      if (sql === SECTION_BEGIN_BARE) {
        ctx.sections.bareStatements = true;
        return { again: true };
      }
      if (sql === SECTION_BEGIN_ONE) {
        ctx.sections.onePacked = true;
        return { again: true };
      }
      if (sql === SECTION_BEGIN) {
        ctx.sections.beginApart = true;
        return { again: true };
      }
      if (ctx.options.procedures === 'auto') {
        ctx.sections.statements = true;
        return { again: true };
      }
    }
    throw err;
  }
  const t = targets[reply.at]!;
  if (reply.outcome === 'gate' || reply.outcome === 'row') throw new Refused(t, reply.outcome);
  if (reply.outcome === 'refused') throw new Refused(t, null);
  if (reply.outcome === 'intent') return { refused: t };
  return { ids: reply.ids };
}

/** The procedure's letter for a take (see `TakeLetter`). */
function takeLetter(kind: ReturnType<typeof takeKind>, isolationLevel: IsolationLevel | undefined): TakeLetter {
  if (kind === 'write') return 'w';
  if (kind === 'readExclusive') return 'x';
  // SERIALIZABLE makes the plain read of the lock row a locking one, which would hold up durable
  // readers' UPDATE: such a reading section takes the gate exclusively instead.
  return isolationLevel === 'serializable' ? 'e' : 's';
}

/**
 * The take as separate statements (a database without the section procedures, and the negative
 * controls, and sections without history where no bare begin serves): the gates, the lock rows, the
 * plain reads, then the log rows unless `history` is false. The log rows' ids, or a
 * refusal that marked a writer's intent (for the caller to commit); other refusals throw Refused.
 */
export async function takeWithStatements(
  ctx: LockContext,
  conn: RawConnection,
  server: SectionServer,
  targets: readonly SectionTarget[],
  kinds: ReadonlyArray<ReturnType<typeof takeKind>>,
  tokens: readonly Buffer[],
  o: {
    isolationLevel: IsolationLevel | undefined;
    intentMs: number;
    history: boolean;
    waiting: <R>(t: SectionTarget, sql: string) => Promise<R>;
  },
): Promise<Taken> {
  const { waiting, intentMs } = o;
  for (const [i, t] of targets.entries()) {
    if (kinds[i] === 'unguarded') continue;
    const gate = kinds[i] === 'readShared' && takeLetter(kinds[i]!, o.isolationLevel) === 's' ? 'shared' : 'exclusive';
    if ((await waiting<unknown[]>(t, GATE_TAKE[gate])).length !== 1) throw new Refused(t, 'gate');
  }
  for (const [i, t] of targets.entries()) {
    const kind = kinds[i]!;
    if (kind === 'readShared' && !testSwitches.section.lockRowShared) continue;
    let taken: boolean;
    if (kind === 'write' || kind === 'readExclusive') {
      taken = (await waiting<{ affectedRows: number }>(t, TAKE[kind])).affectedRows === 1;
    } else {
      const sql = kind === 'unguarded' ? UNGUARDED : READ_LOCKING_ROW;
      taken = (await waiting<unknown[]>(t, sql)).length === 1;
    }
    if (taken) continue;
    const exists = (await query<unknown[]>(conn, ROW_EXISTS, [t.resource])).length === 1;
    if (exists && t.mode === 'write' && intentMs > 0) {
      // As a durable writer: mark the intent, so new readers hold back while it waits.
      await query(conn, WRITER_INTENT, [intentMs * 1000, t.resource, intentMs * 500]);
      return { refused: t };
    }
    throw new Refused(t, exists ? null : 'row');
  }
  for (const [i, t] of targets.entries()) {
    if (kinds[i] !== 'readShared' || testSwitches.section.lockRowShared) continue;
    const [row] = await query<Array<{ free: number | string | null }>>(conn, READ_DECISION, [t.resource]);
    if (row === undefined) throw new Refused(t, 'row');
    if (Number(row.free) !== 1) throw new Refused(t, null);
  }
  if (!server.mariadb) await query(conn, RESTORE_LOCK_WAIT);
  const ids: number[] = [];
  if (o.history)
    for (const [i, t] of targets.entries())
      ids.push(await logSection(conn, t.resource, t.mode, ctx.ownerBytes, tokens[i]!));
  return { ids };
}

/** The negative control's take: any existing row, no lock. */
const UNGUARDED = 'SELECT 1 AS taken FROM t_read_write_lock WHERE resource_id = ?';
