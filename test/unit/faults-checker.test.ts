// The checker on hand-made histories and database states: clean ones pass, each broken one fails
// with the check that names its defect.
// covers: test/faults/checker.ts
import { describe, expect, it } from 'vitest';
import { check, deadlockViolations, type CheckName, type DbState, type GrantRow } from '../faults/checker.js';
import type { OpEvent } from '../faults/history.js';

const g = (
  id: number,
  type: 0 | 1,
  createdMs: number,
  releasedMs: number | null,
  releasedBy: number | null = releasedMs === null ? null : 1,
  resource = 'r1',
): GrantRow => ({
  id,
  resource,
  type,
  status: releasedMs === null ? 0 : 2,
  createdMs,
  releasedMs,
  releasedBy,
  owner: 'w',
});

function ev(op: string, kind: 'write' | 'read', list: Array<[OpEvent['ev'], number?]>): OpEvent[] {
  return list.map(([e, grant], i) => ({
    t: i,
    w: 'w1',
    op,
    kind,
    resource: 'r1',
    ev: e,
    ...(grant !== undefined ? { grant } : {}),
  }));
}

/** Two writes and a read, all clean. */
function clean(): { events: OpEvent[]; db: DbState } {
  return {
    events: [
      ...ev('a', 'write', [['invoke'], ['granted', 1], ['work-done'], ['ok']]),
      ...ev('b', 'write', [['invoke'], ['granted', 2], ['work-done'], ['ok']]),
      ...ev('c', 'read', [['invoke'], ['granted', 3], ['work-done'], ['ok']]),
    ],
    db: {
      grants: [g(1, 0, 100, 110), g(2, 0, 110.5, 120), g(3, 1, 121, 130)],
      locks: [{ resource: 'r1', w: 0, r: 0 }],
      effects: [
        { op: 'a', resource: 'r1', grant: 1, prev: 0, next: 1, atMs: 109 },
        { op: 'b', resource: 'r1', grant: 2, prev: 1, next: 2, atMs: 119 },
      ],
      reads: [{ op: 'c', resource: 'r1', grant: 3, seen: 2, seenAgain: 2, atMs: 129 }],
      counters: [{ resource: 'r1', value: 2 }],
    },
  };
}

const checksOf = (r: ReturnType<typeof check>): CheckName[] => [...new Set(r.violations.map((v) => v.check))];

