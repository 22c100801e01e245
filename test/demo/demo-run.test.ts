// `npm run demo` end to end, shortened: two worker processes for 8 s with one kill and one pause,
// the real reaper job, against the test server (passed as MYSQL_URL). Exit code 0 and a PASS, and a
// JSON report that carries what the text says. Bad flags: one line and exit 2.
// covers: demo/main.ts
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import { parseMysqlUrl } from '../../harness/database.js';
import type { DemoReport } from '../../demo/report.js';
import { serverUrl } from '../support/db.js';

function runDemo(
  args: string[],
  env: Record<string, string | undefined> = { MYSQL_URL: serverUrl() },
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'demo/main.ts', ...args], {
      cwd: join(import.meta.dirname, '../..'),
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('npm run demo', () => {
  it('survives a kill and a pause and PASSes every check', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'demo-run-'));
    try {
      const json = join(dir, 'report.json');
      const run = await runDemo([
        '--duration',
        '8',
        '--workers',
        '2',
        '--faults',
        'kill@1,pause@3',
        '--loans',
        '10',
        '--investors',
        '100',
        '--claims',
        '500',
        '--json',
        json,
      ]);
      expect(run.stderr).toBe('');
      expect(run.stdout).toMatch(/VERDICT: PASS/);
      expect(run.code).toBe(0);
      const report = JSON.parse(readFileSync(json, 'utf8')) as DemoReport;
      expect(report.verdict.pass).toBe(true);
      expect(report.verdict.checks).toHaveLength(6);
      expect(report.faults.map((f) => [f.kind, f.outcome])).toEqual([
        ['kill', 'reaped'],
        ['pause', 'lock-lost'],
      ]);
      expect(report.load.counts.repayments).toBeGreaterThan(0);
      expect(report.load.counts.transfers).toBeGreaterThan(0);
      expect(report.crew.reaper.exitCode).toBe(0);
      // The text is formatted from the report: the same counts, figures and notes.
      const c = report.load.counts;
      expect(Object.keys(c)).not.toContain('conflicts');
      expect(run.stdout).toContain(`load      ${report.load.operations.toLocaleString('en-US')} operations`);
      expect(run.stdout).toContain(
        `waited for a held lock ${c.waited.toLocaleString('en-US')}, lock timeouts ${c.timeouts.toLocaleString('en-US')}`,
      );
      for (const check of report.verdict.checks) {
        expect(run.stdout).toContain(`  PASS  ${check.name}\n        ${check.summary}\n`);
        expect(Object.keys(check.figures).length, check.name).toBeGreaterThan(0);
        expect(
          Object.values(check.figures).every((v) => typeof v === 'number' && Number.isFinite(v)),
          check.name,
        ).toBe(true);
      }
      for (const note of report.notes) expect(run.stdout).toContain(`\n${note}\n`);
      // A passing run cleans up after itself.
      const conn = await mysql.createConnection(parseMysqlUrl(serverUrl()));
      const [rows] = await conn.query('SHOW DATABASES LIKE ?', [report.database]);
      await conn.end();
      expect(rows).toHaveLength(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('refuses a bad flag with one line and exit 2, before looking for a server', async () => {
    const run = await runDemo(['--bogus'], { MYSQL_URL: 'mysql://nobody@127.0.0.1:1/' });
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/^demo: Unknown option '--bogus'[^\n]*\n$/);
    const badValue = await runDemo(['--workers', 'many'], { MYSQL_URL: 'mysql://nobody@127.0.0.1:1/' });
    expect(badValue.code).toBe(2);
    expect(badValue.stderr).toMatch(/^demo: --workers must be an integer >= 1, got "many"[^\n]*\n$/);
  });

  it('--help names MYSQL_URL and the order a server is looked for in', async () => {
    const run = await runDemo(['--help'], { MYSQL_URL: undefined });
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(
      /1\. MYSQL_URL[\s\S]*2\. a MySQL 8\.4 container through testcontainers[\s\S]*3\. a throwaway mariadbd/,
    );
    expect(run.stdout).toMatch(/Exit codes: 0 PASS, 1 FAIL[^\n]*, 2 bad flags/);
  });
});
