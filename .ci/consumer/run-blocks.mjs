// Runs the docs' ts blocks (written by prepare.mjs, compiled by .ci/consumer-matrix.sh) against a real server,
// each as its compiled module, all in this one process and one fresh database, so that a block that compiles
// but fails at run time fails CI, and so does a page whose tables differ from another page's:
// - the database gets the lock's tables (migrate) and docs/examples.sql, the business tables every page
//   shares; a CREATE TABLE in a fenced block of README.md or docs/*.md that differs from examples.sql's, or
//   names a table it lacks, fails before anything runs;
// - what a block declares (`declare const locks: LockManager`, `declare function repay(...)`) is given a value
//   here, as a global of that name, which the compiled module refers to; a name not known here fails;
// - a block with decorators, or with `await using` on Node before 24, must fail to load as compiled for `tsc
//   --init`'s target (esnext) with a SyntaxError (no Node parses decorators yet; `await using` from Node 24),
//   as the pages say; the block as compiled for es2022 (TypeScript lowers both) by each compiler given runs;
// - a block that is byte for byte one of the repository's programs that runs until SIGTERM (the node-cron
//   scheduler) is left to the test that runs that program as processes (named below);
// - a block fails if it throws, takes longer than BLOCK_TIMEOUT_MS, or leaves process.exitCode set.
// Usage, from the app dir (its node_modules has the package, knex and mysql2), with the Node under test:
//   MYSQL_URL=mysql://user:pw@host:port/db node run-blocks.mjs <ts dir> <esnext dir> <repo dir> <es2022 dir>...
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { clearTimeout, setTimeout } from 'node:timers';
import { pathToFileURL } from 'node:url';
import knex from 'knex';
import mysql from 'mysql2/promise';
import { createLockManager } from 'mysql-rwlock';
import { fromKnex } from 'mysql-rwlock/adapters';
import { migrate } from 'mysql-rwlock/admin';

const [tsDir, esnextDir, repoDir, ...es2022Dirs] = process.argv.slice(2).map((p) => resolve(p));
if (es2022Dirs.length === 0 || !process.env.MYSQL_URL)
  throw new Error('usage: MYSQL_URL=... node run-blocks.mjs <ts dir> <esnext dir> <repo dir> <es2022 dir>...');
/** Far above the slowest block (docs/jobs.md's job holds its grant 2 s) on a busy machine; a hang is a pool left open. */
const BLOCK_TIMEOUT_MS = 60_000;
const nodeMajor = Number(process.versions.node.split('.')[0]);
const pkgDir = resolve('node_modules/mysql-rwlock');

/** Programs of the repository that run until SIGTERM, and the test that runs each (as processes). */
const RUN_ELSEWHERE = {
  'examples/jobs/node-cron.ts': 'test/jobs-examples.test.ts (two processes, stopped by SIGTERM)',
  'examples/leader/cron.ts': 'test/leader-examples.test.ts (two processes, stopped by SIGTERM)',
};

// --- every page's CREATE TABLE is examples.sql's ---------------------------------------------------------------
/** `CREATE TABLE [IF NOT EXISTS] name (...)` statements of `text`: name and whitespace-normalized text. */
function createTables(text) {
  const found = [];
  for (const m of text.matchAll(/CREATE TABLE (?:IF NOT EXISTS )?(\w+) *\(/g)) {
    let depth = 0;
    let end = m.index + m[0].length - 1;
    for (; end < text.length; end++) {
      if (text[end] === '(') depth++;
      else if (text[end] === ')' && --depth === 0) break;
    }
    found.push({
      name: m[1],
      sql: text
        .slice(m.index, end + 1)
        .replace(/\s+/g, ' ')
        .replace(/\( /g, '(')
        .replace(/ \)/g, ')'),
    });
  }
  return found;
}
const examplesSql = readFileSync(join(pkgDir, 'docs/examples.sql'), 'utf8');
const shared = new Map(createTables(examplesSql).map((t) => [t.name, t.sql]));
const problems = [];
const pages = [
  'README.md',
  ...readdirSync(join(pkgDir, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];
for (const page of pages) {
  const fenced = [...readFileSync(join(pkgDir, page), 'utf8').matchAll(/^(`{3,}).*\n([\s\S]*?)^\1$/gm)].map(
    (m) => m[2],
  );
  for (const { name, sql } of createTables(fenced.join('\n'))) {
    if (/^(t_|rwlock_)/.test(name)) continue; // the lock's own tables: migrations/, not the examples
    if (!shared.has(name)) problems.push(`${page} creates table ${name}, which docs/examples.sql does not define`);
    else if (shared.get(name) !== sql)
      problems.push(
        `${page} creates ${name} otherwise than docs/examples.sql:\n  page:         ${sql}\n  examples.sql: ${shared.get(name)}`,
      );
  }
}
if (problems.length > 0) {
  for (const p of problems) console.error(`run-blocks: ${p}`);
  process.exit(1);
}

// --- a fresh database ------------------------------------------------------------------------------------------
const serverUrl = new URL(process.env.MYSQL_URL);
const dbName = `${serverUrl.pathname.slice(1)}_blocks_node${nodeMajor}`.slice(0, 64);
const admin = await mysql.createConnection(process.env.MYSQL_URL);
await admin.query(`DROP DATABASE IF EXISTS \`${dbName}\``);
await admin.query(`CREATE DATABASE \`${dbName}\``);
const url = new URL(serverUrl);
url.pathname = `/${dbName}`;
process.env.MYSQL_URL = url.toString(); // what the blocks that connect on their own read

const db = knex({ client: 'mysql2', connection: { uri: url.toString(), multipleStatements: true } });
await migrate(db);
await db.raw(examplesSql);
const locks = createLockManager({ knex: db, owner: `docs-blocks@node${nodeMajor}` });
const conn = await mysql.createConnection(url.toString());

/** What a block may declare, by name: each a function of the block's name, so a grant is fresh per block. */
const supplied = {
  locks: () => locks,
  db: () => db,
  conn: () => conn,
  grant: () => locks.acquireWrite('loan:loan-42', { waitMs: 10_000 }),
  loanId: () => 'loan-42',
  amount: () => 125,
  orm: () => db,
  repay: () => (orm, grant, loanId, amount) =>
    orm.transaction(async (trx) => {
      await trx('payments').insert({ loan_id: loanId, amount_cents: amount, grant_id: grant.id });
      await grant.fence(fromKnex(trx));
    }),
  exportDaily: () => (signal) => (signal.aborted ? Promise.reject(signal.reason) : Promise.resolve()),
};

/** The names a block declares: `declare const a: A, b: B;` and `declare function f(...)`. */
function declared(source) {
  const names = [];
  for (const m of source.matchAll(/^declare const (.+);/gm)) {
    // Split on commas outside of brackets: `declare const a: Map<string, number>, b: B`.
    let depth = 0;
    let part = '';
    for (const ch of `${m[1]},`) {
      if ('<([{'.includes(ch)) depth++;
      if ('>)]}'.includes(ch)) depth--;
      if (ch === ',' && depth === 0) {
        names.push(part.split(':')[0].trim());
        part = '';
      } else part += ch;
    }
  }
  for (const m of source.matchAll(/^declare function (\w+)/gm)) names.push(m[1]);
  return names;
}

function withTimeout(promise, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`${what} did not finish within ${BLOCK_TIMEOUT_MS} ms`)),
        BLOCK_TIMEOUT_MS,
      );
    }),
  ]).finally(() => clearTimeout(timer));
}

