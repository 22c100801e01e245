// The failover verdict on hand-made histories: an acknowledged row missing on the new primary is a
// loss inside the window and a violation outside it; a failed op whose row is there stays a
// violation; a business row under a reissued grant id is caught.
// covers: test/faults/failover.ts
import { describe, expect, it } from 'vitest';
import { check, type DbState, type GrantRow } from '../faults/checker.js';
import { judgeFailover } from '../faults/failover.js';
import type { OpEvent } from '../faults/history.js';

const g = (id: number, createdMs: number, releasedMs: number | null, owner = 'w1', resource = 'r1'): GrantRow => ({
  id,
  resource,
  type: 0,
  status: releasedMs === null ? 0 : 2,
  createdMs,
  releasedMs,
  releasedBy: releasedMs === null ? null : 1,
  owner,
});

/** Events of one write op of worker `w`, at the times given (ok last). */
function write(
  op: string,
  grant: number,
  times: [number, number, number, number],
  outcome: OpEvent['ev'] = 'ok',
  w = 'w1',
): OpEvent[] {
  const evs: OpEvent['ev'][] = ['invoke', 'granted', 'work-done', outcome];
  return evs.map((ev, i) => ({
    t: times[i]!,
    w,
    op,
    kind: 'write',
    resource: 'r1',
    ev,
    ...(ev === 'granted' || ev === 'work-done' ? { grant } : {}),
  }));
}

/**
 * Ops a (grant 1), b (grant 2) and c (grant 3) acknowledged at 110, 210 and 310 on the old primary;
 * the new primary applied a and b only (the primary died at 320); d ran on the new primary after
 * it became writable at 400, and was given id 3 again.
 */
function failover(): { events: OpEvent[]; db: DbState } {
  return {
    events: [
      ...write('a', 1, [100, 101, 109, 110]),
      ...write('b', 2, [200, 201, 209, 210]),
      ...write('c', 3, [300, 301, 309, 310]),
      ...write('d', 3, [500, 501, 509, 510], 'ok', 'w2'),
    ],
    db: {
      grants: [g(1, 101, 109), g(2, 201, 209), g(3, 501, 509, 'w2')],
      locks: [{ resource: 'r1', w: 0, r: 0 }],
      effects: [
        { op: 'a', resource: 'r1', grant: 1, prev: 0, next: 1, atMs: 108 },
        { op: 'b', resource: 'r1', grant: 2, prev: 1, next: 2, atMs: 208 },
        { op: 'd', resource: 'r1', grant: 3, prev: 2, next: 3, atMs: 508 },
      ],
      reads: [],
      counters: [{ resource: 'r1', value: 3 }],
    },
  };
}

