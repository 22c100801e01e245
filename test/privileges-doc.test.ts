// The docs' privileges table is generated from src/admin/privileges.ts (npm run docs:privileges): this
// fails while a README.md or docs/*.md with the markers holds another table. And the CLI command
// that prints them as GRANT statements (`privileges`, alias `grants`). No database.
// covers: src/admin/privileges.ts, src/cli/commands-privileges.ts, scripts/privileges-table.ts
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { grantStatements, privilegesTable } from '../src/admin/privileges.js';
import { END, START, filesWithMarkers, withCurrentTable } from '../scripts/privileges-table.js';

const ROOT = join(import.meta.dirname, '..');

describe("the docs' privileges table", () => {
  const files = filesWithMarkers(ROOT);

  it('is in at least one file', () => {
    expect(files.map((f) => relative(ROOT, f))).not.toEqual([]);
  });

  it.each(files.map((f) => [relative(ROOT, f), f]))(
    '%s holds the current table (else: npm run docs:privileges)',
    (_name, file) => {
      const text = readFileSync(file, 'utf8');
      expect(text).toContain(privilegesTable());
      expect(withCurrentTable(text, file)).toBe(text);
    },
  );

  it('negative control: a table edited by hand, or written for another role list, is stale', () => {
    const current = withCurrentTable(`a\n${START}\n${END}\nb`);
    expect(withCurrentTable(current)).toBe(current);
    const edited = current.replace(
      '`SELECT`, `UPDATE`, `DELETE` on `t_lock_log`',
      '`SELECT`, `UPDATE` on `t_lock_log`',
    );
    expect(edited).not.toBe(current);
    expect(withCurrentTable(edited)).not.toBe(edited);
  });

  it('refuses a start marker without its end', () => {
    expect(() => withCurrentTable(`${START}\nno end`)).toThrow(/without/);
  });
});

describe('mysql-rwlock privileges (no database connection)', () => {
  async function privileges(
    args: string[],
    env: NodeJS.ProcessEnv = {},
    name = 'privileges',
  ): Promise<{ code: number; out: string; err: string }> {
    const { main } = await import('../src/cli/main.js');
    let out = '';
    let err = '';
    const code = await main([name, ...args], { out: (t) => (out += `${t}\n`), err: (t) => (err += `${t}\n`), env });
    return { code, out, err };
  }

  it("prints the role's GRANT statements, one per line, as grantStatements renders them", async () => {
    const r = await privileges(['--role', 'reaper', '--user', "'reaper'@'10.0.%'", '--database', 'locks']);
    expect(r).toMatchObject({ code: 0, err: '' });
    expect(r.out).toBe(`${grantStatements('reaper', "'reaper'@'10.0.%'", 'locks').join('\n')}\n`);
    expect(r.out.trim().split('\n')).toEqual([
      "GRANT SELECT, UPDATE, DELETE ON `locks`.`t_lock_log` TO 'reaper'@'10.0.%';",
      "GRANT SELECT, UPDATE, DELETE ON `locks`.`t_read_write_lock` TO 'reaper'@'10.0.%';",
      "GRANT SELECT, INSERT, DELETE ON `locks`.`t_lock_release_note` TO 'reaper'@'10.0.%';",
      "GRANT SELECT, DELETE ON `locks`.`t_lock_gate` TO 'reaper'@'10.0.%';",
    ]);
  });

  it('answers to grants, its earlier name, with the same statements', async () => {
    const args = ['--role', 'reaper', '--user', "'reaper'@'10.0.%'", '--database', 'locks'];
    const [now, earlier] = [await privileges(args), await privileges(args, {}, 'grants')];
    expect(now.out).toContain('GRANT SELECT');
    expect(earlier).toEqual(now);
  });

  it('escapes the wildcards of a database-level grant, and quotes a plain account', async () => {
    expect(grantStatements('migrate', 'deploy@localhost', 'app_locks%1')).toEqual([
      "GRANT SELECT, INSERT, UPDATE, CREATE, ALTER, INDEX, CREATE ROUTINE, ALTER ROUTINE ON `app\\_locks\\%1`.* TO 'deploy'@'localhost';",
    ]);
  });

  it('takes the database from --url or MYSQL_URL, percent-decoded, without connecting and without printing the password', async () => {
    // Port 9 (discard): nothing listens, so any attempt to connect would fail the command.
    const viaUrl = await privileges([
      '--role',
      'checker',
      '--user',
      'ops@%',
      '--url',
      'mysql://u:S3cr%2Fet@127.0.0.1:9/l%C3%A5s',
    ]);
    expect(viaUrl.code).toBe(0);
    expect(viaUrl.out).toContain('ON `lås`.`t_lock_log`');
    const viaEnv = await privileges(['--role', 'checker', '--user', 'ops@%'], {
      MYSQL_URL: 'mysql://u:S3cr%3Fet@127.0.0.1:9/envdb',
    });
    expect(viaEnv.out).toContain('ON `envdb`.`t_lock_log`');
    for (const r of [viaUrl, viaEnv]) expect(r.out + r.err).not.toMatch(/S3cr/);
  });

  it('bad usage exits 2 and prints no statement: no role, an unknown role, no user, a bad account, no database', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['--user', 'a@b', '--database', 'd'], /--role is required/],
      [['--role', 'admin', '--user', 'a@b', '--database', 'd'], /--role must be one of app, /],
      [['--role', 'app', '--database', 'd'], /--user is required/],
      [['--role', 'app', '--user', "x'; DROP USER root; --", '--database', 'd'], /user must be an account/],
      [['--role', 'app', '--user', 'a@b'], /--database is required/],
      [['--role', 'app', '--user', 'a@b', '--url', 'mysql://u:S3cret@h:3306/'], /--database is required/],
      // A URL it cannot read (an unencoded / in the password) names no database, and is not echoed.
      [['--role', 'app', '--user', 'a@b', '--url', 'mysql://u:S3cret/x@h:3306/db'], /--database is required/],
    ];
    for (const [args, message] of cases) {
      const r = await privileges(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.out).toBe('');
      expect(r.err).toMatch(message);
      expect(r.err).not.toContain('S3cret');
    }
  });
});
