// The end-of-run summary: operations, faults proven, violations, negative controls caught.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { ScenarioResult } from './scenario.js';

export interface NegativeControl {
  name: string;
  defect: string;
  caught: boolean;
  checks: string[];
  example: string;
  faults: ScenarioResult['faults'];
}

export interface SuiteSummary {
  when: string;
  durationMs: number;
  server: string;
  runs: ScenarioResult[];
  negatives: NegativeControl[];
  floor: { lockOps: number; minLockOps: number; minPerKind: number; kinds: Record<string, number>; ok: boolean };
}

export function formatSummary(s: SuiteSummary): string {
  const lines: string[] = [];
  lines.push('# Reliability suite — last summary', '');
  lines.push(`- When: ${s.when}; duration ${(s.durationMs / 1000).toFixed(0)} s; server: ${s.server}`);
  lines.push(
    `- Validity floor: ${s.floor.ok ? 'MET' : 'NOT MET'} — ${s.floor.lockOps} lock operations checked (≥ ${s.floor.minLockOps}); every fault kind proven ≥ ${s.floor.minPerKind} times`,
  );
  const violations = s.runs.reduce((n, r) => n + r.check.violations.length, 0);
  lines.push(`- Violations: **${violations}**`);
  lines.push(
    `- Negative controls caught: **${s.negatives.filter((n) => n.caught).length} of ${s.negatives.length}**`,
    '',
  );
  for (const r of s.runs) {
    lines.push(`## ${r.name}`, '');
    lines.push(
      `Duration ${(r.durationMs / 1000).toFixed(0)} s; lock operations checked ${r.check.lockOps}; invariant samples ${r.check.samples}; ` +
        `last holder exited ${Math.round(r.holdersGoneAfterMs)} ms after the faults stopped; resources free ${r.freeAfterMs === null ? 'never' : `${Math.round(r.freeAfterMs)} ms`} after that (bound ${r.livenessBoundMs} ms); lock live again: ${r.liveAgain ? 'yes' : 'NO'}.`,
      '',
    );
    lines.push('| business operations | count |', '|---|---|');
    for (const [k, n] of Object.entries(r.check.ops).sort()) lines.push(`| ${k} | ${n} |`);
    lines.push('', '| fault | injected | proven |', '|---|---|---|');
    for (const [k, f] of Object.entries(r.faults).sort()) lines.push(`| ${k} | ${f.injected} | ${f.proven} |`);
    lines.push('', `Violations: ${r.check.violations.length}`);
    for (const v of r.check.violations.slice(0, 10)) lines.push(`- ${v.check}: ${v.detail}`);
    for (const n of r.notes) lines.push(`- ${n}`);
    lines.push('');
  }
  lines.push(
    "## Negative controls (deliberately broken variants: copies in test code, or the library's test-only switches)",
    '',
    '| variant | defect | caught | checks that fired | example |',
    '|---|---|---|---|---|',
  );
  for (const n of s.negatives)
    lines.push(
      `| ${n.name} | ${n.defect} | ${n.caught ? 'yes' : 'NO'} | ${n.checks.join(', ')} | ${n.example.replace(/\|/g, '/')} |`,
    );
  lines.push('');
  return lines.join('\n');
}

export function writeSummary(file: string, s: SuiteSummary): string {
  const text = formatSummary(s);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, text);
  return text;
}
