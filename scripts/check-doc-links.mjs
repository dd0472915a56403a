#!/usr/bin/env node
// Checks the relative links of the Markdown docs: every [text](target) outside code must name a file that
// exists and, with #anchor, a heading of that file (GitHub's anchors). Links outside the repository are listed.
// Usage: node scripts/check-doc-links.mjs [files...] (default: README.md, CHANGELOG.md, ARCHITECTURE.md, docs/*.md)
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const defaults = [
  'README.md',
  'CHANGELOG.md',
  'ARCHITECTURE.md',
  ...readdirSync(path.join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];
const files = (process.argv.length > 2 ? process.argv.slice(2) : defaults).filter((f) =>
  existsSync(path.resolve(root, f)),
);

/** The text outside fenced code blocks and inline code, line by line (line numbers kept). */
function prose(text) {
  let fenced = false;
  return text.split('\n').map((line) => {
    if (/^\s*(```|~~~)/.test(line)) {
      fenced = !fenced;
      return '';
    }
    return fenced ? '' : line.replace(/`[^`]*`/g, '');
  });
}

/** GitHub's anchor for each heading of a Markdown file, duplicates numbered. */
const anchorCache = new Map();
function anchors(file) {
  if (anchorCache.has(file)) return anchorCache.get(file);
  const seen = new Map();
  const out = new Set();
  let fenced = false;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    const m = !fenced && /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const text = m[1].replace(/\[([^\]]*)\]\([^)]*\)/g, '$1');
    const base = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  anchorCache.set(file, out);
  return out;
}

const problems = [];
const outside = [];
let checked = 0;
for (const rel of files) {
  const file = path.resolve(root, rel);
  prose(readFileSync(file, 'utf8')).forEach((line, i) => {
    for (const m of line.matchAll(/!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1];
      const where = `${rel}:${i + 1}`;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) {
        outside.push(`${where}: ${target}`);
        continue;
      }
      checked++;
      const [p, anchor] = target.split('#', 2);
      const dest = p ? path.resolve(path.dirname(file), decodeURIComponent(p)) : file;
      if (!existsSync(dest)) {
        problems.push(`${where}: ${target}: no such file`);
        continue;
      }
      if (anchor === undefined) continue;
      if (statSync(dest).isDirectory() || !dest.endsWith('.md')) {
        problems.push(`${where}: ${target}: an anchor into a file that is not Markdown`);
      } else if (!anchors(dest).has(anchor)) {
        problems.push(`${where}: ${target}: no heading with that anchor in ${path.relative(root, dest)}`);
      }
    }
  });
}
const out = (line) => process.stdout.write(`${line}\n`);
for (const o of outside) out(`outside the repository: ${o}`);
for (const p of problems) out(p);
out(
  `${files.length} files, ${checked} relative links, ${problems.length} broken, ${outside.length} outside the repository`,
);
process.exit(problems.length ? 1 : 0);
