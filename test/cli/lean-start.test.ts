/**
 * The operator's commands never load the daemon's packages (Fastify, prom-client): `src/main.ts`
 * imports the daemon for `serve` only, so `ovsnet networks` and its siblings start sooner
 * (85-116 ms in `npm run bench -- scale`). Run as the operator runs them (dist/src/main.js), under a module hook that refuses
 * those packages: the command still succeeds. The control: the same hook refuses Fastify when
 * something does import it, and `serve` does.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import type { NetworkRecord } from '../../src/driver/model/records.js';
import { keys } from '../../src/store/keys.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';
import { put } from '../../src/store/types.js';

const DAEMON_ONLY = /\/node_modules\/(fastify|prom-client)\//;
const HOOKS = `export async function resolve(spec, ctx, next) {
  const r = await next(spec, ctx);
  if (${DAEMON_ONLY.toString()}.test(r.url)) throw new Error('refused by the test: ' + r.url);
  return r;
}`;
const PRELOAD = `import { register } from 'node:module'; register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(HOOKS)}`)});`;
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
  const node = ['--import', `data:text/javascript,${encodeURIComponent(PRELOAD)}`];
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
  t.match(control.stderr, /refused by the test: .*fastify/, 'the control: the hook refuses Fastify when it is imported');
  // Were the import not refused, the daemon would start: in a network namespace of its own
  // (no link, rule or bridge of the machine's), every path in this test's directory, no spares.
  const serve = spawnSync('unshare', ['--net', '--', process.execPath, ...node, MAIN, 'serve'], {
    env: {
      ...env,
      OVSNET_OVSDB: `unix:${path.join(dir, 'no-ovsdb.sock')}`,
      OVSNET_JOURNAL: path.join(dir, 'journal.json'),
      OVSNET_DOCKER_HOST: `unix://${path.join(dir, 'no-docker.sock')}`,
      OVSNET_SPARE_VETHS: '0',
    },
    encoding: 'utf8',
    timeout: 20_000,
  });
  t.match(serve.stderr, /refused by the test: .*(fastify|prom-client)/, 'and `serve` imports it');
});
