/**
 * The operator's commands never load the daemon's packages (Fastify, prom-client): `src/main.ts`
 * imports the daemon for `serve` only, so `ovsnet networks` and its siblings start sooner
 * (85-116 ms in `npm run bench -- scale`). Run as the operator runs them (dist/src/main.js), under
 * module hooks that refuse those packages, by require() (src/lib/packages.ts loads them so) and
 * by `import`: the command still succeeds. The control: the same hooks refuse Fastify when
 * something does load it either way, and `serve` does. And `serve` without metrics never loads
 * prom-client (src/metrics.ts loads it when built, which the daemon does only to serve metrics).
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import type { NetworkRecord } from '../../src/driver/model/records.js';
import { keys } from '../../src/store/keys.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';
import { put } from '../../src/store/types.js';

const DAEMON_ONLY = /\/node_modules\/(fastify|prom-client)\//;

/**
 * Node's arguments that make any load of a module whose file matches `refused` fail: a patch of
 * the CommonJS resolver for require() (a file written in `dir`, preloaded with --require), and an
 * ES module resolve hook for `import`, which the patch never sees.
 */
function refusing(refused: RegExp, dir: string): string[] {
  const hooks = `export async function resolve(spec, ctx, next) {
  const r = await next(spec, ctx);
  if (${refused.toString()}.test(r.url)) throw new Error('refused by the test: ' + r.url);
  return r;
}`;
  const preload = `import { register } from 'node:module'; register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hooks)}`)});`;
  const requireHook = path.join(dir, `refuse-${fs.readdirSync(dir).length}.cjs`);
  fs.writeFileSync(
    requireHook,
    `const Module = require('node:module');
const resolve = Module._resolveFilename;
Module._resolveFilename = function (...args) {
  const file = resolve.apply(this, args);
  if (${refused.toString()}.test(file)) throw new Error('refused by the test: ' + file);
  return file;
};
`,
  );
  return ['--require', requireHook, '--import', `data:text/javascript,${encodeURIComponent(preload)}`];
}
const root = new URL('../../../', import.meta.url).pathname;
const MAIN = `${root}dist/src/main.js`;

t.test('`ovsnet --help`, `version` and `networks` load neither Fastify nor prom-client; `serve` does', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-lean-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'state.db');
  const store = new SqliteStore({ file });
  const network: NetworkRecord = {
    networkId: 'ab'.repeat(32),
    bridge: 'ovsnet0',
    tag: 10,
    mtu: 1500,
    internal: false,
    ipv4: [{ pool: '10.9.0.0/24', gateway: '10.9.0.1/24' }],
    ipv6: [],
    createdAt: '',
  };
  await store.txn({ compares: [], success: [put(keys.network(network.networkId), JSON.stringify(network))] });
  await store.close();
  const env = {
    PATH: process.env.PATH ?? '',
    OVSNET_STORE: `sqlite:${file}`,
    OVSNET_SOCKET: path.join(dir, 'none.sock'),
    OVSNET_METRICS_ADDR: '',
    DOCKER_HOST: `unix://${path.join(dir, 'no-docker.sock')}`,
  };
  const node = refusing(DAEMON_ONLY, dir);
  const hooked = (...args: string[]) =>
    spawnSync(process.execPath, [...node, ...args], {
      env,
      encoding: 'utf8',
      timeout: 60_000,
    });

  const noSettings = path.join(dir, 'none');
  const runs = [['--help'], ['version', '-o', 'json'], ['networks', '--settings-file', noSettings, '-o', 'json']].map((args) => ({
    args,
    r: hooked(MAIN, ...args),
  }));
  for (const { args, r } of runs) {
    t.notMatch(r.stderr, /refused by the test/, `ovsnet ${args.join(' ')}: no daemon package loaded`);
    if (args[0] !== 'version') t.equal(r.status, 0, `ovsnet ${args.join(' ')}: ${r.stderr}`);
  }
  t.match(runs[2]?.r.stdout, network.networkId.slice(0, 12), 'and `networks` read the store');

  const control = hooked('--input-type=module', '-e', "await import('fastify')");
  t.match(control.stderr, /refused by the test: .*fastify/, 'the control: the hooks refuse Fastify when it is imported');
  const required = hooked('-e', "require('fastify')");
  t.match(required.stderr, /refused by the test: .*fastify/, 'and when it is required');
  // Were the load not refused, the daemon would start: in a network namespace of its own
  // (no link, rule or bridge of the machine's), every path in this test's directory, no spares.
  const serve = spawnSync('unshare', ['--net', '--', process.execPath, ...node, MAIN, 'serve'], {
    env: serveEnv(dir, env),
    encoding: 'utf8',
    timeout: 20_000,
  });
  t.match(serve.stderr, /refused by the test: .*(fastify|prom-client)/, 'and `serve` loads it');
});

