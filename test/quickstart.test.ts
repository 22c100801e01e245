// examples/quickstart.ts is the README's quick start, byte for byte, and it works as written: run as
// a process of its own against a fresh database it creates its table, commits one payment under a
// write grant, releases the grant in that commit and exits on its own; without MYSQL_URL it says so
// in one line.
// covers: src/index.ts
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectKnex, createDatabase, databaseUrl, dropDatabase } from '../harness/database.js';
import { serverUrl } from './support/db.js';

const REPO = join(import.meta.dirname, '..');
const EXAMPLE = 'examples/quickstart.ts';
/** Longer than a cold tsx start plus migrate() on a busy 2-core machine by far; a hang means a pool left open. */
const EXIT_WITHIN_MS = 90_000;

function runQuickstart(
  env: Record<string, string | undefined>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', EXAMPLE], {
      cwd: REPO,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const deadline = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(
          `${EXAMPLE} did not exit within ${EXIT_WITHIN_MS} ms (a knex pool left open keeps it alive); stdout: ${stdout} stderr: ${stderr}`,
        ),
      );
    }, EXIT_WITHIN_MS);
    child.on('close', (code) => {
      clearTimeout(deadline);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The first ```ts block under the README's "## Quick start" heading. */
function readmeQuickStart(): string {
  const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
  const section = readme.split(/^## Quick start\n/m)[1];
  if (section === undefined) throw new Error('README.md has no "## Quick start" section');
  const block = /^```ts\n([\s\S]*?)^```$/m.exec(section.split(/^## /m)[0]!);
  if (!block) throw new Error('the Quick start section has no ```ts block');
  return block[1]!;
}

describe('examples/quickstart.ts', () => {
  const url = serverUrl();
  const name = `rwl_quickstart_${randomBytes(3).toString('hex')}`;
  let db: Knex;
  beforeAll(async () => {
    await createDatabase(url, name);
    db = connectKnex(url, name);
  });
  afterAll(async () => {
    await db?.destroy();
    await dropDatabase(url, name);
  });

  it('is the README quick start, byte for byte', () => {
    expect(readmeQuickStart()).toBe(readFileSync(join(REPO, EXAMPLE), 'utf8'));
  });

  it('commits a payment under a write grant released in the same commit, and exits on its own', async () => {
    for (const round of [1, 2]) {
      // twice: migrate() and the table creation are idempotent
      const run = await runQuickstart({ MYSQL_URL: databaseUrl(url, name) });
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
      const m = /^payment of 125\.00 on loan-42 committed under write grant (\d+)\n$/.exec(run.stdout);
      expect(m, run.stdout).not.toBeNull();
      const grantId = Number(m![1]);
      const payments = (await db('payments').select('loan_id', 'amount_cents', 'grant_id').orderBy('id')) as Array<{
        loan_id: string;
        amount_cents: number;
        grant_id: number;
      }>;
      expect(payments).toHaveLength(round);
      expect(payments.at(-1)).toEqual({ loan_id: 'loan-42', amount_cents: 12_500, grant_id: grantId });
      const [[grant]] = (await db.raw(
        'SELECT CAST(resource_id AS CHAR) AS resource, lock_type, status, released_by FROM t_lock_log WHERE id = ?',
        [grantId],
      )) as [Array<Record<string, unknown>>];
      expect(grant).toEqual({ resource: 'loan:loan-42', lock_type: 0, status: 2, released_by: 1 }); // write, released by its holder
    }
    const [[lock]] = (await db.raw(
      "SELECT w_count, r_count FROM t_read_write_lock WHERE resource_id = 'loan:loan-42'",
    )) as [Array<Record<string, unknown>>];
    expect(lock).toEqual({ w_count: 0, r_count: 0 });
  });

  it('without MYSQL_URL says what is missing in one line and exits 1', async () => {
    const run = await runQuickstart({ MYSQL_URL: undefined });
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/^MYSQL_URL is not set: [^\n]*\n$/);
  });
});