const elsewhere = Object.entries(RUN_ELSEWHERE).map(([file, test]) => ({
  file,
  test,
  text: readFileSync(join(repoDir, file), 'utf8'),
}));
const blocks = readdirSync(tsDir)
  .filter((f) => f.endsWith('.ts'))
  .sort((a, b) =>
    a.startsWith('README') ? -1 : b.startsWith('README') ? 1 : a.localeCompare(b, 'en', { numeric: true }),
  );
const results = [];
for (const file of blocks) {
  const name = file.replace(/\.ts$/, '');
  const source = readFileSync(join(tsDir, file), 'utf8');
  const program = elsewhere.find((e) => `${e.text}\nexport {};\n` === source || `${e.text}export {};\n` === source);
  if (program) {
    results.push({ name, status: 'elsewhere', note: `= ${program.file}, run by ${program.test}` });
    continue;
  }
  const started = performance.now();
  const names = declared(source);
  const unknown = names.filter((n) => !(n in supplied));
  if (unknown.length > 0) {
    results.push({
      name,
      status: 'FAIL',
      note: `declares ${unknown.join(', ')}, which run-blocks.mjs does not supply`,
    });
    continue;
  }
  const given = {};
  let note = '';
  try {
    for (const n of names) given[n] = await supplied[n]();
    Object.assign(globalThis, given);
    const esnext = join(esnextDir, `${name}.js`);
    const needs = [
      ...(/^\s*@\w/m.test(source) ? ['decorators'] : []),
      ...(/^\s*(await\s+)?using\s/m.test(source) && nodeMajor < 24 ? ['`await using` before Node 24'] : []),
    ];
    if (needs.length === 0) await withTimeout(import(pathToFileURL(esnext).href), name);
    else {
      // As compiled for esnext it must not load here (the pages say so); each es2022 build runs.
      const refused = await import(pathToFileURL(esnext).href).then(
        () => null,
        (err) => err,
      );
      if (!(refused instanceof SyntaxError))
        throw new Error(
          `loaded on Node ${nodeMajor} as compiled for esnext, though it has ${needs.join(' and ')}: ${refused}`,
        );
      for (const dir of es2022Dirs) await withTimeout(import(pathToFileURL(join(dir, `${name}.js`)).href), name);
      note = `${needs.join(', ')}: esnext refused (SyntaxError), es2022 ran (${es2022Dirs.length}x)`;
    }
    if (process.exitCode !== undefined && process.exitCode !== 0)
      throw new Error(`set process.exitCode to ${process.exitCode}`);
    results.push({ name, status: 'ok', note });
  } catch (err) {
    results.push({ name, status: 'FAIL', note: err instanceof Error ? (err.stack ?? err.message) : String(err) });
    process.exitCode = undefined;
  } finally {
    for (const n of Object.keys(given)) delete globalThis[n];
    if (given.grant) await given.grant.release().catch(() => false);
  }
  results.at(-1).ms = Math.round(performance.now() - started);
}

await locks.close();
await db.destroy();
await conn.end();
await admin.query(`DROP DATABASE \`${dbName}\``);
await admin.end();

console.log(`\ndocs blocks on Node ${process.versions.node}:`);
for (const r of results)
  console.log(`  ${r.status.padEnd(9)} ${r.name.padEnd(28)} ${r.ms === undefined ? '' : `${r.ms} ms`}  ${r.note}`);
const failed = results.filter((r) => r.status === 'FAIL');
console.log(
  `${results.filter((r) => r.status === 'ok').length} ran, ${results.filter((r) => r.status === 'elsewhere').length} run elsewhere, ${failed.length} failed`,
);
// Blocks may leave pools of their own open (a block that shows only how to create a manager): exit here.
process.exit(failed.length > 0 ? 1 : 0);
