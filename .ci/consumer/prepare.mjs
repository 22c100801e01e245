// Fills a consumer app's src/ from an installed mysql-rwlock (see .ci/consumer-matrix.sh):
// - src/entries/: one use file per entry point of the package's `exports` (`.` -> index.ts,
//   `./prometheus` -> prometheus.ts, `./a/b` -> a-b.ts), copied from the folder of this script. An
//   entry without a use file, or a use file for no entry, fails: a new subpath must get one.
// - src/examples/: every ```ts block of the package's README.md and docs/*.md, each its own module
//   (`export {}` appended) named after its file and line. ```ts nocheck blocks are counted, not copied.
//   A page listed in SKIPPED_DOCS is not read: its blocks need packages a consumer app does not have.
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
  if (!entries.some((e) => e.file === file)) problems.push(`.ci/consumer/${file} is for no entry point in the package's exports`);
}

// docs/orms.md's blocks import the ORMs (Prisma, TypeORM, Sequelize, ...), which this app does not
// install: test/orm/* type-checks and runs them against the real ORMs and checks that the page
// carries them verbatim.
const SKIPPED_DOCS = new Map([['docs/orms.md', 'its blocks import ORMs; test/orm/* type-checks and runs them verbatim']]);
const allDocs = ['README.md', ...(existsSync(join(pkgDir, 'docs')) ? readdirSync(join(pkgDir, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`) : [])];
const docs = allDocs.filter((doc) => !SKIPPED_DOCS.has(doc));
mkdirSync(join(appDir, 'src/examples'), { recursive: true });
let checked = 0;
const skipped = [];
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
      if (fence[3].split(/\s+/).includes('nocheck')) skipped.push(where);
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
for (const doc of allDocs.filter((d) => SKIPPED_DOCS.has(d))) console.error(`examples: ${doc} not checked here: ${SKIPPED_DOCS.get(doc)}`);
console.error(`examples: ${checked} ts blocks from ${docs.filter((d) => existsSync(join(pkgDir, d))).join(', ')} to check; ${skipped.length} skipped as ts nocheck${skipped.length ? `: ${skipped.join(', ')}` : ''}`);
for (const { specifier, file } of entries) console.log(`${specifier} src/entries/${file}`);
if (problems.length) {
  for (const p of problems) console.error(`consumer-matrix: ${p}`);
  process.exit(1);
}
