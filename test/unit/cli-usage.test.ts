// The `mysql-rwlock` CLI's usage, run in-process through main() (what src/cli/bin.ts calls): no
// server is involved. Commands that reach a database are spawned as a user runs them in
// test/cli.test.ts.
// covers: src/cli/main.ts, src/cli/command.ts, src/cli/commands-read.ts, src/cli/commands-write.ts, src/cli/commands-privileges.ts
import { describe, expect, it } from 'vitest';
import { COMMANDS, main } from '../../src/cli/main.js';

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs one command line as src/cli/bin.ts does: each line written to stdout or stderr, the exit code. */
async function cli(args: string[], env: Record<string, string> = {}): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const status = await main(args, {
    out: (text) => (stdout += `${text}\n`),
    err: (text) => (stderr += `${text}\n`),
    env,
  });
  return { status, stdout, stderr };
}

describe('mysql-rwlock --help', () => {
  it('lists every command; each command has --help with its options and the exit codes, and connects to nothing', async () => {
    const top = await cli(['--help'], {});
    expect(top.status).toBe(0);
    expect(top.stdout).toMatch(/^Usage: mysql-rwlock <command>/);
    const names = COMMANDS.map((c) => c.name);
    expect(names).toEqual([
      'status',
      'ls',
      'inspect',
      'history',
      'jobs',
      'leaders',
      'release',
      'reap',
      'purge',
      'migrate',
      'check',
      'dashboard',
      'privileges',
    ]);
    for (const name of names) expect(top.stdout).toMatch(new RegExp(`^  ${name}\\b`, 'm'));
    const helps = await Promise.all(names.map((n) => cli([n, '--help'], {})));
    for (const [i, h] of helps.entries()) {
      expect(h.status, names[i]).toBe(0);
      expect(h.stdout).toMatch(new RegExp(`^Usage: mysql-rwlock ${names[i]}`));
      expect(h.stdout).toContain('--url URL');
      expect(h.stdout).toMatch(/Exit codes:\n {2}0 .*\n {2}1 .*\n {2}2 .*\n {2}3 /);
    }
    const bare = await cli([], {});
    expect(bare.status).toBe(2);
    expect(bare.stderr).toMatch(/^Usage: mysql-rwlock/);
  });
});

describe('bad usage', () => {
  // Nothing listens on port 1: a command that got as far as connecting would exit 3, not 2.
  const env = { MYSQL_URL: 'mysql://u:pw@127.0.0.1:1/app' };

  it('exit 2 for an unknown command or flag, a bad id, number or option, before any connection', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['frobnicate'], /^mysql-rwlock: unknown command "frobnicate"; commands: status, ls/],
      [['ls', '--bogus'], /^mysql-rwlock ls: Unknown option '--bogus'/],
      [['ls', '--limit', 'ten'], /^mysql-rwlock ls: --limit must be a whole number, got "ten"/],
      [['ls', '--limit', '0'], /^mysql-rwlock ls: limit must be an integer from 1 to 10000, got 0/],
      [['ls', '--mode', 'exclusive'], /--mode must be write, read or permit/],
      [['jobs', '--window', 'a day'], /--window must be a whole number/],
      [['ls', 'extra'], /takes no arguments/],
      [['leaders', 'a', 'b'], /^mysql-rwlock leaders: takes \[name\], got "a b"/],
      [['leaders', '--limit', '5'], /--limit needs a name/],
      [['leaders', 'ticker', '--limit', '0'], /--limit must be 1 to 10000, got 0/],
      [['leader', ''], /^mysql-rwlock leaders: resource id must not be empty/],
      [['release', 'abc', '--reason', 'x'], /<grantId> must be a whole number, got "abc"/],
      [['release', '5', '--reason', ''], /reason must be well-formed text of 1 to 500 characters/],
      [['release', '5', '--reason', 'x'.repeat(501)], /reason must be/],
      [['inspect'], /needs <resourceId>/],
      [['inspect', ''], /resource id must not be empty/],
      [['history', 'x', '--before', '-3'], /Option '--before' argument is ambiguous|--before must be a whole number/],
      [['reap', '--batch-size', '20000'], /batchSize must be an integer from 1 to 10000/],
    ];
    for (const [args, message] of cases) {
      const run = await cli(args, env);
      expect(run.status, args.join(' ')).toBe(2);
      expect(run.stderr, args.join(' ')).toMatch(message);
      expect(run.stdout, args.join(' ')).toBe('');
    }
    // The control: a well-formed command against the same URL does try to connect, and fails so.
    expect((await cli(['status'], env)).status).toBe(3);
  });
});
