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
  /** Sort key and name, e.g. '14.1 c=1' (issue 14, target 1) or 'r1.2 c=16' (first round). */
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
  verdict: 'met' | 'not met' | 'info' | 'n/a';
}

function read(results: Results, ref: Ref): number | undefined {
  return results.value(ref.case, ref.metric ?? 'opsPerSec', ref.c);
}

export function evaluate(targets: Target[], results: Results): Evaluated[] {
  return [...targets]
    .sort((a, b) => a.id.localeCompare(b.id, 'en', { numeric: true }))
    .map((t) => {
      const goal = t.atLeast !== undefined ? `>= ${t.atLeast}` : t.atMost !== undefined ? `<= ${t.atMost}` : '(info)';
      const of = read(results, t.of);
      const per = t.per ? read(results, t.per) : 1;
      const value = of === undefined || per === undefined || per === 0 ? undefined : of / ((t.factor ?? 1) * per);
      let verdict: Evaluated['verdict'] = 'info';
      if (value === undefined) verdict = 'n/a';
      else if (t.atLeast !== undefined) verdict = value >= t.atLeast ? 'met' : 'not met';
      else if (t.atMost !== undefined) verdict = value <= t.atMost ? 'met' : 'not met';
      return { id: t.id, label: t.label, value, goal, verdict };
    });
}

export function targetTable(rows: Evaluated[]): string[] {
  return [
    '| target | | value | goal | met |',
    '|---|---|--:|--:|---|',
    ...rows.map(
      (r) =>
        `| ${r.id} | ${r.label} | ${r.value === undefined ? 'n/a' : r.value.toFixed(3)} | ${r.goal} | ${r.verdict} |`,
    ),
  ];
}
