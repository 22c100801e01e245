// `npm run demo` end to end, shortened: two worker processes for 8 s with one kill and one pause,
// the real reaper job, against the test server (passed as MYSQL_URL). Exit code 0 and a PASS.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import { parseMysqlUrl } from '../../harness/database.js';
import type { DemoReport } from '../../examples/demo/report.js';
import { serverUrl } from '../support/db.js';

function runDemo(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'examples/demo/main.ts', ...args], {
      cwd: join(import.meta.dirname, '../..'),
      env: { ...process.env, MYSQL_URL: serverUrl() },
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
        '--duration', '8', '--workers', '2', '--faults', 'kill@1,pause@3',
        '--loans', '10', '--investors', '100', '--claims', '500', '--json', json,
      ]);
      expect(run.stderr).toBe('');
      expect(run.stdout).toMatch(/VERDICT: PASS/);
      expect(run.code).toBe(0);
      const report = JSON.parse(readFileSync(json, 'utf8')) as DemoReport;
      expect(report.verdict.pass).toBe(true);
      expect(report.verdict.checks).toHaveLength(6);
      expect(report.faults.map((f) => [f.kind, f.outcome])).toEqual([['kill', 'reaped'], ['pause', 'lock-lost']]);
      expect(report.load.counts.repayments).toBeGreaterThan(0);
      expect(report.load.counts.transfers).toBeGreaterThan(0);
      expect(report.crew.reaper.exitCode).toBe(0);
      // A passing run cleans up after itself.
      const conn = await mysql.createConnection(parseMysqlUrl(serverUrl()));
      const [rows] = await conn.query('SHOW DATABASES LIKE ?', [report.database]);
      await conn.end();
      expect(rows).toHaveLength(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
