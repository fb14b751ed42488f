/**
 * docs/security.md names every surface the code has: each route of the plugin socket and of the
 * CNI socket (read from Fastify's route tables), each CLI command and subcommand (the command
 * table), each OVSNET_* setting (the settings table) and each file under src/ that listens. A new
 * one the page does not name fails here, with what to add.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import type { FastifyInstance } from 'fastify';
import { COMMANDS } from '../src/cli/commands.js';
import { buildCniServer } from '../src/cni/server.js';
import type { CniService } from '../src/cni/service.js';
import { SETTINGS } from '../src/config/settings.js';
import type { NetworkDriver } from '../src/driver/network-driver.js';
import type { Ipam } from '../src/ipam-driver/ipam.js';
import { createLogger } from '../src/lib/log.js';
import { buildServer } from '../src/plugin-api/server.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const page = fs.readFileSync(path.join(root, 'docs', 'security.md'), 'utf8');
/** What the page names: its code spans (`POST /x`, `ovsnet status`, `OVSNET_STORE`, `src/metrics.ts`). */
const named = new Set([...page.matchAll(/`([^`\n]+)`/g)].map((m) => m[1]));

/**
 * "METHOD /path" of every route, from Fastify's own table (printRoutes' tree: one node per line,
 * four columns per level, methods in brackets).
 */
async function routesOf(app: FastifyInstance): Promise<string[]> {
  await app.ready();
  const found: string[] = [];
  const stack: string[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    const m = /^([│├└─ ]*)(\S.*?)(?: \(([A-Z, ]+)\))?$/.exec(line);
    if (m === null) continue;
    const depth = Math.floor((m[1] ?? '').length / 4);
    stack.length = depth;
    stack[depth] = m[2] ?? '';
    for (const method of (m[3] ?? '').split(', ').filter((x) => x !== '')) found.push(`${method} ${stack.join('')}`);
  }
  await app.close();
  return found.sort();
}

const log = createLogger('silent');
const unused = <T extends object>() => ({}) as T;

t.test("every route of the plugin socket (Docker's methods and the admin endpoint) is named", async (t) => {
  const routes = await routesOf(
    buildServer({ log, ipam: unused<Ipam>(), driver: unused<NetworkDriver>(), info: () => Promise.reject(new Error('unused')) }),
  );
  t.ok(routes.includes('POST /NetworkDriver.CreateNetwork') && routes.includes('GET /ovsnet/v1/info'), 'the route table is read');
  for (const r of routes) t.ok(named.has(r), `docs/security.md names \`${r}\` (a row of the plugin socket's routes)`);
});

t.test('every route of the CNI socket is named', async (t) => {
  const routes = await routesOf(buildCniServer(unused<CniService>(), log));
  t.ok(routes.includes('POST /cni'), 'the route table is read');
  for (const r of routes) t.ok(named.has(r), `docs/security.md names \`${r}\` (a row of the CNI socket's routes)`);
});

t.test('every CLI command and subcommand is named', async (t) => {
  const commands = Object.entries(COMMANDS).flatMap(([name, spec]) => [
    `ovsnet ${name}`,
    ...Object.keys(spec.subcommands ?? {}).map((sub) => `ovsnet ${name} ${sub}`),
  ]);
  t.ok(commands.length >= 6, 'the command table is read');
  for (const c of commands) t.ok(named.has(c), `docs/security.md names \`${c}\` (a row of the commands table)`);
});

t.test('every setting is named', async (t) => {
  for (const s of Object.keys(SETTINGS)) t.ok(named.has(s), `docs/security.md names \`${s}\` (a row of the settings table)`);
});

/** Every .ts file under `dir`, as a path from the repository's root. */
function sources(dir: string): string[] {
  return fs.readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory()) return sources(rel);
    return e.name.endsWith('.ts') ? [rel] : [];
  });
}

t.test('every file that listens (a server or a bound socket) is named', async (t) => {
  const listening = sources('src').filter((f) => /\.listen\(|dgram\.createSocket\(/.test(fs.readFileSync(path.join(root, f), 'utf8')));
  t.ok(listening.includes('src/metrics.ts'), 'the sources are scanned');
  for (const f of listening) t.ok(named.has(f), `docs/security.md names \`${f}\` (a row of the listeners table)`);
});
