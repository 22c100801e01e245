// Connection URLs (src/sql/connection-url.ts), the one parser behind MYSQL_URL and --url: passwords
// holding `/ # ? @ : %`, raw or percent-encoded, reach the server decoded and never appear in any
// output, through every entry point (the CLI, its `dashboard`, the reaper job) and every failure
// path; a database whose name needs percent-encoding is reached.
// covers: src/sql/connection-url.ts, src/cli/main.ts, src/cli/dashboard.ts, src/reaper-daemon/job.ts
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import knexFactory from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectKnex } from '../harness/database.js';
import { freePort } from '../harness/server.js';
import { migrate } from '../src/admin/migrate.js';
import { main } from '../src/cli/main.js';
import { InvalidOptionsError } from '../src/errors.js';
import { connectionSecrets, knexReading, parseConnectionUrl } from '../src/sql/connection-url.js';
import { useTestDatabase } from './support/db.js';

const db = useTestDatabase(import.meta.filename);
const REPO = join(import.meta.dirname, '..');

/** A password with every character that breaks a naive URL parse; `%` at the end, as typed. */
const PASSWORD = 'Qz7/Kv#W?j@Xp:Rm%';
/** The same without `%`: valid written raw, as many people write it. */
const RAW_PASSWORD = 'Qz7/Kv#W?j@Xp:Rm';
const ENCODED = encodeURIComponent(PASSWORD);

/** Every 3-character piece of the password, and its encoded form whole: none may be printed. */
function pieces(...secrets: string[]): string[] {
  const out = new Set<string>();
  for (const s of secrets) for (let i = 0; i + 3 <= s.length; i++) out.add(s.slice(i, i + 3));
  return [...out];
}
const FORBIDDEN = [...pieces(PASSWORD, RAW_PASSWORD), ENCODED];

function expectNoSecret(output: string, what: string): void {
  for (const p of FORBIDDEN)
    expect(output.includes(p), `${what}: output holds ${JSON.stringify(p)}: ${output}`).toBe(false);
}

