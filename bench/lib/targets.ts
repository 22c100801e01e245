// Targets are data: a ratio between two measured values (found by case id and metric), and a goal.
// They are all evaluated and printed here; a target not met is reported, never an error.
import type { Results } from './family.js';

/** A measured value: a case id (with its concurrency for round cases) and a metric (default ops/s). */
export interface Ref {
  case: string;
  c?: number;
  metric?: string;
}

export interface Target {
  /** Sort key and name: what it measures, e.g. 'section/plain c=1' (a section ÷ the plain transaction, 1 worker). */
  id: string;
  label: string;
  /** The value is `of ÷ (factor × per)`, or `of` alone when there is no `per`. */
  of: Ref;
  per?: Ref;
  factor?: number;
  atLeast?: number;
  atMost?: number;
}

export interface Evaluated {
  id: string;
  label: string;
  value: number | undefined;
  goal: string;
  verdict: 'met' | 'not met' | 'info' | 'n/a' | 'skipped';
  /** Why there is no value: the skipped case's reason, or the values this run did not measure. */
  reason?: string;
  /** The run it was measured in: the name of that run's JSON report (bench/results/<run>.json). */
  run: string;
}

function read(results: Results, ref: Ref): number | undefined {
  return results.value(ref.case, ref.metric ?? 'opsPerSec', ref.c);
}

const refName = (ref: Ref): string =>
  `${ref.case}${ref.c === undefined ? '' : `@${ref.c}`}${ref.metric ? ` ${ref.metric}` : ''}`;

export function evaluate(targets: Target[], results: Results, run: string): Evaluated[] {
  return [...targets]
    .sort((a, b) => a.id.localeCompare(b.id, 'en', { numeric: true }))
    .map((t) => {
      const goal = t.atLeast !== undefined ? `>= ${t.atLeast}` : t.atMost !== undefined ? `<= ${t.atMost}` : '(info)';
      const refs = t.per ? [t.of, t.per] : [t.of];
      const skipped = refs.map((r) => results.skipped(r.case)).find((why) => why !== undefined);
      if (skipped !== undefined)
        return { id: t.id, label: t.label, value: undefined, goal, verdict: 'skipped', reason: skipped, run };
      const of = read(results, t.of);
      const per = t.per ? read(results, t.per) : 1;
      const value = of === undefined || per === undefined || per === 0 ? undefined : of / ((t.factor ?? 1) * per);
      if (value === undefined) {
        const missing = refs.filter((r) => read(results, r) === undefined).map(refName);
        const reason = missing.length ? `not measured: ${missing.join(', ')}` : `${refName(t.per!)} is 0`;
        return { id: t.id, label: t.label, value, goal, verdict: 'n/a', reason, run };
      }
      let verdict: Evaluated['verdict'] = 'info';
      if (t.atLeast !== undefined) verdict = value >= t.atLeast ? 'met' : 'not met';
      else if (t.atMost !== undefined) verdict = value <= t.atMost ? 'met' : 'not met';
      return { id: t.id, label: t.label, value, goal, verdict, run };
    });
}

export function targetTable(rows: Evaluated[]): string[] {
  return [
    '| target | | value | goal | met | run |',
    '|---|---|--:|--:|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.id} | ${r.label} | ${r.value === undefined ? 'n/a' : r.value.toFixed(3)} | ${r.goal} | ${r.verdict}${r.reason ? `: ${r.reason}` : ''} | ${r.run} |`,
    ),
  ];
}