describe('failover verdict', () => {
  it('counts an op acknowledged inside the window and missing on the new primary as lost, not as a violation', () => {
    const { events, db } = failover();
    const plain = check({ events, db });
    expect(plain.violations.map((v) => v.detail)).toEqual(['write c was acknowledged but its business row is missing']);
    const { result, losses } = judgeFailover(plain, events, db, { from: 250, to: 400 });
    expect(result.violations).toEqual([]);
    expect(losses.acknowledgedLost).toEqual(['c']);
    expect(losses.grantsLost).toEqual([3]);
    expect(losses.idsReissued).toEqual([3]);
    expect(losses.releasedByOthers).toEqual([]);
  });

  it('counts a downgrade acknowledged inside the window and missing on the new primary as lost; outside it, a violation', () => {
    const { events, db } = failover();
    // b downgraded grant 2 at 260 (inside the window); the new primary still shows it a write grant.
    const inside = [
      ...events,
      { t: 260, w: 'w1', op: 'b', kind: 'write' as const, resource: 'r1', ev: 'downgraded' as const, grant: 2 },
    ];
    const plain = check({ events: inside, db });
    expect(plain.violations.map((v) => v.check)).toContain('transition');
    const judged = judgeFailover(plain, inside, db, { from: 250, to: 400 });
    expect(judged.result.violations).toEqual([]);
    expect(judged.losses.modeChangesLost).toBe(1);
    // The same downgrade acknowledged at 240, before the window: the replica had applied it, so its absence is a violation.
    const before = [
      ...events,
      { t: 240, w: 'w1', op: 'b', kind: 'write' as const, resource: 'r1', ev: 'downgraded' as const, grant: 2 },
    ];
    const r = judgeFailover(check({ events: before, db }), before, db, { from: 250, to: 400 });
    expect(r.result.violations.map((v) => v.detail)).toEqual([
      'b: grant 2 was downgraded, but the log shows a write grant that never changed mode',
    ]);
    expect(r.losses.modeChangesLost).toBe(0);
  });

  it('counts a grant released as by its holder while its holder found it gone', () => {
    const { events, db } = failover();
    // e held grant 4 on the new primary; c's stale release (reissued id) released it; e's fence was refused.
    events.push(
      ...write('e', 4, [520, 521, 529, 530], 'fail', 'w3').map((x) =>
        x.ev === 'fail' ? { ...x, err: 'ERR_RWLOCK_LOST' } : x,
      ),
    );
    db.grants.push(g(4, 521, 525, 'w3'));
    expect(judgeFailover(check({ events, db }), events, db, { from: 250, to: 400 }).losses.releasedByOthers).toEqual([
      4,
    ]);
  });

  it('still fails the same loss when it was acknowledged before the window or after the promotion', () => {
    const { events, db } = failover();
    const plain = check({ events, db });
    // The replica was seen to apply a position read at 320: c, acknowledged at 310, must be there.
    expect(judgeFailover(plain, events, db, { from: 320, to: 400 }).result.violations.map((v) => v.check)).toEqual([
      'ack',
    ]);
    // An op acknowledged after the replica became writable committed on the new primary: missing is a violation.
    const late = failover();
    late.db.effects.pop();
    late.db.counters = [{ resource: 'r1', value: 2 }];
    const r = judgeFailover(check(late), late.events, late.db, { from: 250, to: 400 });
    expect(r.result.violations.map((v) => v.detail)).toEqual([
      'write d was acknowledged but its business row is missing',
    ]);
    expect(r.losses.acknowledgedLost).toEqual(['c']);
  });

  it('still fails a failed op whose row is present, and keeps the other checks', () => {
    const { events, db } = failover();
    const failed = events.map((e) => (e.op === 'b' && e.ev === 'ok' ? { ...e, ev: 'fail' as const } : e));
    const r = judgeFailover(check({ events: failed, db }), failed, db, { from: 250, to: 400 });
    expect(r.result.violations.map((v) => v.check)).toEqual(['ack']);
    expect(r.result.violations[0]!.detail).toMatch(/write b failed/);
    const overlap = failover();
    overlap.db.grants[1] = g(2, 105, 209); // created while grant 1 was live
    expect(
      judgeFailover(check(overlap), overlap.events, overlap.db, { from: 250, to: 400 }).result.violations.map(
        (v) => v.check,
      ),
    ).toEqual(['overlap']);
  });

  it('fails a business row committed under a reissued id that belongs to another worker', () => {
    const { events, db } = failover();
    // c's stale holder committed on the new primary under "grant 3", which there is d's.
    db.effects.push({ op: 'c', resource: 'r1', grant: 3, prev: 3, next: 4, atMs: 505 });
    db.counters = [{ resource: 'r1', value: 4 }];
    const plain = check({ events, db });
    expect(plain.violations).toEqual([]); // the id matches: the plain checker cannot tell
    const r = judgeFailover(plain, events, db, { from: 250, to: 400 });
    expect(r.result.violations.map((v) => v.check)).toEqual(['fence']);
    expect(r.result.violations[0]!.detail).toMatch(/names grant 3, which this database holds as w2's/);
  });

  it('does not let losses push a real ack violation out of the per-check limit', () => {
    const { events, db } = failover();
    for (let k = 0; k < 25; k++) events.push(...write(`lost${k}`, 100 + k, [300, 301, 302, 303]));
    events.push(...write('early', 99, [10, 11, 12, 13])); // acknowledged before the window, row missing
    const plain = check({ events, db });
    expect(plain.violations.filter((v) => v.check === 'ack')).toHaveLength(20);
    const r = judgeFailover(plain, events, db, { from: 250, to: 400 });
    expect(r.result.violations.map((v) => v.detail)).toEqual([
      'write early was acknowledged but its business row is missing',
    ]);
    expect(r.losses.acknowledgedLost).toHaveLength(26);
  });
});
