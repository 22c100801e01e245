#!/usr/bin/env node
// Every relative link in the Markdown of a package resolves inside that package.
//   node scripts/check-links.mjs <dir>
// <dir> is the unpacked tarball (.ci/pack-check.sh passes it) or any directory. Every .md file under it
// (node_modules aside) is read; each relative link or image, inline or by reference, must name a file
// inside <dir> (not a directory, not outside it), and an #anchor must name a heading or an
// <a id/name> of the Markdown file it points into (GitHub's heading slugs). Absolute URLs are not
// fetched. Links inside code blocks and code spans are not links. Exit 1 lists every broken link.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

const root = process.argv[2];
if (!root || !existsSync(root) || !statSync(root).isDirectory()) {
  console.error('usage: node scripts/check-links.mjs <dir>');
  process.exit(2);
}
const rootAbs = resolve(root);

function markdownFiles(dir) {
  const found = [];
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === '.git') continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) found.push(...markdownFiles(path));
    else if (name.endsWith('.md')) found.push(path);
  }
  return found.sort();
}

/** A fence line's marker (``` or ~~~, as long as written), or null. A backtick fence's info has no backtick. */
function fenceOf(line) {
  const m = /^ {0,3}(`{3,}(?=[^`]*$)|~{3,})/.exec(line);
  return m ? m[1] : null;
}

/** Whether line closes the fenced block opened by marker: the same character, at least as long, nothing after. */
function closes(line, marker) {
  const m = /^ {0,3}(`{3,}|~{3,})\s*$/.exec(line);
  return m !== null && m[1][0] === marker[0] && m[1].length >= marker.length;
}

/** The text of a file with fenced code blocks blanked (line numbers kept) and code spans removed. */
function prose(text) {
  const out = [];
  let fence = null;
  for (const line of text.split('\n')) {
    if (fence === null && fenceOf(line) !== null) {
      fence = fenceOf(line);
      out.push('');
    } else if (fence !== null) {
      if (closes(line, fence)) fence = null;
      out.push('');
    } else {
      out.push(line.replace(/(`+)(?:(?!\1)[\s\S])*?\1/g, ''));
    }
  }
  return out;
}

/** GitHub's anchor for a heading: inline markup dropped, lower case, punctuation removed, spaces to '-'. */
function slug(heading) {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .replace(/`/g, '')
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
}

const anchorCache = new Map();
/** Every anchor a Markdown file defines: heading slugs (numbered when repeated) and <a id|name>. */
function anchorsOf(file) {
  let anchors = anchorCache.get(file);
  if (anchors) return anchors;
  anchors = new Set();
  const seen = new Map();
  const text = readFileSync(file, 'utf8');
  let fence = null;
  for (const line of text.split('\n')) {
    if (fence !== null) {
      if (closes(line, fence)) fence = null;
      continue;
    }
    if ((fence = fenceOf(line)) !== null) continue;
    const heading = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      const base = slug(heading[1]);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      anchors.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const m of line.matchAll(/<a\s+(?:[^>]*\s)?(?:id|name)="([^"]+)"/g)) anchors.add(m[1]);
  }
  anchorCache.set(file, anchors);
  return anchors;
}

/** Link targets in a line: [text](target "title"), ![alt](target), and [label]: target definitions. */
function targetsOf(line) {
  const targets = [];
  for (const m of line.matchAll(/\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+"[^"]*")?\s*\)/g))
    targets.push(m[1].replace(/^<|>$/g, ''));
  const def = /^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)/.exec(line);
  if (def) targets.push(def[1].replace(/^<|>$/g, ''));
  return targets;
}

const problems = [];
let checked = 0;
const files = markdownFiles(rootAbs);
for (const file of files) {
  const where = relative(rootAbs, file);
  prose(readFileSync(file, 'utf8')).forEach((line, i) => {
    for (const target of targetsOf(line)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto: ...: not a relative link
      checked++;
      const report = (why) => problems.push(`${where}:${i + 1}: ${target}: ${why}`);
      const hash = target.indexOf('#');
      const pathPart = decodeURIComponent(hash === -1 ? target : target.slice(0, hash));
      const anchor = hash === -1 ? null : decodeURIComponent(target.slice(hash + 1));
      const dest = pathPart === '' ? file : resolve(dirname(file), pathPart);
      if (dest !== rootAbs && !dest.startsWith(rootAbs + sep)) {
        report('points outside the package');
        continue;
      }
      if (!existsSync(dest)) {
        report('no such file in the package');
        continue;
      }
      if (statSync(dest).isDirectory()) {
        report('is a directory: link a file (a registry page does not list directories)');
        continue;
      }
      if (anchor !== null && anchor !== '' && dest.endsWith('.md') && !anchorsOf(dest).has(anchor)) {
        report(`no heading or anchor "#${anchor}" in ${relative(rootAbs, dest)}`);
      }
    }
  });
}

if (problems.length > 0) {
  console.error(
    `check-links: ${problems.length} broken relative link(s) in ${files.length} Markdown files under ${root}:`,
  );
  for (const p of problems) console.error(`  ${p}`);
  process.exit(1);
}
console.log(`check-links: ${checked} relative links in ${files.length} Markdown files under ${root} all resolve`);
