#!/usr/bin/env node
// The shape of src/ at a glance, for a newcomer finding their way and for a reviewer checking that
// it stays readable: no file over 400 lines, no function over 80 lines without a reason, no import
// against the layers.
//   node scripts/code-shape.mjs      (npm run code-shape)
// It prints, and always exits 0 (a report, not a gate):
// 1. The tree of src/: each file with its lines, each folder with the total of what it holds.
// 2. The five longest files.
// 3. The ten longest functions: function declarations, methods, constructors and accessors, and
//    arrow functions or function expressions assigned to a const or a class property (callbacks
//    passed inline are part of the function around them). A function's lines run from its first
//    token (the comment above it left out) to its last. One over 80 lines is flagged, and counts
//    as "reason given" when the comments just above it (its JSDoc and // lines; for a const, those
//    above the `const`; for an overloaded method, above any of its signatures) say "Longer than 80
//    lines on purpose", any case, followed by the reason, as src/lock/sections/section-attempt.ts does. For
//    an exported function, put it in // lines above the JSDoc: the JSDoc is the API reference's.
// 4. Imports between the folders of src/ (a top-level module counts as its own folder), `import`
//    and `export ... from` alike, type-only ones counted apart; then every import that goes
//    against the layers (LAYERS below: a module may import its own layer or a lower one), and the
//    imports that leave src/; then the imports between the rooms of src/lock/ (LOCK_ROOMS) and any
//    that runs up their order.
// 5. The file names used more than once in src/ (index.ts and README.md aside).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..');
const src = join(repo, 'src');
const FILE_LIMIT = 400;
const FUNCTION_LIMIT = 80;
const REASON = new RegExp(`longer than ${FUNCTION_LIMIT} lines on purpose`, 'i');

/**
 * The layers of src/, lowest first, as CONTRIBUTING.md ("The layout of the source") and the folder
 * READMEs describe them. A unit is a folder of src/ or a module at its top.
 */
const LAYERS = [
  {
    name: 'base',
    units: [
      'src/errors.ts',
      'src/error-base.ts',
      'src/errors-setup.ts',
      'src/options.ts',
      'src/options',
      'src/types.ts',
      'src/test-switches.ts',
      'src/sql',
      // src/contract/README.md: the types an application holds and the channels, which both the lock and
      // the layers above it import.
      'src/contract',
    ],
  },
  // src/lock/scheduled/ (the manager's runExclusive and maintenance) runs src/admin/'s reap and purge.
  { name: 'lock', units: ['src/lock', 'src/admin'] },
  {
    name: 'built on the lock',
    units: [
      'src/observability',
      'src/adapters',
      'src/decorators',
      'src/nestjs',
      'src/cron',
      'src/reaper-daemon',
      'src/cli',
      'src/dashboard',
    ],
  },
  { name: 'entry', units: ['src/index.ts'] },
];

/**
 * Modules whose folder README puts them in a lower layer than their folder, as
 * `'src/folder/file.ts': ['layer', 'the README's words that do']`. None today: src/contract/ holds
 * what used to need it.
 */
const PLACED = {};

/**
 * The rooms of src/lock/, top down, as src/lock/README.md lists them: a room may import its own
 * modules and the rooms below it, never one above.
 */
const LOCK_ROOMS = ['manager', 'leader', 'groups', 'sections', 'scheduled', 'fence', 'durable', 'context', 'waiting'];

const rel = (path) => relative(repo, path).split(sep).join('/');

/** Every file under dir, depth first, folders after the files beside them. */
function walk(dir) {
  const entries = readdirSync(dir)
    .map((name) => ({ name, path: join(dir, name) }))
    .map((e) => ({ ...e, dir: statSync(e.path).isDirectory() }))
    .sort((a, b) => Number(a.dir) - Number(b.dir) || a.name.localeCompare(b.name));
  return entries.map((e) =>
    e.dir ? { ...e, children: walk(e.path) } : { ...e, lines: lineCount(readFileSync(e.path, 'utf8')) },
  );
}

function lineCount(text) {
  return text.length === 0 ? 0 : text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
}

