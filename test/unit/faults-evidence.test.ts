// Fault evidence read from the record: which reaped grants prove reapers contending, and which
// grants prove a reaper racing the holder's final commit. Counted only when the record shows it.
// covers: test/faults/scenario.ts
import { describe, expect, it } from 'vitest';
import type { GrantRow } from '../faults/checker.js';
import type { OpEvent, ReaperRun } from '../faults/history.js';
import { reaperEvidence } from '../faults/scenario.js';

const STALE = 2000;
const grant = (id: number, releasedMs: number, releasedBy: number): GrantRow => ({
  id,
  resource: 'r',
  type: 0,
  status: 2,
  createdMs: 1000,
  releasedMs,
  releasedBy,
  owner: 'w',
});
const state = (grants: GrantRow[]) => ({ grants, locks: [], effects: [], reads: [], counters: [] });
const run = (reaper: string, start: number, end: number, reaped: number[] = []): ReaperRun => ({
  reaper,
  start,
  end,
  reaped,
  skipped: 0,
});
const workDone = (g: number, t: number): OpEvent => ({
  t,
  w: 'w',
  op: `op${g}`,
  kind: 'write',
  resource: 'r',
  ev: 'work-done',
  grant: g,
});

describe('reaper evidence', () => {
  it('counts a grant reaped by one reaper while another, started after it went stale, was running', () => {
    const runs = [run('a', 3500, 3510, [1]), run('b', 3501, 3508)];
    expect(reaperEvidence(state([grant(1, 3505, 2)]), runs, [], STALE).map((f) => f.kind)).toEqual([
      'concurrent-reapers',
    ]);
  });

  it('does not count a reaper alone, nor another round that began before the grant was stale', () => {
    expect(reaperEvidence(state([grant(1, 3505, 2)]), [run('a', 3500, 3510, [1])], [], STALE)).toEqual([]);
    expect(
      reaperEvidence(state([grant(1, 3505, 2)]), [run('a', 3500, 3510, [1]), run('b', 2990, 3502)], [], STALE),
    ).toEqual([]);
  });

  it('counts the reaper winning after the holder finished its work, not before', () => {
    const runs = [run('a', 3500, 3510, [1])];
    expect(reaperEvidence(state([grant(1, 3505, 2)]), runs, [workDone(1, 3499)], STALE).map((f) => f.detail)).toEqual([
      'reaper won',
    ]);
    expect(reaperEvidence(state([grant(1, 3505, 2)]), runs, [workDone(1, 3600)], STALE)).toEqual([]);
  });

  it('counts the holder winning while a reaper round that saw the grant stale was running', () => {
    const g = grant(1, 3505, 1);
    expect(reaperEvidence(state([g]), [run('a', 3500, 3510)], [workDone(1, 3498)], STALE).map((f) => f.detail)).toEqual(
      ['holder won'],
    );
    // released before it went stale, or no reaper round around the release: no race
    expect(reaperEvidence(state([grant(1, 2900, 1)]), [run('a', 3500, 3510)], [workDone(1, 2899)], STALE)).toEqual([]);
    expect(reaperEvidence(state([g]), [run('a', 4000, 4010)], [workDone(1, 3498)], STALE)).toEqual([]);
  });
});
