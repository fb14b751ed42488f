// The layout rules the test command keeps (README, "Development"): no import cycle among
// src/**/*.ts (type-only imports count: a cycle of types is still a tangle to read), and no
// source file over 300 lines. Prints what breaks them; exit status 1 if anything does.
import fs from 'node:fs';
import path from 'node:path';

const MAX_LINES = 300;
const root = path.resolve(process.argv[2] ?? 'src');
const files = [];
const walk = (dir) => {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p);
    else if (p.endsWith('.ts')) files.push(p);
  }
};
walk(root);

const problems = [];
const graph = new Map();
for (const f of files) {
  const text = fs.readFileSync(f, 'utf8');
  const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
  if (lines > MAX_LINES) problems.push(`${path.relative(root, f)}: ${lines} lines (at most ${MAX_LINES})`);
  const deps = [];
  for (const m of text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)) {
    const target = path.resolve(path.dirname(f), m[1]).replace(/\.js$/, '.ts');
    if (fs.existsSync(target)) deps.push(target);
  }
  graph.set(f, deps);
}

const state = new Map();
const stack = [];
const visit = (f) => {
  state.set(f, 'open');
  stack.push(f);
  for (const d of graph.get(f) ?? []) {
    if (state.get(d) === 'open') {
      problems.push(`import cycle: ${[...stack.slice(stack.indexOf(d)), d].map((x) => path.relative(root, x)).join(' -> ')}`);
    } else if (!state.has(d)) visit(d);
  }
  stack.pop();
  state.set(f, 'done');
};
for (const f of files) if (!state.has(f)) visit(f);

if (problems.length > 0) {
  console.error(problems.join('\n'));
  process.exit(1);
}
console.log(
  `layout: ${files.length} files under ${path.relative(process.cwd(), root) || '.'}, no import cycle, none over ${MAX_LINES} lines`,
);