const total = (node) => (node.dir ? node.children.reduce((n, c) => n + total(c), 0) : node.lines);
const files = (node) => (node.dir ? node.children.flatMap(files) : [node]);

const tree = walk(src);
const root = { dir: true, name: 'src', path: src, children: tree };
const allFiles = files(root);
const tsFiles = allFiles.filter((f) => f.name.endsWith('.ts'));
const width = Math.max(...allFiles.map((f) => rel(f.path).length)) + 4;
const pad = (text, n = width) => text.padEnd(n);
const over = (n, limit) => (n > limit ? `  over ${limit}` : '');

function printTree(node, depth) {
  const indent = '  '.repeat(depth);
  if (node.dir) {
    console.log(`${pad(`${indent}${node.name}/`)}${String(total(node)).padStart(6)}`);
    for (const child of node.children) printTree(child, depth + 1);
  } else {
    console.log(`${pad(`${indent}${node.name}`)}${String(node.lines).padStart(6)}${over(node.lines, FILE_LIMIT)}`);
  }
}

console.log(`1. The tree of src/ (lines; a folder: the total of what it holds)\n`);
printTree(root, 0);

console.log(`\n2. The five longest files\n`);
for (const f of [...allFiles].sort((a, b) => b.lines - a.lines).slice(0, 5)) {
  console.log(`${pad(rel(f.path))}${String(f.lines).padStart(6)}${over(f.lines, FILE_LIMIT)}`);
}

// ---- 3. functions

function nameOf(node) {
  return node.name && (ts.isIdentifier(node.name) || ts.isPrivateIdentifier(node.name) || ts.isStringLiteral(node.name))
    ? node.name.text
    : node.name
      ? node.name.getText()
      : undefined;
}

/** The name a function is known by (Class.method, a const's name), or undefined for an inline callback. */
function functionName(node) {
  const owner = (n) => (ts.isClassLike(n.parent) && n.parent.name ? `${n.parent.name.text}.` : '');
  if (ts.isFunctionDeclaration(node)) return node.name?.text ?? 'default';
  if (ts.isConstructorDeclaration(node)) return `${owner(node)}constructor`;
  if (ts.isMethodDeclaration(node)) return `${owner(node)}${nameOf(node)}`;
  if (ts.isGetAccessorDeclaration(node)) return `${owner(node)}get ${nameOf(node)}`;
  if (ts.isSetAccessorDeclaration(node)) return `${owner(node)}set ${nameOf(node)}`;
  if (ts.isArrowFunction(node) || ts.isFunctionExpression(node)) {
    const p = node.parent;
    if (ts.isVariableDeclaration(p) && ts.isIdentifier(p.name) && ts.getCombinedNodeFlags(p) & ts.NodeFlags.Const)
      return p.name.text;
    if (ts.isPropertyDeclaration(p)) return `${owner(p)}${nameOf(p)}`;
  }
  return undefined;
}

/** The nodes whose leading comment speaks for a function: the statement it stands in, its overloads. */
function commentHolders(node) {
  if (ts.isArrowFunction(node) || ts.isFunctionExpression(node)) {
    const p = node.parent;
    return ts.isVariableDeclaration(p) ? [p.parent.parent] : [p];
  }
  const holders = [node];
  const siblings = ts.isClassLike(node.parent) ? node.parent.members : node.parent.statements;
  if (siblings && !ts.isConstructorDeclaration(node)) {
    const name = functionName(node);
    for (const s of siblings)
      if (s !== node && s.kind === node.kind && !s.body && functionName(s) === name) holders.push(s);
  }
  return holders;
}

function leadingComments(sf, node) {
  const text = sf.getFullText();
  return (ts.getLeadingCommentRanges(text, node.getFullStart()) ?? []).map((r) => text.slice(r.pos, r.end)).join('\n');
}