/** `serve`'s environment beside `env`: OVSDB absent, every file in `dir`, no spare veths. */
const serveEnv = (dir: string, env: Record<string, string>) => ({
  ...env,
  OVSNET_OVSDB: `unix:${path.join(dir, 'no-ovsdb.sock')}`,
  OVSNET_JOURNAL: path.join(dir, 'journal.json'),
  OVSNET_DOCKER_HOST: `unix://${path.join(dir, 'no-docker.sock')}`,
  OVSNET_SPARE_VETHS: '0',
});

t.test('`serve` with metrics off never loads prom-client; with metrics on it does', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-lean-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const node = refusing(/\/node_modules\/prom-client\//, dir);
  const env = {
    PATH: process.env.PATH ?? '',
    OVSNET_STORE: `sqlite:${path.join(dir, 'state.db')}`,
    OVSNET_SOCKET: path.join(dir, 'plugin.sock'),
  };
  // The daemon serves (OVSDB absent, it keeps retrying in the background); 3 s after it says
  // so, and after its first attempts at OVS, it gets SIGTERM and stops.
  const daemon = spawn('unshare', ['--net', '--', process.execPath, ...node, MAIN, 'serve'], {
    env: serveEnv(dir, { ...env, OVSNET_METRICS_ADDR: '' }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  daemon.stdout.on('data', (d: Buffer) => (out += d.toString()));
  daemon.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => daemon.once('exit', resolve));
  // Never left behind, whatever happens below.
  t.teardown(() => void (daemon.exitCode === null && daemon.signalCode === null && daemon.kill('SIGKILL')));
  const deadline = Date.now() + 30_000; // a bound on a loaded machine, not a target
  while (!/ serving"/.test(out) && daemon.exitCode === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  await new Promise((r) => setTimeout(r, 3000));
  daemon.kill('SIGTERM');
  // A bound on a loaded machine, not a target: a daemon that does not stop fails here.
  let bound: NodeJS.Timeout | undefined;
  const stopped = await Promise.race([exited, new Promise<'hung'>((r) => (bound = setTimeout(() => r('hung'), 30_000)))]);
  clearTimeout(bound);
  t.equal(stopped, 0, 'it stops on SIGTERM');
  t.notMatch(out, /refused by the test/, 'metrics off: prom-client never loaded');
  t.match(out, /"msg":"ovsnet [^"]* serving"/, 'and the daemon served');
  t.match(out, /"msg":"stopped"/, 'until SIGTERM');
  // The control: the same hooks, metrics served.
  const on = spawnSync('unshare', ['--net', '--', process.execPath, ...node, MAIN, 'serve'], {
    env: serveEnv(dir, { ...env, OVSNET_METRICS_ADDR: '127.0.0.1:19477' }),
    encoding: 'utf8',
    timeout: 20_000,
  });
  t.match(on.stderr, /refused by the test: .*prom-client/, 'metrics served: prom-client loaded');
});