describe('parseConnectionUrl', () => {
  it('decodes user, password and database into an object knex and mysql2 accept', () => {
    const encoded = parseConnectionUrl(
      `mysql://us%40er:${ENCODED}@db.example:3307/app_1?connectTimeout=5000&ssl=%7B%22rejectUnauthorized%22%3Atrue%7D`,
    );
    expect(encoded.connection).toEqual({
      host: 'db.example',
      port: 3307,
      user: 'us@er',
      password: PASSWORD,
      database: 'app_1',
      connectTimeout: 5000,
      ssl: { rejectUnauthorized: true },
    });
    expect(encoded.target).toBe('db.example:3307/app_1');
    const raw = parseConnectionUrl(`mariadb://u:Xp@Rm:q@[::1]/app`);
    expect(raw.connection).toEqual({ host: '::1', port: 3306, user: 'u', password: 'Xp@Rm:q', database: 'app' });
    expect(raw.target).toBe('[::1]:3306/app');
    expect(parseConnectionUrl('mysql://h/app').connection).toEqual({ host: 'h', port: 3306, database: 'app' });
    // A query parameter cannot replace a part of the URL.
    expect(parseConnectionUrl('mysql://u:p@h/app?password=x&host=evil').connection).toEqual({
      host: 'h',
      port: 3306,
      user: 'u',
      password: 'p',
      database: 'app',
    });
    expect(connectionSecrets(`mysql://u:${ENCODED}@h/app`)).toEqual(expect.arrayContaining([PASSWORD, ENCODED]));
    expect(connectionSecrets(`mysql://u:${PASSWORD}@h:99999/app`)).toContain(PASSWORD);
  });

  it('refuses every malformed URL with a message naming the variable and no part of the user or password', () => {
    for (const password of [PASSWORD, RAW_PASSWORD, ENCODED]) {
      const cases: Array<[string, RegExp]> = [
        ['', /^MYSQL_URL is required/],
        [`postgres://u:${password}@h/app`, /^MYSQL_URL must start with mysql:\/\//],
        [`u:${password}@h/app`, /^MYSQL_URL must start with mysql:\/\//],
        [`mysql://u:${password}@h:99999/app`, /^MYSQL_URL has a port that is not a number from 1 to 65535/],
        [`mysql://u:${password}@h:http/app`, /^MYSQL_URL has a port/],
        [`mysql://u:${password}@/app`, /^MYSQL_URL has no host/],
        [`mysql://u:${password}@bad host!/app`, /^MYSQL_URL has a host that is not a host name/],
        [`mysql://u:${password}@h:3306/`, /^MYSQL_URL names no database/],
        [`mysql://u:${password}@h:3306/a/b`, /^MYSQL_URL names no database/],
        [`mysql://u:${password}@h/app#x`, /^MYSQL_URL has a # after the host/],
        [`mysql://u:${password}@h/app_%C3`, /^MYSQL_URL has a database name that is not valid percent-encoding/],
        [`mysql://u:${password}@h/app_%C3%A5`, password === ENCODED ? /^MYSQL_URL is read otherwise by knex/ : /./],
      ];
      if (password === PASSWORD)
        cases.push([
          `mysql://u:${password}@h/app`,
          /^MYSQL_URL has a user or password that is not valid percent-encoding/,
        ]);
      for (const [url, message] of cases) {
        let error: unknown;
        try {
          parseConnectionUrl(url);
        } catch (err) {
          error = err;
        }
        expect(error, url).toBeInstanceOf(InvalidOptionsError);
        expect((error as Error).message, url).toMatch(message);
        expectNoSecret((error as Error).message, url);
      }
    }
    expect(() => parseConnectionUrl('mysql://u@h:0/app', '--url')).toThrow(/^--url has a port/);
  });
});

describe('one reading with knex', () => {
  /** What the real knex (client mysql2) passes to mysql2 when given the URL string as `connection`. */
  function readByKnex(url: string): Record<string, unknown> {
    const k = knexFactory({ client: 'mysql2', connection: url });
    // The password is a hidden (non-enumerable) property of knex's settings.
    const settings = (k.client as unknown as { connectionSettings: Record<string, unknown> }).connectionSettings;
    const read = { ...settings, ...(settings.password === undefined ? {} : { password: settings.password }) };
    void k.destroy();
    return read;
  }
  const urls = [
    'mysql://app:pa#ss@db.example/app',
    'mysql://app:pa/ss@db.example/app',
    'mysql://app:pa?ss@db.example:3307/app',
    `mysql://app:${RAW_PASSWORD}@db.example/app`,
    'mysql://app:pa%23ss@db.example/app',
    `mysql://app:${ENCODED}@db.example:3307/app`,
    'mysql://app:pa@ss@db.example/app',
    'mysql://app:pa:ss@db.example/app',
    'mysql://app@db.example/app',
    'mysql://db.example/app',
    'mysql://app:p@db.example/app_l%C3%A5',
    'mysql://app:p@db.example/app%20x',
    'mysql://us%40er:p@db.example/app?connectTimeout=5000',
    'mariadb://app:p@[::1]:3307/app',
  ];

  it('every URL the parser accepts, knex given the same string reads alike; the rest are refused', () => {
    const accepted: string[] = [];
    const refused: string[] = [];
    for (const url of urls) {
      let ours: Record<string, unknown> | undefined;
      try {
        ours = parseConnectionUrl(url).connection;
      } catch (err) {
        expect(err, url).toBeInstanceOf(InvalidOptionsError);
        expect((err as Error).message, url).toMatch(/^MYSQL_URL is read otherwise by knex/);
        refused.push(url);
        continue;
      }
      accepted.push(url);
      const theirs = readByKnex(url);
      const host = String(theirs.host).replace(/^\[(.*)\]$/, '$1');
      expect({ ...theirs, host, port: theirs.port === undefined ? 3306 : Number(theirs.port) }, url).toEqual(ours);
    }
    expect(refused).toEqual([
      'mysql://app:pa#ss@db.example/app',
      'mysql://app:pa/ss@db.example/app',
      'mysql://app:pa?ss@db.example:3307/app',
      `mysql://app:${RAW_PASSWORD}@db.example/app`,
      'mysql://app:p@db.example/app_l%C3%A5',
      'mysql://app:p@db.example/app%20x',
    ]);
    // Negative control: each refused URL is one knex reads otherwise than the parser would without the check.
    for (const url of refused) {
      const theirs = readByKnex(url);
      expect(theirs.filename === url || String(theirs.database).includes('%'), url).toBe(true);
    }
  });

  it('knexReading, the check behind it, reads the parts it compares as the real knex does', () => {
    for (const url of urls) {
      const theirs = readByKnex(url);
      const mirror = knexReading(url);
      if (theirs.filename !== undefined) expect(mirror, url).toBeNull();
      else {
        const parts = ['host', 'port', 'user', 'password', 'database'].filter((k) => theirs[k] !== undefined);
        expect(mirror, url).toEqual(Object.fromEntries(parts.map((k) => [k, theirs[k]])));
      }
    }
  });
});

describe('every entry point, every failure path', () => {
  let user: string;
  let goodHost: string;
  beforeAll(async () => {
    user = `rwl_url_${randomBytes(3).toString('hex')}`;
    const u = new URL(db.url);
    goodHost = `${u.hostname}:${u.port || 3306}`;
    await db.knex.raw(`CREATE USER '${user}'@'%' IDENTIFIED BY ?`, [PASSWORD]);
    await db.knex.raw(`GRANT ALL ON \`${db.name}\`.* TO '${user}'@'%'`);
  });
  afterAll(async () => {
    await db.knex.raw(`DROP USER IF EXISTS '${user}'@'%'`);
  });

  /** URLs that fail, each with the exit the CLI gives it: 2 bad usage, 3 failed to reach or refused. */
  async function failures(): Promise<Array<[string, string, number]>> {
    const closed = await freePort();
    const cases: Array<[string, string, number]> = [];
    for (const [form, written] of [
      ['raw', RAW_PASSWORD],
      ['encoded', ENCODED],
      ['raw with %', PASSWORD],
    ] as const) {
      // Written raw, knex would read the password otherwise (`/ # ?`), and with a raw % it is not valid
      // percent-encoding: refused before connecting.
      const reached = form === 'encoded' ? 3 : 2;
      cases.push(
        [`${form}: bad port`, `mysql://${user}:${written}@127.0.0.1:99999/${db.name}`, 2],
        [`${form}: bad host`, `mysql://${user}:${written}@no host/${db.name}`, 2],
        [`${form}: unknown host`, `mysql://${user}:${written}@no-such-host.invalid:3306/${db.name}`, reached],
        [`${form}: unreachable server`, `mysql://${user}:${written}@127.0.0.1:${closed}/${db.name}`, reached],
        [`${form}: bad database`, `mysql://${user}:${written}@${goodHost}/rwl_no_such_database`, reached],
        [`${form}: wrong user`, `mysql://rwl_no_such_user:${written}@${goodHost}/${db.name}`, reached],
      );
    }
    return cases;
  }

  async function cliRun(argv: string[], env: Record<string, string>): Promise<{ code: number; output: string }> {
    let output = '';
    const code = await main(argv, { out: (t) => (output += `${t}\n`), err: (t) => (output += `${t}\n`), env });
    return { code, output };
  }

  // All at once: the unknown host waits for the resolver, which may be slow where there is no DNS.
  it(
    'the CLI (MYSQL_URL and --url) and its dashboard print no part of the password, and exit 2 or 3',
    { timeout: 180_000 },
    async () => {
      const runs = await Promise.all(
        (await failures()).map(async ([what, url, exit]) => ({
          what,
          exit,
          entries: [
            ['status via MYSQL_URL', await cliRun(['status'], { MYSQL_URL: url })],
            ['ls --url', await cliRun(['ls', '--url', url], {})],
            ['dashboard via MYSQL_URL', await cliRun(['dashboard', '--port', '0'], { MYSQL_URL: url })],
          ] as const,
        })),
      );
      for (const { what, exit, entries } of runs) {
        for (const [entry, run] of entries) {
          expect(run.code, `${entry}, ${what}: ${run.output}`).toBe(exit);
          expectNoSecret(run.output, `${entry}, ${what}`);
        }
      }
    },
  );

  it('the reaper job (MYSQL_URL) logs no part of the password, and exits 2 or 1', { timeout: 300_000 }, async () => {
    const cases = await failures();
    const runs: Array<{ status: number | null; output: string }> = [];
    // Four at a time: each is a node process compiling TypeScript on a shared machine.
    for (let i = 0; i < cases.length; i += 4) {
      runs.push(...(await Promise.all(cases.slice(i, i + 4).map(([, url]) => reaperOnce(url)))));
    }
    for (const [i, [what, , exit]] of cases.entries()) {
      expect(runs[i]!.status, `${what}: ${runs[i]!.output}`).toBe(exit === 2 ? 2 : 1);
      expectNoSecret(runs[i]!.output, `reaper job, ${what}`);
    }
  });

  it(
    'a user whose password holds / # ? @ : % connects percent-encoded, through the CLI, the reaper job and knex given the URL; written raw it is refused',
    { timeout: 180_000 },
    async () => {
      const name = `rwl_url_${randomBytes(3).toString('hex')}`;
      const second = `rwl_url_raw_${randomBytes(3).toString('hex')}`;
      // `@` and `:` need no encoding: knex reads them as this parser does.
      const atColon = 'Vb@9:kQ@z';
      await db.knex.raw(`CREATE DATABASE \`${name}\``);
      await db.knex.raw(`CREATE USER '${second}'@'%' IDENTIFIED BY ?`, [atColon]);
      try {
        await db.knex.raw(`GRANT ALL ON \`${name}\`.* TO '${user}'@'%'`);
        await db.knex.raw(`GRANT ALL ON \`${name}\`.* TO '${second}'@'%'`);
        const migrator = connectKnex(db.url, name);
        try {
          await migrate(migrator);
        } finally {
          await migrator.destroy();
        }
        const encodedUrl = `mysql://${user}:${ENCODED}@${goodHost}/${name}`;
        const atColonUrl = `mysql://${second}:${atColon}@${goodHost}/${name}`;
        const rawUrl = `mysql://${user}:${RAW_PASSWORD}@${goodHost}/${name}`;

        // knex given the URL string, as the docs' examples do, and given this parser's object: the same user.
        for (const [how, url, who] of [
          ['encoded', encodedUrl, user],
          ['@ and : raw', atColonUrl, second],
        ] as const) {
          for (const connection of [url, parseConnectionUrl(url).connection]) {
            const direct = knexFactory({ client: 'mysql2', connection, pool: { min: 0, max: 1 } });
            try {
              const [rows] = (await direct.raw('SELECT DATABASE() AS db, CURRENT_USER() AS who')) as [
                Array<{ db: string; who: string }>,
              ];
              expect(rows[0], how).toEqual({ db: name, who: `${who}@%` });
            } finally {
              await direct.destroy();
            }
          }
          const status = await cliRun(['status', '--json'], { MYSQL_URL: url });
          expect(status.code, `${how}: ${status.output}`).toBe(0);
          expect(JSON.parse(status.output)).toMatchObject({ live: { write: 0, read: 0 } });
          expectNoSecret(status.output, how);
          const job = await reaperOnce(url);
          expect(job.status, `${how}: ${job.output}`).toBe(0);
          expect(job.output).toContain('"event":"reaper.run","ok":true');
          expectNoSecret(job.output, `reaper job, ${how}`);
        }
        // Written raw, `/ # ?` end the URL's user part for knex: refused before connecting, as bad usage.
        const refused = await cliRun(['status'], { MYSQL_URL: rawUrl });
        expect(refused.code, refused.output).toBe(2);
        expect(refused.output).toMatch(/MYSQL_URL is read otherwise by knex\(\{ connection: url \}\)/);
        expectNoSecret(refused.output, 'raw');
        const job = await reaperOnce(rawUrl);
        expect(job.status, job.output).toBe(2);
        expectNoSecret(job.output, 'reaper job, raw');
      } finally {
        await db.knex.raw(`DROP USER IF EXISTS '${second}'@'%'`);
        await db.knex.raw(`DROP DATABASE IF EXISTS \`${name}\``);
      }
    },
  );
});

function reaperOnce(url: string): Promise<{ status: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'jobs/reaper.ts', '--once'], {
      cwd: REPO,
      env: { ...process.env, MYSQL_URL: url, COUNT_CHECK_CRON: 'off' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, output }));
  });
}
