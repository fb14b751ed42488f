/**
 * The README and the pages under docs/ link to one another: every relative link points to a
 * file of the repository, and every #anchor to a heading of its page (GitHub's slugs). Also:
 * the README stays a front door (at most ~250 lines) that links every page of docs/.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const root = fileURLToPath(new URL('../../', import.meta.url));
const pages = [
  'README.md',
  ...fs
    .readdirSync(`${root}docs`)
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** The page's lines outside fenced code blocks. */
function prose(text: string): string[] {
  let fenced = false;
  return text.split('\n').filter((line) => {
    if (line.startsWith('```')) fenced = !fenced;
    return !fenced && !line.startsWith('```');
  });
}

/** GitHub's anchor of a heading: lowercase, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

function anchors(file: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of prose(fs.readFileSync(file, 'utf8'))) {
    const m = /^#{1,6} (.*)$/.exec(line);
    if (m === null) continue;
    const base = slug(m[1] ?? '');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

for (const page of pages) {
  t.test(`${page}: every relative link resolves`, async (t) => {
    const links = prose(fs.readFileSync(`${root}${page}`, 'utf8'))
      .join('\n')
      .replace(/`[^`\n]*`/g, '')
      .matchAll(/\]\(([^)\s]+)\)/g);
    let count = 0;
    for (const [, target = ''] of links) {
      if (/^[a-z]+:/.test(target)) continue; // http:, https:, mailto:
      count++;
      const [file = '', anchor] = target.split('#');
      const resolved = file === '' ? `${root}${page}` : path.resolve(path.dirname(`${root}${page}`), file);
      t.ok(fs.existsSync(resolved), `${target}: ${path.relative(root, resolved)} exists`);
      if (anchor !== undefined && fs.existsSync(resolved) && resolved.endsWith('.md')) {
        t.ok(anchors(resolved).has(anchor), `${target}: the heading #${anchor} exists`);
      }
    }
    t.pass(`${count} relative links`);
  });
}

t.test('the README is a front door that links every page of docs/', async (t) => {
  const readme = fs.readFileSync(`${root}README.md`, 'utf8');
  const lines = readme.split('\n').length - (readme.endsWith('\n') ? 1 : 0);
  t.ok(lines <= 250, `${lines} lines (at most 250)`);
  for (const page of pages.filter((p) => p !== 'README.md')) t.ok(readme.includes(`](${page})`), `the README links ${page}`);
});