const functions = [];
for (const f of tsFiles) {
  const sf = ts.createSourceFile(f.path, readFileSync(f.path, 'utf8'), ts.ScriptTarget.Latest, true);
  const visit = (node) => {
    if (ts.isFunctionLike(node) && node.body) {
      const name = functionName(node);
      if (name !== undefined) {
        const start = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1;
        const end = sf.getLineAndCharacterOfPosition(node.getEnd()).line + 1;
        const comment = commentHolders(node)
          .map((h) => leadingComments(sf, h))
          .join('\n');
        functions.push({
          name,
          where: `${rel(f.path)}:${start}`,
          lines: end - start + 1,
          reason: REASON.test(comment),
        });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
}

console.log(`\n3. The ten longest functions (of ${functions.length}; over ${FUNCTION_LIMIT} lines needs a reason)\n`);
const longest = [...functions].sort((a, b) => b.lines - a.lines);
const fnWidth = Math.max(...longest.slice(0, 10).map((fn) => fn.name.length)) + 2;
for (const fn of longest.slice(0, 10)) {
  const flag = fn.lines > FUNCTION_LIMIT ? `  over ${FUNCTION_LIMIT}: ${fn.reason ? 'reason given' : 'NO REASON'}` : '';
  console.log(`${fn.name.padEnd(fnWidth)}${pad(fn.where)}${String(fn.lines).padStart(5)}${flag}`);
}
const unexplained = longest.filter((fn) => fn.lines > FUNCTION_LIMIT && !fn.reason);
const explained = longest.filter((fn) => fn.lines > FUNCTION_LIMIT && fn.reason);
console.log(
  `over ${FUNCTION_LIMIT} lines: ${explained.length + unexplained.length} (${explained.length} with a reason, ` +
    `${unexplained.length} without${unexplained.length ? `: ${unexplained.map((fn) => fn.where).join(', ')}` : ''})`,
);

// ---- 4. imports

const layerIndex = new Map(LAYERS.map((l, i) => [l.name, i]));

/** src/lock/durable/grant.ts -> src/lock; src/options.ts -> src/options.ts. */
function unitOf(file) {
  const parts = rel(file).split('/');
  return parts.length === 2 ? parts.join('/') : parts.slice(0, 2).join('/');
}

function layerOf(file) {
  const placed = PLACED[rel(file)];
  if (placed) return layerIndex.get(placed[0]);
  const unit = unitOf(file);
  const i = LAYERS.findIndex((l) => l.units.includes(unit));
  if (i < 0) throw new Error(`${unit} is in no layer: add it to LAYERS in scripts/code-shape.mjs`);
  return i;
}

const imports = [];
for (const f of tsFiles) {
  const sf = ts.createSourceFile(f.path, readFileSync(f.path, 'utf8'), ts.ScriptTarget.Latest, true);
  for (const st of sf.statements) {
    if (!(ts.isImportDeclaration(st) || ts.isExportDeclaration(st)) || !st.moduleSpecifier) continue;
    const spec = st.moduleSpecifier.text;
    if (!spec.startsWith('.')) continue;
    let typeOnly;
    if (ts.isImportDeclaration(st)) {
      const clause = st.importClause;
      const named = clause?.namedBindings && ts.isNamedImports(clause.namedBindings) ? clause.namedBindings : undefined;
      typeOnly =
        !!clause &&
        (clause.isTypeOnly || (!clause.name && !!named?.elements.length && named.elements.every((e) => e.isTypeOnly)));
    } else {
      typeOnly =
        st.isTypeOnly ||
        (!!st.exportClause &&
          ts.isNamedExports(st.exportClause) &&
          st.exportClause.elements.length > 0 &&
          st.exportClause.elements.every((e) => e.isTypeOnly));
    }
    const target = resolve(dirname(f.path), spec).replace(/\.js$/, '.ts');
    const line = sf.getLineAndCharacterOfPosition(st.getStart(sf)).line + 1;
    imports.push({ from: f.path, to: target, line, typeOnly, inside: target.startsWith(src + sep) });
  }
}

const pairs = new Map();
for (const i of imports.filter((i) => i.inside && unitOf(i.from) !== unitOf(i.to))) {
  const key = `${unitOf(i.from)} -> ${unitOf(i.to)}`;
  const p = pairs.get(key) ?? { n: 0, types: 0 };
  p.n++;
  if (i.typeOnly) p.types++;
  pairs.set(key, p);
}

console.log(`\n4. Imports between the folders of src/ (a module may import its own layer or a lower one)\n`);
console.log('Layers, lowest first:');
LAYERS.forEach((l, i) => console.log(`  ${i}. ${l.name}: ${l.units.join(', ')}`));
if (Object.keys(PLACED).length > 0) console.log('Modules placed below their folder by its README:');
for (const [file, [layer, why]] of Object.entries(PLACED)) console.log(`  ${file}: ${layer} (${why})`);
console.log('');
const keyWidth = Math.max(...[...pairs.keys()].map((k) => k.length)) + 2;
for (const [key, p] of [...pairs].sort(([a], [b]) => a.localeCompare(b))) {
  const [a, b] = key.split(' -> ');
  const both = pairs.has(`${b} -> ${a}`) ? '  (both ways)' : '';
  const plural = p.n === 1 ? 'import' : 'imports';
  console.log(`${key.padEnd(keyWidth)}${p.n} ${plural}${p.types ? ` (${p.types} type-only)` : ''}${both}`);
}

const against = imports.filter((i) => i.inside && layerOf(i.from) < layerOf(i.to));
console.log(`\nAgainst the layers: ${against.length === 0 ? 'none' : against.length}`);
for (const i of against) {
  const [from, to] = [layerOf(i.from), layerOf(i.to)];
  console.log(
    `  ${rel(i.from)}:${i.line} imports ${rel(i.to)}${i.typeOnly ? ' (type-only)' : ''}: ` +
      `${LAYERS[from].name} -> ${LAYERS[to].name}`,
  );
}

const outside = imports.filter((i) => !i.inside);
console.log(`\nImports that leave src/: ${outside.length === 0 ? 'none' : outside.length}`);
for (const i of outside)
  console.log(`  ${rel(i.from)}:${i.line} imports ${rel(i.to)}${i.typeOnly ? ' (type-only)' : ''}`);

// ---- 4b. the rooms of src/lock/

const lockDir = join(src, 'lock') + sep;
const roomOf = (file) => (file.startsWith(lockDir) ? relative(lockDir, file).split(sep)[0] : undefined);
const roomPairs = new Map();
const roomsUp = [];
for (const i of imports) {
  const [a, b] = [roomOf(i.from), roomOf(i.to)];
  if (a === undefined || b === undefined || a === b) continue;
  for (const room of [a, b])
    if (!LOCK_ROOMS.includes(room))
      throw new Error(`src/lock/${room} is no room: add it to LOCK_ROOMS in scripts/code-shape.mjs`);
  roomPairs.set(`${a} -> ${b}`, (roomPairs.get(`${a} -> ${b}`) ?? 0) + 1);
  if (LOCK_ROOMS.indexOf(b) < LOCK_ROOMS.indexOf(a)) roomsUp.push(i);
}
console.log(`\nThe rooms of src/lock/, top down: ${LOCK_ROOMS.join(', ')}`);
for (const [key, n] of [...roomPairs].sort(([a], [b]) => a.localeCompare(b)))
  console.log(`  ${key.padEnd(26)} ${n} import${n === 1 ? '' : 's'}`);
console.log(`Against the rooms' order: ${roomsUp.length === 0 ? 'none' : roomsUp.length}`);
for (const i of roomsUp) console.log(`  ${rel(i.from)}:${i.line} imports ${rel(i.to)}`);

// ---- 5. file names

// A module's name says what it holds wherever it is read (a stack trace, an import, a search): two
// modules of one name are two things under one word. index.ts (an entry point's folder module) and
// README.md are the same kind of thing in every folder.
const SAME_KIND = new Set(['index.ts', 'README.md']);
const byName = new Map();
for (const f of allFiles) if (!SAME_KIND.has(f.name)) byName.set(f.name, [...(byName.get(f.name) ?? []), rel(f.path)]);
const repeated = [...byName].filter(([, paths]) => paths.length > 1);
console.log(
  `\n5. File names used more than once in src/ (index.ts and README.md aside): ${repeated.length === 0 ? 'none' : repeated.length}`,
);
for (const [name, paths] of repeated) console.log(`  ${name}: ${paths.join(', ')}`);
