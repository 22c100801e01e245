// Fills a consumer app's src/ from an installed mysql-rwlock (see .ci/consumer-matrix.sh):
// - src/entries/: one use file per entry point of the package's `exports` (`.` -> index.ts,
//   `./prometheus` -> prometheus.ts, `./a/b` -> a-b.ts), copied from the folder of this script. An
//   entry without a use file, or a use file for no entry, fails: a new subpath must get one.
// - src/examples/: every ```ts block of the package's README.md and docs/*.md, each its own module
//   (`export {}` appended) named after its file and line. ```ts nocheck blocks are counted, not copied.
//   A block of docs/orms.md or docs/frameworks.md that imports a package the app does not install (an
//   ORM, Express, Fastify) is skipped, with its reason printed.
// Prints the entries (one `specifier file` line each) to stdout for coverage.mjs, the tally to stderr.
// Usage: node prepare.mjs <installed package dir> <app dir>
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const [pkgDir, appDir] = process.argv.slice(2);
if (!pkgDir || !appDir) throw new Error('usage: node prepare.mjs <installed package dir> <app dir>');
const useDir = dirname(fileURLToPath(import.meta.url));
const pkg = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'));
const problems = [];

const entries = Object.keys(pkg.exports ?? { '.': null })
  .filter((subpath) => !subpath.endsWith('.json'))
  .map((subpath) => ({
    specifier: subpath === '.' ? pkg.name : `${pkg.name}/${subpath.slice(2)}`,
    file: subpath === '.' ? 'index.ts' : `${subpath.slice(2).replaceAll('/', '-')}.ts`,
  }));
mkdirSync(join(appDir, 'src/entries'), { recursive: true });
for (const { specifier, file } of entries) {
  if (existsSync(join(useDir, file))) copyFileSync(join(useDir, file), join(appDir, 'src/entries', file));
  else problems.push(`the package exports '${specifier}' but .ci/consumer/${file}, which must use it, does not exist`);
}
for (const file of readdirSync(useDir).filter((f) => f.endsWith('.ts'))) {
  if (!entries.some((e) => e.file === file))
    problems.push(`.ci/consumer/${file} is for no entry point in the package's exports`);
}

// docs/orms.md's recipes import the ORMs (Prisma, TypeORM, Sequelize, ...) and docs/frameworks.md's
// examples Express and Fastify, which this app does not install: test/orm/* and test/frameworks.test.ts
// run them against the real packages and check that the pages carry them verbatim, and
// .ci/docs-orms.sh compiles docs/orms.md's code as written in a new app with the ORMs and runs it.
// Their blocks that import only what the app has (knex, mysql2, node:) are checked here.
const PAGES_OF_PACKAGES = ['docs/orms.md', 'docs/frameworks.md'];
const nodeModules = dirname(pkgDir);
function notInstalled(body) {
  const specifiers = [...body.matchAll(/\bfrom\s+'([^']+)'|\bimport\s+'([^']+)'/g)].map((m) => m[1] ?? m[2]);
  const packages = specifiers
    .filter((s) => !s.startsWith('.') && !s.startsWith('node:'))
    .map((s) =>
      s
        .split('/')
        .slice(0, s.startsWith('@') ? 2 : 1)
        .join('/'),
    );
  return [...new Set(packages)].filter((name) => !existsSync(join(nodeModules, name, 'package.json')));
}
const docs = [
  'README.md',
  ...(existsSync(join(pkgDir, 'docs'))
    ? readdirSync(join(pkgDir, 'docs'))
        .filter((f) => f.endsWith('.md'))
        .sort()
        .map((f) => `docs/${f}`)
    : []),
];
mkdirSync(join(appDir, 'src/examples'), { recursive: true });
let checked = 0;
const skipped = [];
const ormBlocks = [];
for (const doc of docs) {
  if (!existsSync(join(pkgDir, doc))) continue;
  const lines = readFileSync(join(pkgDir, doc), 'utf8').split('\n');
  for (let i = 0; i < lines.length; i++) {
    const fence = /^(`{3,})\s*(\S*)\s*(.*)$/.exec(lines[i]);
    if (!fence) continue;
    let end = i + 1;
    while (end < lines.length && !lines[end].startsWith(fence[1])) end++;
    const where = `${doc}:${i + 1}`;
    if (fence[2] === 'ts' || fence[2] === 'typescript') {
      const missing = PAGES_OF_PACKAGES.includes(doc) ? notInstalled(lines.slice(i + 1, end).join('\n')) : [];
      if (fence[3].split(/\s+/).includes('nocheck')) skipped.push(where);
      else if (missing.length) ormBlocks.push(`${where} (${missing.join(', ')})`);
      else {
        const name = `${doc.replace(/\.md$/, '').replaceAll('/', '-')}-L${i + 1}.ts`;
        writeFileSync(join(appDir, 'src/examples', name), `${lines.slice(i + 1, end).join('\n')}\nexport {};\n`);
        checked++;
      }
    }
    i = end;
  }
}
console.error(`entries: ${entries.map((e) => `${e.specifier} (${e.file})`).join(', ')}`);
if (ormBlocks.length)
  console.error(
    `examples: ${ormBlocks.length} blocks import an ORM or framework this app does not install, run against the real packages by test/orm/*, test/frameworks.test.ts and .ci/docs-orms.sh instead: ${ormBlocks.join(', ')}`,
  );
console.error(
  `examples: ${checked} ts blocks from ${docs.filter((d) => existsSync(join(pkgDir, d))).join(', ')} to check; ${skipped.length} skipped as ts nocheck${skipped.length ? `: ${skipped.join(', ')}` : ''}`,
);
for (const { specifier, file } of entries) console.log(`${specifier} src/entries/${file}`);
if (problems.length) {
  for (const p of problems) console.error(`consumer-matrix: ${p}`);
  process.exit(1);
}
