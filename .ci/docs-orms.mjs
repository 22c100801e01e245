// Writes docs/orms.md's code into a new app's src/ (see .ci/docs-orms.sh): each ```ts block becomes
// src/<section>.ts as written, the ```prisma block src/schema.prisma. A block that defines the recipe's
// `connect(url)` and `repay(client, grant, loanId, amount)` gets a few lines appended that run it: the
// client from MYSQL_URL, one payment under `withWriteGrant`, the loan's total read back and printed,
// the client closed. Prints the names of the runnable modules, one a line.
// Usage: node docs-orms.mjs <orms.md> <app dir>
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [page, appDir] = process.argv.slice(2);
if (!page || !appDir) throw new Error('usage: node docs-orms.mjs <orms.md> <app dir>');
const lines = readFileSync(page, 'utf8').split('\n');
mkdirSync(join(appDir, 'src'), { recursive: true });

// Names prefixed with __ so that they cannot meet a name of the block's own.
const runner = (name) => `
// Appended by .ci/docs-orms.mjs: the recipe run once against MYSQL_URL.
import __knex from 'knex';
import { createLockManager as __createLockManager } from 'mysql-rwlock';
const __url = process.env.MYSQL_URL ?? '';
const __db = __knex({ client: 'mysql2', connection: __url });
const __client = await connect(__url);
try {
  await __createLockManager({ knex: __db }).withWriteGrant('loan:${name}', (grant) => repay(__client, grant, '${name}', 125));
  const [__rows] = (await __db.raw('SELECT repaid_cents AS repaid FROM loans WHERE id = ?', ['${name}'])) as unknown as [Array<{ repaid: number }>];
  console.log(\`${name}: repaid \${__rows[0]?.repaid}\`);
} finally {
  const __c = __client as unknown as Record<string, (() => Promise<unknown>) | { end(): Promise<unknown> } | undefined>;
  const __pool = __c.$client as { end(): Promise<unknown> } | undefined;
  const __close = (['$disconnect', 'destroy', 'close', 'end'] as const).find((m) => typeof __c[m] === 'function');
  if (__pool) await __pool.end();
  else if (__close) await (__c[__close] as () => Promise<unknown>).call(__client);
  await __db.destroy();
}
`;

let section = 'intro';
const used = new Set();
for (let i = 0; i < lines.length; i++) {
  const heading = /^## (.+)$/.exec(lines[i]);
  // A section's first word names its module, its loan and its resource: mysql2, knex, prisma, ...
  if (heading)
    section = heading[1]
      .split(/[\s:]/)[0]
      .toLowerCase()
      .replace(/[^a-z0-9]/g, '');
  const fence = /^```(\S*)(.*)$/.exec(lines[i]);
  if (!fence || fence[1] === '') continue;
  let end = i + 1;
  while (end < lines.length && lines[end] !== '```') end++;
  const body = lines.slice(i + 1, end).join('\n');
  if (fence[1] === 'prisma') writeFileSync(join(appDir, 'src', 'schema.prisma'), `${body}\n`);
  if (fence[1] === 'ts') {
    let name = section;
    for (let n = 2; used.has(name); n++) name = `${section}-${n}`;
    used.add(name);
    const runnable = /^(async )?function connect\(/m.test(body) && /^async function repay\(/m.test(body);
    writeFileSync(join(appDir, 'src', `${name}.ts`), `${body}\n${runnable ? runner(name) : 'export {};\n'}`);
    if (runnable) console.log(name);
  }
  i = end;
}
