// The run report: what ran, what happened, and the verdict with each check's figures. The text and
// the JSON (--json) carry the same fields: the text is formatted from the report and adds nothing.
import type { DemoConfig } from './config.js';
import type { CrewSummary } from './crew.js';
import type { FaultRecord } from './faults.js';
import type { OpCounts } from './messages.js';
import type { Verdict } from './verify/check.js';

export interface DemoReport {
  scenario: string;
  server: string;
  database: string;
  config: Omit<DemoConfig, 'json'>;
  seeding: { ms: number; summary: string };
  load: { ms: number; operations: number; counts: OpCounts; opsPerSec: number; grants: number };
  crew: CrewSummary;
  faults: FaultRecord[];
  verdict: Verdict;
  /** Explanations printed after the checks; see reportNotes(). */
  notes: string[];
  totalMs: number;
}

/** Notes that follow from the run's figures, beside the scenario's own (the --unsafe explanation). */
export function reportNotes(r: Pick<DemoReport, 'config' | 'crew' | 'faults'>): string[] {
  const faulted = new Set(r.faults.map((f) => f.grantId));
  const others = r.crew.reaper.reapedIds.filter((id) => !faulted.has(id)).length;
  if (others === 0) return [];
  return [
    [
      `${others} reaped grant(s) besides the faulted ones: the killed worker's other operation in flight, and operations`,
      `that outlived the ${r.config.reaperCutoffMs} ms cutoff waiting on InnoDB row locks the paused process held (row locks pause`,
      'with it, the lease does not); their commits, if any came, were refused like the paused one.',
    ].join('\n'),
  ];
}

function n(x: number): string {
  return x.toLocaleString('en-US');
}

export function formatReport(r: DemoReport): string {
  const c = r.load.counts;
  const cfg = r.config;
  const out: string[] = [];
  out.push('', `=== mysql-rwlock demo: ${r.scenario}${cfg.unsafe ? ' (UNSAFE: lock inside the transaction)' : ''} ===`);
  out.push(`server    ${r.server}, database ${r.database}`);
  out.push(`seeded    ${r.seeding.summary} in ${(r.seeding.ms / 1000).toFixed(1)} s`);
  out.push(
    `ran       ${cfg.workers} worker processes × ${cfg.concurrency} in flight for ${(r.load.ms / 1000).toFixed(1)} s; reaper cutoff ${cfg.reaperCutoffMs} ms, every ${cfg.reaperPeriodSec} s`,
  );
  const work =
    r.scenario === 'lending'
      ? `${n(c.repayments)} repayments, ${n(c.transfers)} transfers, ${n(c.declined)} declined, ${n(c.noops)} no-ops`
      : `${n(c.deductions)} sales`;
  out.push(
    `load      ${n(r.load.operations)} operations (${work}), ${Math.round(r.load.opsPerSec)} ops/s; ${n(r.load.grants)} grants`,
  );
  out.push(
    `          waited for a held lock ${n(c.waited)}, lock timeouts ${n(c.timeouts)}, commits refused (LockLostError) ${n(c.lost)}, errors ${n(c.errors)}`,
  );
  const rp = r.crew.reaper;
  out.push(
    `reaper    ${n(rp.runs)} runs (${rp.failedRuns} failed), ${n(rp.reaped)} grants reaped${rp.reapedIds.length ? ` [${rp.reapedIds.slice(0, 10).join(', ')}${rp.reapedIds.length > 10 ? ', ...' : ''}]` : ''}, exit code ${rp.exitCode}`,
  );
  out.push(
    `workers   ${r.crew.workersSpawned} processes spawned${r.crew.workerExits.length ? `; ${r.crew.workerExits.join('; ')}` : ''}`,
  );
  if (r.crew.orphansAtStop > 0)
    out.push(
      `          ${r.crew.orphansAtStop} grants were still live when the workers stopped; the reaper cleared them in ${r.crew.orphansReapedMs} ms`,
    );
  for (const f of r.faults)
    out.push(
      `fault     ${f.kind} ${f.worker}, repayment grant ${f.grantId ?? '-'} on ${f.loanId ?? '-'}: ${f.outcome} (${f.detail})`,
    );
  for (const e of r.crew.errors.slice(0, 5)) out.push(`error     ${e.split('\n')[0]}`);
  out.push('', 'checks');
  for (const ch of r.verdict.checks) {
    out.push(`  ${ch.pass ? 'PASS' : 'FAIL'}  ${ch.name}`);
    out.push(`        ${ch.summary}`);
    for (const p of ch.problems) out.push(`        ! ${p}`);
  }
  for (const note of r.notes) out.push('', note);
  out.push(
    '',
    `VERDICT: ${r.verdict.pass ? 'PASS' : 'FAIL'} (${r.verdict.checks.filter((x) => x.pass).length}/${r.verdict.checks.length} checks) in ${(r.totalMs / 1000).toFixed(1)} s`,
    '',
  );
  return out.join('\n');
}

/** The report as JSON; bigint-free by construction, Infinity-free too. */
export function reportJson(r: DemoReport): string {
  return `${JSON.stringify(r, null, 2)}\n`;
}
