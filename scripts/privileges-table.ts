// Writes the grants table (src/admin/privileges.ts) into every README.md and docs/*.md that has
// the markers below, replacing what stands between them. Usage: npm run docs:privileges
// test/privileges-doc.test.ts fails while a file with the markers is stale.
import { readdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { privilegesTable } from '../src/admin/privileges.js';

export const START = '<!-- privileges:start -->';
export const END = '<!-- privileges:end -->';
const NOTE = '<!-- generated from src/admin/privileges.ts by `npm run docs:privileges`: edit there -->';
const FOOTER = [
  '',
  "`mysql-rwlock privileges --role ROLE --user \"'name'@'host'\" [--database DB]` prints a role's row as `GRANT` statements,",
  'one per line (the database defaults to the one `--url` or `MYSQL_URL` names); it connects to nothing. A statement',
  'or login refused for lack of a privilege fails with `PrivilegeError` (`ERR_RWLOCK_PRIVILEGE`), whose message starts',
  "with the server's and names that command. Before a manager's first grant it checks, with statements that change",
  'nothing, that its user may release and settle what it acquires, so a user who could acquire but not release is',
  'refused with `PrivilegeError` before any grant is written. `test/privileges.test.ts` runs every operation of each',
  'role as a user with exactly its grants, on MariaDB and MySQL.',
].join('\n');

/** README.md and docs/*.md under `root` that hold the start marker. */
export function filesWithMarkers(root: string): string[] {
  const docs = join(root, 'docs');
  const candidates = [
    join(root, 'README.md'),
    ...(existsSync(docs)
      ? readdirSync(docs)
          .filter((f) => f.endsWith('.md'))
          .map((f) => join(docs, f))
      : []),
  ];
  return candidates.filter((f) => existsSync(f) && readFileSync(f, 'utf8').includes(START));
}

/** `text` with the region between the markers (every pair) replaced by the current table. */
export function withCurrentTable(text: string, file = 'the file'): string {
  const parts = text.split(START);
  return parts
    .map((part, i) => {
      if (i === 0) return part;
      const end = part.indexOf(END);
      if (end < 0) throw new Error(`${file}: ${START} without ${END}`);
      return `${START}\n${NOTE}\n${privilegesTable()}\n${FOOTER}\n${part.slice(end)}`;
    })
    .join('');
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const root = join(import.meta.dirname, '..');
  for (const file of filesWithMarkers(root)) {
    const before = readFileSync(file, 'utf8');
    const after = withCurrentTable(before, file);
    if (after !== before) writeFileSync(file, after);
    process.stdout.write(`${relative(root, file)}: ${after === before ? 'up to date' : 'table written'}\n`);
  }
}
