// The layout rules the test command keeps (docs/architecture.md): no import cycle among
// src/**/*.ts (type-only imports count: a cycle of types is still a tangle to read), no source
// file over 300 lines, no folder over 15 entries, and in src/driver and src/ipam-driver no room
// importing a higher room (ROOMS). Prints what breaks them; exit status 1 if anything does.
import fs from 'node:fs';
import path from 'node:path';

const MAX_LINES = 300;
const MAX_ENTRIES = 15;
// Rooms from the floor up: a room imports only rooms below it (type-only imports too), so each
// reads without those above. Files at the folder's root stand above every room.
const ROOMS = {
  driver: ['model', 'ovs', 'links', 'records', 'effects', 'qos', 'ports', 'network', 'vxlan', 'vip', 'uplink', 'groups', 'endpoint', 'upkeep'],
  'ipam-driver': ['state', 'index', 'allocation', 'pools', 'recovery'],
};
const root = path.resolve(process.argv[2] ?? 'src');
const problems = [];
const files = [];
const walk = (dir) => {
  const entries = fs.readdirSync(dir, { withFileTypes: true });
  if (entries.length > MAX_ENTRIES) problems.push(`${path.relative(root, dir) || '.'}/: ${entries.length} entries (at most ${MAX_ENTRIES})`);
  for (const e of entries) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p);
    else if (p.endsWith('.ts')) files.push(p);
  }
};
walk(root);

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

// A file's place: [folder with rooms, its room's index (the room count at the folder's root)].
const placeOf = (f) => {
  for (const [folder, layers] of Object.entries(ROOMS)) {
    const parts = path.relative(path.join(root, folder), f).split(path.sep);
    if (parts[0] === '..' || path.isAbsolute(parts[0])) continue;
    if (parts.length === 1) return [folder, layers.length];
    const i = layers.indexOf(parts[0]);
    if (i < 0) problems.push(`${path.relative(root, f)}: room ${parts[0]} is not in check-layout.mjs's ROOMS.${folder}`);
    return [folder, i < 0 ? layers.length : i];
  }
  return undefined;
};
for (const [f, deps] of graph) {
  const from = placeOf(f);
  if (from === undefined) continue;
  for (const d of deps) {
    const to = placeOf(d);
    if (to !== undefined && to[0] === from[0] && to[1] > from[1]) {
      problems.push(`import up a layer: ${path.relative(root, f)} -> ${path.relative(root, d)}`);
    }
  }
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
  console.error([...new Set(problems)].join('\n'));
  process.exit(1);
}
console.log(
  `layout: ${files.length} files under ${path.relative(process.cwd(), root) || '.'}, no import cycle, none over ${MAX_LINES} lines, no folder over ${MAX_ENTRIES} entries, none importing a higher room of ${Object.keys(ROOMS).join('/ or ')}/`,
);