describe('checker', () => {
  it('passes a clean history and counts its operations', () => {
    const { events, db } = clean();
    const r = check({
      events,
      db,
      samples: [{ t: 1, locks: [{ resource: 'r1', w: 1, r: 0 }], live: [{ resource: 'r1', type: 0, n: 1 }] }],
    });
    expect(r.violations).toEqual([]);
    expect(r.lockOps).toBe(6);
    expect(r.ops).toEqual({ 'write.ok': 2, 'read.ok': 1 });
  });

  it('fails counts that disagree with the live grants, at the end or at a sample', () => {
    const { events, db } = clean();
    db.locks = [{ resource: 'r1', w: 1, r: 0 }];
    expect(checksOf(check({ events, db }))).toEqual(['invariant']);
    const ok = clean();
    const sampled = check({
      ...ok,
      samples: [
        {
          t: 5,
          locks: [{ resource: 'r1', w: 1, r: 1 }],
          live: [
            { resource: 'r1', type: 0, n: 1 },
            { resource: 'r1', type: 1, n: 1 },
          ],
        },
      ],
    });
    expect(sampled.violations).toHaveLength(1);
    expect(sampled.violations[0]!.detail).toMatch(/writer and 1 readers/);
    const negative = check({ ...ok, samples: [{ t: 5, locks: [{ resource: 'r1', w: 0, r: -1 }], live: [] }] });
    expect(checksOf(negative)).toEqual(['invariant']);
    const orphan = check({ ...ok, samples: [{ t: 5, locks: [], live: [{ resource: 'r1', type: 1, n: 2 }] }] });
    expect(orphan.violations[0]!.detail).toMatch(/no lock row/);
  });

  it('fails overlapping write grants and a write overlapping a read', () => {
    const { events, db } = clean();
    db.grants[1] = g(2, 0, 105, 120); // created before grant 1 was released at 110
    expect(checksOf(check({ events, db }))).toEqual(['overlap']);
    const r = clean();
    r.db.grants[2] = g(3, 1, 115, 130); // read created while write 2 live
    expect(checksOf(check(r))).toEqual(['overlap']);
    const live = clean();
    live.db.grants.push(g(4, 0, 200, null), g(5, 0, 300, null)); // both still live
    live.db.locks = [{ resource: 'r1', w: 1, r: 0 }];
    expect(checksOf(check(live))).toContain('overlap');
  });

  it('does not call grants of different resources or back-to-back grants overlapping', () => {
    const { events, db } = clean();
    db.grants.push(g(9, 0, 101, 109, 1, 'r2'));
    db.counters.push({ resource: 'r2', value: 0 });
    db.locks.push({ resource: 'r2', w: 0, r: 0 });
    db.grants[1] = g(2, 0, 110, 120); // starts exactly when 1 ends
    expect(check({ events, db }).violations).toEqual([]);
  });

  it('fails a lost update: two effects that read the same value', () => {
    const { events, db } = clean();
    db.effects[1] = { op: 'b', resource: 'r1', grant: 2, prev: 0, next: 1, atMs: 119 };
    db.counters = [{ resource: 'r1', value: 1 }];
    const r = check({ events, db });
    expect(checksOf(r)).toEqual(['lost-update']);
    expect(r.violations.map((v) => v.detail).join('\n')).toMatch(/2 effects read 0/);
  });

  it('fails a counter that disagrees with its chain, and a gap in the chain', () => {
    const { events, db } = clean();
    db.counters = [{ resource: 'r1', value: 3 }];
    expect(checksOf(check({ events, db }))).toEqual(['lost-update']);
    const gap = clean();
    gap.db.effects[1] = { op: 'b', resource: 'r1', grant: 2, prev: 2, next: 3, atMs: 119 };
    expect(
      check(gap)
        .violations.map((v) => v.detail)
        .join('\n'),
    ).toMatch(/no effect from 1/);
  });

  it('fails a reader that saw the value change under its read grant', () => {
    const { events, db } = clean();
    db.reads[0] = { ...db.reads[0]!, seenAgain: 3 };
    expect(checksOf(check({ events, db }))).toEqual(['read-stability']);
  });

  it('fails a business effect committed after its grant was reaped, not one committed before', () => {
    const { events, db } = clean();
    db.grants[1] = g(2, 0, 110.5, 115, 2); // reaped at 115, effect at 119
    expect(checksOf(check({ events, db }))).toEqual(['fence']);
    const before = clean();
    before.db.grants[1] = g(2, 0, 110.5, 120.8, 2); // reaped after the effect (unfenced holder died before releasing)
    expect(check(before).violations).toEqual([]);
    const unfenced = clean();
    unfenced.db.grants[2] = g(3, 1, 121, 125, 2); // read committed at 129 after the reap at 125
    expect(checksOf(check(unfenced))).toEqual(['fence']);
    unfenced.db.reads[0] = { ...unfenced.db.reads[0]!, fenced: false }; // acquire + release path: no fence promised
    expect(check(unfenced).violations).toEqual([]);
    const missing = clean();
    missing.db.effects[0] = { ...missing.db.effects[0]!, grant: 77 };
    expect(checksOf(check(missing))).toContain('fence');
    const readGrant = clean();
    readGrant.db.effects[0] = { ...readGrant.db.effects[0]!, grant: 3 };
    expect(check(readGrant).violations.some((v) => /under read grant/.test(v.detail))).toBe(true);
  });

  it('fails an acknowledged op without its row, and a failed op whose row committed', () => {
    const { events, db } = clean();
    db.effects.pop();
    db.counters = [{ resource: 'r1', value: 1 }];
    expect(check({ events, db }).violations.map((v) => v.detail)).toContain(
      'write b was acknowledged but its business row is missing',
    );
    const failed = clean();
    failed.events = failed.events.map((e) =>
      e.op === 'b' && e.ev === 'ok' ? { ...e, ev: 'fail' as const, err: 'NO_PRIMARY' } : e,
    );
    expect(checksOf(check(failed))).toEqual(['ack']);
    // the violation says how far the operation got, and when, so a rare one can be traced from the summary
    expect(check(failed).violations[0]!.detail).toBe(
      'write b failed (NO_PRIMARY) but its business row (grant 2) committed; its events: invoke +0ms, granted 2 +1ms, work-done +2ms, fail (NO_PRIMARY) +3ms',
    );
  });

  it('accepts either outcome for unknown ops and for ops cut off by a kill', () => {
    const { events, db } = clean();
    const unknown = events.map((e) => (e.op === 'b' && e.ev === 'ok' ? { ...e, ev: 'unknown' as const } : e));
    expect(check({ events: unknown, db }).violations).toEqual([]);
    const killed = events.filter((e) => !(e.op === 'a' && e.ev === 'ok'));
    expect(check({ events: killed, db }).violations).toEqual([]);
    expect(check({ events: killed, db }).ops['write.unknown']).toBe(1);
    const absent = clean();
    absent.events = absent.events.filter((e) => !(e.op === 'b' && e.ev === 'ok'));
    absent.db.effects.pop();
    absent.db.counters = [{ resource: 'r1', value: 1 }];
    expect(check(absent).violations).toEqual([]);
  });

  it('fails two rows for one op, a row under a grant the worker did not hold, and a row nobody invoked', () => {
    const { events, db } = clean();
    db.effects.push({ op: 'b', resource: 'r1', grant: 2, prev: 2, next: 3, atMs: 119.5 });
    db.counters = [{ resource: 'r1', value: 3 }];
    expect(check({ events, db }).violations.map((v) => v.detail)).toContain('b: 2 business rows for one operation');
    const other = clean();
    other.events = other.events.map((e) => (e.op === 'b' && e.ev === 'granted' ? { ...e, grant: 1 } : e));
    expect(check(other).violations.some((v) => /worker held 1/.test(v.detail))).toBe(true);
    const ghost = clean();
    ghost.events = ghost.events.filter((e) => e.op !== 'a');
    expect(check(ghost).violations.some((v) => /no worker invoked/.test(v.detail))).toBe(true);
  });

  it('counts a committed manual read as acknowledged even when its release failed', () => {
    const { events, db } = clean();
    const manual = events.map((e) => (e.op === 'c' && e.ev === 'ok' ? { ...e, ev: 'fail' as const } : e));
    manual.push({ t: 9, w: 'w1', op: 'c', kind: 'read', resource: 'r1', ev: 'commit-ok' });
    expect(check({ events: manual, db }).violations).toEqual([]);
  });

  it('fails liveness when resources stay held past the bound or never free up', () => {
    const { events, db } = clean();
    expect(check({ events, db, liveness: { holdersGoneAt: 0, freeAt: 2000, boundMs: 3000 } }).violations).toEqual([]);
    expect(checksOf(check({ events, db, liveness: { holdersGoneAt: 0, freeAt: 4000, boundMs: 3000 } }))).toEqual([
      'liveness',
    ]);
    expect(checksOf(check({ events, db, liveness: { holdersGoneAt: 0, freeAt: null, boundMs: 3000 } }))).toEqual([
      'liveness',
    ]);
  });

  describe('grants that change mode in place', () => {
    /** Op a writes under grant 1, then downgrades it at 105 and reads; op b reads under grant 2. */
    function downgraded(): { events: OpEvent[]; db: DbState } {
      return {
        events: [
          ...ev('a', 'write', [['invoke'], ['granted', 1], ['downgraded', 1], ['work-done', 1], ['ok']]),
          ...ev('b', 'read', [['invoke'], ['granted', 2], ['work-done'], ['ok']]),
        ],
        db: {
          grants: [{ ...g(1, 1, 100, 120), modeChangedMs: 105 }, g(2, 1, 106, 115)],
          locks: [{ resource: 'r1', w: 0, r: 0 }],
          effects: [],
          reads: [
            { op: 'a', resource: 'r1', grant: 1, seen: 0, seenAgain: 0, atMs: 110 },
            { op: 'b', resource: 'r1', grant: 2, seen: 0, seenAgain: 0, atMs: 114 },
          ],
          counters: [{ resource: 'r1', value: 0 }],
        },
      };
    }

    it('passes readers that join after a downgrade', () => {
      expect(check(downgraded()).violations).toEqual([]);
    });

    it('fails a reader in the write phase, and a writer in the read phase, of a downgraded grant', () => {
      const early = downgraded();
      early.db.grants[1] = g(2, 1, 103, 115);
      expect(check(early).violations.map((v) => v.detail)).toEqual([
        'r1: read grant 2 started while write phase of grant 1 (downgraded) was live',
      ]);
      const writer = downgraded();
      writer.db.grants[1] = g(2, 0, 110, 115);
      writer.events = writer.events.map((e) => (e.op === 'b' ? { ...e, kind: 'write' as const } : e));
      expect(checksOf(check(writer))).toEqual(['overlap']);
    });

    it("fails an upgrade beside another reader, and a write effect in an upgraded grant's read phase", () => {
      const ok = {
        events: [
          ...ev('a', 'read', [['invoke'], ['granted', 1], ['upgraded', 1], ['work-done', 1], ['ok']]),
          ...ev('b', 'read', [['invoke'], ['granted', 2], ['work-done'], ['ok']]),
        ],
        db: {
          grants: [{ ...g(1, 0, 100, 120), modeChangedMs: 110 }, g(2, 1, 101, 109)],
          locks: [{ resource: 'r1', w: 0, r: 0 }],
          effects: [{ op: 'a', resource: 'r1', grant: 1, prev: 0, next: 1, atMs: 115 }],
          reads: [{ op: 'b', resource: 'r1', grant: 2, seen: 0, seenAgain: 0, atMs: 108 }],
          counters: [{ resource: 'r1', value: 1 }],
        } satisfies DbState,
      };
      expect(check(ok).violations).toEqual([]);
      const beside = structuredClone(ok);
      beside.db.grants[1] = g(2, 1, 101, 112);
      expect(check(beside).violations.map((v) => v.detail)).toEqual([
        'r1: write phase of grant 1 (upgraded) started while read grant 2 was live',
      ]);
      const early = structuredClone(ok);
      early.db.effects[0]!.atMs = 105;
      expect(check(early).violations.map((v) => v.detail)).toEqual([
        'effect of a under read grant 1 (in its read phase)',
      ]);
    });

    it('fails a mode change the worker was told of but the log does not show, and two changes of one grant', () => {
      const missing = downgraded();
      missing.db.grants[0] = g(1, 0, 100, 120);
      expect(
        check(missing)
          .violations.filter((v) => v.check === 'transition')
          .map((v) => v.detail),
      ).toEqual(['a: grant 1 was downgraded, but the log shows a write grant that never changed mode']);
      const twice = downgraded();
      twice.events.push({ t: 9, w: 'w1', op: 'a', kind: 'write', resource: 'r1', ev: 'downgraded', grant: 1 });
      expect(check(twice).violations.map((v) => v.detail)).toEqual([
        'grant 1 changed mode 2 times; the log keeps one change',
      ]);
    });
  });

  describe('sections and operations on several resources', () => {
    const at = (t: number, op: string, ev: OpEvent['ev'], extra: Partial<OpEvent> = {}): OpEvent => ({
      t,
      w: 'w',
      op,
      kind: 'write',
      resource: 'r1',
      ev,
      ...extra,
    });

    /** A durable write (grant 1, 100..110), then a write section (111..115) and a read section (116..118). */
    function withSections(): { events: OpEvent[]; db: DbState } {
      const { events, db } = clean();
      events.push(
        at(0, 's1', 'invoke', { section: true }),
        at(1, 's1', 'ok'),
        at(2, 's2', 'invoke', { kind: 'read', section: true }),
        at(3, 's2', 'ok', { kind: 'read' }),
      );
      db.grants = [g(1, 0, 100, 110), g(2, 0, 119, 125), g(3, 1, 126, 130)];
      db.effects = [
        { op: 'a', resource: 'r1', grant: 1, prev: 0, next: 1, atMs: 109 },
        { op: 's1', resource: 'r1', grant: 0, prev: 1, next: 2, atMs: 115, fromMs: 111, section: true },
        { op: 'b', resource: 'r1', grant: 2, prev: 2, next: 3, atMs: 124 },
      ];
      db.reads = [
        { op: 's2', resource: 'r1', grant: 0, seen: 2, seenAgain: 2, atMs: 118, fromMs: 116, section: true },
        { op: 'c', resource: 'r1', grant: 3, seen: 3, seenAgain: 3, atMs: 129 },
      ];
      db.counters = [{ resource: 'r1', value: 3 }];
      return { events, db };
    }

    it('passes sections between grants, and counts them apart', () => {
      const r = check(withSections());
      expect(r.violations).toEqual([]);
      expect(r.ops).toEqual({ 'write.ok': 2, 'read.ok': 1, 'write.section.ok': 1, 'read.section.ok': 1 });
    });

    it("fails a section whose span meets a write grant's, or another section's in a conflicting mode", () => {
      const inGrant = withSections();
      inGrant.db.effects[1]!.fromMs = 108; // its first statement ran while grant 1 was live
      expect(checksOf(check(inGrant))).toEqual(['overlap']);
      const sections = withSections();
      sections.db.reads[0]!.fromMs = 114; // the read section started before the write section's last statement
      expect(check(sections).violations.map((v) => v.detail)).toEqual([
        'r1: read section s2 started while write section s1 ran',
      ]);
      const reads = withSections();
      reads.db.reads.push({ ...reads.db.reads[0]!, op: 's3', fromMs: 117 });
      reads.events.push(at(4, 's3', 'invoke', { kind: 'read', section: true }), at(5, 's3', 'ok', { kind: 'read' }));
      expect(check(reads).violations).toEqual([]); // two reading sections share
    });

    /** Op m: a transfer from r1 to r2 under grants 1 and 2, taken in that order. */
    function transfer(): { events: OpEvent[]; db: DbState } {
      return {
        events: [
          at(0, 'm', 'invoke', { resources: ['r1', 'r2'] }),
          at(1, 'm', 'granted', { grant: 1 }),
          at(1, 'm', 'granted', { grant: 2, resource: 'r2' }),
          at(2, 'm', 'ok'),
        ],
        db: {
          grants: [g(1, 0, 100, 110), g(2, 0, 100.5, 110, 1, 'r2')],
          locks: [
            { resource: 'r1', w: 0, r: 0 },
            { resource: 'r2', w: 0, r: 0 },
          ],
          effects: [
            { op: 'm', resource: 'r1', grant: 1, prev: 0, next: 1, atMs: 109 },
            { op: 'm', resource: 'r2', grant: 2, prev: 0, next: 1, atMs: 109 },
          ],
          reads: [],
          counters: [
            { resource: 'r1', value: 1 },
            { resource: 'r2', value: 1 },
          ],
        },
      };
    }

    it('passes an operation on two resources with a row on each, and counts it apart', () => {
      const r = check(transfer());
      expect(r.violations).toEqual([]);
      expect(r.ops).toEqual({ 'write.2-resource.ok': 1 });
    });

    it('fails it on every resource it names: a missing row, or a row under a reaped grant past the first', () => {
      const half = transfer();
      half.db.effects.pop();
      half.db.counters[1]!.value = 0;
      expect(check(half).violations.map((v) => v.detail)).toEqual([
        'm named 2 resources but committed 1 business rows (r1)',
      ]);
      const reaped = transfer();
      reaped.db.grants[1] = g(2, 0, 100.5, 105, 2, 'r2');
      expect(checksOf(check(reaped))).toEqual(['fence']);
    });

    it('fails resources taken out of order, and two operations each holding what the other waited for', () => {
      const reversed = transfer();
      reversed.db.grants = [g(1, 0, 100, 110, 1, 'r2'), g(2, 0, 100.5, 110, 1, 'r1')];
      reversed.events[1] = at(1, 'm', 'granted', { grant: 2 });
      reversed.events[2] = at(1, 'm', 'granted', { grant: 1, resource: 'r2' });
      reversed.db.effects = [
        { op: 'm', resource: 'r1', grant: 2, prev: 0, next: 1, atMs: 109 },
        { op: 'm', resource: 'r2', grant: 1, prev: 0, next: 1, atMs: 109 },
      ];
      expect(check(reversed).violations.map((v) => v.detail)).toEqual(['m took r2, r1 in that order (grants 1, 2)']);
      const crossed: OpEvent[] = [
        at(0, 'x1', 'granted', { resource: 'r1', grant: 1 }),
        at(1, 'y1', 'granted', { resource: 'r2', grant: 2 }),
        at(2, 'x1', 'waiting', { resource: 'r2' }),
        at(3, 'y1', 'waiting', { resource: 'r1' }),
        at(9, 'x1', 'fail', { err: 'ERR_RWLOCK_TIMEOUT' }),
        at(10, 'y1', 'fail', { err: 'ERR_RWLOCK_TIMEOUT' }),
      ];
      expect(deadlockViolations(crossed).map((v) => v.detail)).toEqual([
        'x1 held r1 and waited for r2 while y1 held r2 and waited for r1',
      ]);
      // The same waits one after the other are no deadlock, nor is a wait that ended in a grant before the other began.
      const apart = crossed.map((e) => (e.op === 'y1' ? { ...e, t: e.t + 10 } : e));
      expect(deadlockViolations(apart)).toEqual([]);
      const granted = [
        ...crossed.slice(0, 3),
        at(2.5, 'x1', 'granted', { resource: 'r2', grant: 3 }),
        ...crossed.slice(3),
      ];
      expect(deadlockViolations(granted)).toEqual([]);
    });
  });
});

describe('permits: never more than N holders of a semaphore', () => {
  const permit = (id: number, createdMs: number, releasedMs: number | null, permits = 1): GrantRow => ({
    ...g(id, 1, createdMs, releasedMs, undefined, 'sem'),
    permits,
  });
  const sem = (grants: GrantRow[], limit = 2): DbState => {
    const live = grants.filter((x) => x.status === 0).reduce((n, x) => n + (x.permits ?? 1), 0);
    return { grants, locks: [{ resource: 'sem', w: 0, r: live, limit }], effects: [], reads: [], counters: [] };
  };
  const permitChecks = (db: DbState): CheckName[] => [
    ...new Set(check({ events: [], db }).violations.map((v) => v.check)),
  ];

  it('passes holders within the limit, one taking over where another was released', () => {
    expect(permitChecks(sem([permit(1, 0, 10), permit(2, 1, 5), permit(3, 5, 12), permit(4, 10, null)]))).toEqual([]);
    expect(permitChecks(sem([permit(1, 0, 10, 2), permit(2, 10, 20, 2)]))).toEqual([]);
  });

  it('negative controls: three holders of a semaphore of 2, two permits beside one, a reader beside a permit', () => {
    expect(permitChecks(sem([permit(1, 0, 10), permit(2, 1, 10), permit(3, 2, 10)]))).toEqual(['permits']);
    expect(permitChecks(sem([permit(1, 0, 10, 2), permit(2, 5, 20)]))).toEqual(['permits']);
    expect(permitChecks(sem([permit(1, 0, 10), g(2, 1, 5, 8, undefined, 'sem')]))).toEqual(['permits']);
  });

  describe('a limit that changes mid-run (each grant with the limit its operation asked for)', () => {
    const asked = (limits: Record<number, number>): OpEvent[] =>
      Object.entries(limits).map(([grant, limit]) => ({
        t: 0,
        w: 'w1',
        op: `w1-${grant}`,
        kind: 'permit',
        resource: 'sem',
        ev: 'granted',
        grant: Number(grant),
        limit,
      }));
    const changed = (db: DbState, limits: Record<number, number>): CheckName[] => [
      ...new Set(check({ events: asked(limits), db }).violations.map((v) => v.check)),
    ];

    it('passes the new limit once the old holders are gone, three holders of a semaphore of 3', () => {
      const grants = [permit(1, 0, 10), permit(2, 1, 10), permit(3, 10, 20), permit(4, 11, 20), permit(5, 12, 20)];
      expect(changed(sem(grants, 3), { 1: 2, 2: 2, 3: 3, 4: 3, 5: 3 })).toEqual([]);
    });

    it('negative controls: a grant of a new limit beside a live one of the old; three holders beside a limit of 2', () => {
      // One permit of each limit: within both, caught only by the limits disagreeing.
      expect(changed(sem([permit(1, 0, 10), permit(2, 5, 20)], 3), { 1: 2, 2: 3 })).toEqual(['permits']);
      // Three permits under grants that all say 3 but the semaphore row says 2 would pass; one that says 2 does not.
      const three = [permit(1, 0, 10), permit(2, 1, 10), permit(3, 2, 10)];
      expect(changed(sem(three, 3), { 1: 3, 2: 3, 3: 3 })).toEqual([]);
      expect(changed(sem(three, 3), { 1: 2, 2: 2, 3: 2 })).toEqual(['permits']);
    });
  });
});
