/**
 * The operator's CLI as an operator runs it: it reads the store the
 * running daemon reads, asked of the daemon; without one, the systemd environment file's; it says
 * where it and the daemon disagree on the store; `version`, `--version`, per-command help, `-o`
 * formats with `--json` as an alias, the documented exit statuses.
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { COMMANDS } from '../../src/cli/commands.js';
import { dockerNames, nameOf } from '../../src/cli/docker-api.js';
import { hostPath, locate, parseEnvFile } from '../../src/cli/locate.js';
import { REDACTED } from '../../src/config/settings-view.js';
import { VERSION } from '../../src/lib/version.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';
import { MAIN, NO_OVS, Ovsnet, pluginCall, run } from '../harness/host.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-cli-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
const socket = path.join(dir, 'plugins', 'ovsnet.sock');
const db = path.join(dir, 'daemon', 'state.db');
/** Nothing listens there: no Docker, no managed plugin found. */
const NO_DOCKER = `unix://${path.join(dir, 'no-docker.sock')}`;
const emptyFile = path.join(dir, 'no-such-env-file');

/** The CLI as a process, with only the environment given (no OVSNET_* of the test's own). */
const cli = (args: string[], env: Record<string, string> = {}) =>
  run(process.execPath, [MAIN, ...args], { env: { PATH: process.env.PATH ?? '', DOCKER_HOST: NO_DOCKER, ...env }, timeoutMs: 30_000 });

const daemon = await Ovsnet.start(socket, { OVSNET_STORE: `sqlite:${db}`, OVSNET_OVSDB: NO_OVS, OVSNET_LOG_LEVEL: 'info' });
t.teardown(() => daemon.kill('SIGTERM'));
// Something in the daemon's store for the CLI to find: a pool.
const pool = await pluginCall(socket, 'IpamDriver.RequestPool', {
  AddressSpace: '',
  Pool: '10.77.0.0/24',
  SubPool: '',
  Options: {},
  V6: false,
});
if (pool.status !== 200) throw new Error(`RequestPool: ${JSON.stringify(pool.body)}`);

t.test('the start line says the version', async (t) => {
  t.match(daemon.log, new RegExp(`"version":"${VERSION.replace(/\./g, '\\.')}".*"msg":"ovsnet ${VERSION.replace(/\./g, '\\.')} serving"`));
});

t.test("no settings given: the CLI reads the daemon's store, asked of the daemon", async (t) => {
  const r = await cli(['ipam', '-o', 'json', '--settings-file', emptyFile], { OVSNET_SOCKET: socket });
  t.equal(r.code, 0, r.stderr);
  t.match(JSON.parse(r.stdout), [{ pool: '10.77.0.0/24', used: 0 }]);
  t.equal(r.stderr, '', 'nothing to say');
  const status = await cli(['status', '-o', 'json', '--settings-file', emptyFile], { OVSNET_SOCKET: socket });
  t.match(JSON.parse(status.stdout), {
    store: `sqlite:${db}`,
    settingsFrom: new RegExp(`^the daemon on ${socket}`),
    daemon: { answers: true, version: VERSION, store: { store: `sqlite:${db}`, ok: true } },
  });
});

t.test('no daemon: the systemd environment file', async (t) => {
  const file = path.join(dir, 'ovsnet.default');
  fs.writeFileSync(file, `# as deploy/ovsnet.default\nOVSNET_STORE="sqlite:${db}"\nOVSNET_SOCKET=${path.join(dir, 'none.sock')}\n`);
  const r = await cli(['ipam', '--json', '--settings-file', file]);
  t.equal(r.code, 0, r.stderr);
  t.match(JSON.parse(r.stdout), [{ pool: '10.77.0.0/24' }], "the file's store");
  const s = await cli(['status', '-o', 'json', '--settings-file', file]);
  t.match(JSON.parse(s.stdout), { settingsFrom: file, daemon: { answers: false } });
});

t.test('the CLI and the daemon disagree on the store: it says so', async (t) => {
  const otherFile = path.join(dir, 'other', 'state.db');
  const other = `sqlite:${otherFile}`;
  // A store no daemon made: the CLI says so, and makes none.
  const none = await cli(['ipam', '-o', 'json', '--settings-file', emptyFile], { OVSNET_SOCKET: socket, OVSNET_STORE: other });
  t.equal(none.code, 1, none.stderr);
  t.match(none.stderr, `no embedded store at ${otherFile}: no ovsnet daemon has run here with OVSNET_STORE=${other}`);
  t.notOk(fs.existsSync(path.dirname(otherFile)), 'nothing made');
  await new SqliteStore({ file: otherFile }).close();
  const r = await cli(['ipam', '-o', 'json', '--settings-file', emptyFile], { OVSNET_SOCKET: socket, OVSNET_STORE: other });
  t.equal(r.code, 0);
  t.same(JSON.parse(r.stdout), [], 'its own environment wins: the other store is empty');
  t.match(r.stderr, `ovsnet: note: this command reads the store ${other} (OVSNET_STORE in its environment), but the daemon on ${socket}`);
  const s = await cli(['status', '--settings-file', emptyFile], { OVSNET_SOCKET: socket, OVSNET_STORE: other });
  t.equal(s.code, 1, 'status fails');
  t.match(s.stdout, /^settings\s+FAIL\s+from the daemon/m);
  // The environment file changed since the daemon started.
  const file = path.join(dir, 'changed.default');
  fs.writeFileSync(file, `OVSNET_STORE=${other}\nOVSNET_SOCKET=${socket}\n`);
  const f = await cli(['ipam', '-o', 'json', '--settings-file', file]);
  t.match(JSON.parse(f.stdout), [{ pool: '10.77.0.0/24' }], "the daemon's store is shown");
  t.match(f.stderr, `${file} names the store ${other}, but the daemon on ${socket} (${file}) uses sqlite:${db}`);
});

t.test('version and --version', async (t) => {
  t.equal((await cli(['--version'])).stdout, `ovsnet ${VERSION}\n`);
  const v = await cli(['version', '-o', 'json', '--settings-file', emptyFile], { OVSNET_SOCKET: socket });
  t.equal(v.code, 0);
  t.match(JSON.parse(v.stdout), { client: { version: VERSION }, daemon: { version: VERSION, socket, via: 'OVSNET_SOCKET' } });
  const table = await cli(['version', '--settings-file', emptyFile], { OVSNET_SOCKET: socket });
  t.match(table.stdout, new RegExp(`^daemon\\s+${VERSION.replace(/\./g, '\\.')}\\s+${socket}`, 'm'));
  const none = await cli(['version', '--settings-file', emptyFile], { OVSNET_SOCKET: path.join(dir, 'none.sock') });
  t.equal(none.code, 1, 'exit 1 when no daemon answers, as docker version');
  t.match(none.stdout, /^client\s/m);
});

t.test('per-command help, formats, exit statuses', async (t) => {
  for (const name of [...Object.keys(COMMANDS), 'serve']) {
    for (const h of ['-h', '--help']) {
      const r = await cli([name, h]);
      t.equal(r.code, 0, `${name} ${h}`);
      t.match(r.stdout, new RegExp(`^usage: ovsnet ${name} `));
    }
  }
  t.match((await cli(['networks', '--help'])).stdout, /-o, --output FORMAT\s+table \(the default\), wide/);
  t.equal((await cli(['help', 'ipam'])).stdout, (await cli(['ipam', '-h'])).stdout, 'help CMD = CMD --help');
  const top = await cli([]);
  t.equal(top.code, 2, 'no command: usage, exit 2');
  t.match(top.stdout, /Exit status: 0 done, 1 a check failed/);
  const bad = await cli(['networks', '--bogus']);
  t.equal(bad.code, 2);
  t.match(bad.stderr, "ovsnet: Unknown option '--bogus'\nsee: ovsnet networks --help");
  const fmt = await cli(['networks', '-o', 'yaml']);
  t.equal(fmt.code, 2);
  t.match(fmt.stderr, '-o yaml is not an output format: expected table, wide, json');
  t.equal((await cli(['ipam', 'extra'])).code, 2, 'an argument it does not take');
  t.equal((await cli(['nosuch'])).code, 2);
  const env = { OVSNET_SOCKET: socket };
  const json = await cli(['ipam', '--json', '--settings-file', emptyFile], env);
  t.equal(json.stdout, (await cli(['ipam', '-o', 'json', '--settings-file', emptyFile], env)).stdout, '--json = -o json');
  t.match((await cli(['ipam', '--settings-file', emptyFile], env)).stdout, /^POOL\s+RANGE\s+USED\s+USABLE\s+USE\s+HOSTS$/m);
  t.match(
    (await cli(['ipam', '-o', 'wide', '--settings-file', emptyFile], env)).stdout,
    /^POOL\s+RANGE\s+USED\s+USABLE\s+USE\s+HOSTS\s+LOGICAL\s+BLOCKS$/m,
  );
  const invalid = await cli(['ipam'], { OVSNET_STORE: 'nope' });
  t.equal(invalid.code, 2, 'invalid settings: exit 2');
});

t.test('a store the daemon cannot reach: its health says so', async (t) => {
  const s2 = path.join(dir, 'p2', 'ovsnet.sock');
  const o = await Ovsnet.start(s2, { OVSNET_STORE: 'etcd://127.0.0.1:9', OVSNET_STORE_TIMEOUT_MS: '300', OVSNET_OVSDB: NO_OVS });
  t.teardown(() => o.kill('SIGTERM'));
  const v = await cli(['version', '-o', 'json', '--settings-file', emptyFile], { OVSNET_SOCKET: s2 });
  t.match(JSON.parse(v.stdout), { daemon: { store: { store: 'etcd://127.0.0.1:9', ok: false, error: /./ } } });
});

t.test("Docker's names, asked of Docker's API", async (t) => {
  const api = path.join(dir, 'docker.sock');
  const server = http.createServer((req, res) => {
    const body =
      req.url === '/networks'
        ? [{ Id: `ab12cd34ef56${'a'.repeat(52)}`, Name: 'front' }]
        : req.url === '/containers/json?all=1'
          ? [{ Names: ['/web1'], NetworkSettings: { Networks: { front: { EndpointID: `ee11ee22ee33${'f'.repeat(52)}` } } } }]
          : undefined;
    res.writeHead(body === undefined ? 404 : 200).end(JSON.stringify(body ?? { message: 'no' }));
  });
  await new Promise<void>((r) => server.listen(api, r));
  t.teardown(() => server.close());
  const names = await dockerNames(api);
  t.equal(nameOf(names?.networks, 'ab12cd34ef56'), 'front');
  t.equal(nameOf(names?.containers, 'ee11ee22ee33'), 'web1');
  t.equal(nameOf(names?.networks, 'ffffffffffff'), '', 'unknown: empty');
  t.equal(await dockerNames(path.join(dir, 'nothing.sock')), undefined, 'no Docker: no names, no failure');
});

t.test('a managed plugin that is disabled: no daemon answers, and the CLI says it may be reading another store', async (t) => {
  const api = path.join(dir, 'docker-plugins.sock');
  const plugin = {
    Id: 'f00d'.repeat(16),
    Name: 'ovsnet:latest',
    Enabled: false,
    Config: {
      Entrypoint: ['/usr/bin/node', '/opt/ovsnet/dist/src/main.js'],
      Interface: { Types: ['docker.networkdriver/1.0'], Socket: 'ovsnet.sock' },
    },
    Settings: { Mounts: [] },
  };
  const server = http.createServer((req, res) => res.writeHead(200).end(JSON.stringify(req.url === '/plugins' ? [plugin] : [])));
  await new Promise<void>((r) => server.listen(api, r));
  t.teardown(() => server.close());
  const file = path.join(dir, 'disabled.default');
  fs.writeFileSync(file, `OVSNET_SOCKET=${path.join(dir, 'nobody-here.sock')}\n`);
  const found = await locate({}, file, api);
  t.equal(found.daemon, undefined);
  t.match(found.notes, [/managed plugin ovsnet:latest is disabled: showing .*disabled\.default, which may not be its store/]);
  const enabled = await locate({}, file, path.join(dir, 'nothing.sock'));
  t.same(enabled.notes, [], 'no Docker: nothing to say');
});

t.test(
  'a daemon whose etcd password is not revealed: version still answers; a command that needs the store says what to give it',
  async (t) => {
    const s3 = path.join(dir, 'p3.sock');
    const info = {
      version: VERSION,
      pid: 1,
      startedAt: new Date().toISOString(),
      uptimeSeconds: 5,
      settings: { OVSNET_STORE: 'etcd://127.0.0.1:9', OVSNET_ETCD_USER: 'ovsnet', OVSNET_ETCD_PASSWORD: REDACTED },
      store: { store: 'etcd://127.0.0.1:9', ok: true, revision: 7, ms: 1 },
    };
    const server = http.createServer((req, res) => res.writeHead(req.url === '/ovsnet/v1/info' ? 200 : 404).end(JSON.stringify(info)));
    await new Promise<void>((r) => server.listen(s3, r));
    t.teardown(() => server.close());
    const v = await cli(['version', '-o', 'json', '--settings-file', emptyFile], { OVSNET_SOCKET: s3 });
    t.equal(v.code, 0, v.stderr);
    t.match(JSON.parse(v.stdout), { daemon: { version: VERSION } });
    const ipamRun = await cli(['ipam', '--settings-file', emptyFile], { OVSNET_SOCKET: s3 });
    t.equal(ipamRun.code, 2);
    t.match(
      ipamRun.stderr,
      /authenticates to etcd with OVSNET_ETCD_PASSWORD, which it does not reveal: give this command the password too/,
    );
  },
);

t.test('pieces: the environment file, paths inside a managed plugin', async (t) => {
  t.same(parseEnvFile('# c\n\nOVSNET_STORE="etcd://a:1"\n OVSNET_HOST = h1\nOTHER=x\n; c\n'), {
    OVSNET_STORE: 'etcd://a:1',
    OVSNET_HOST: 'h1',
  });
  const mounts = [
    { Source: '/srv/state', Destination: '/var/lib/ovsnet' },
    { Source: '/srv/tls', Destination: '/etc/ovsnet' },
  ];
  t.equal(hostPath('/var/lib/ovsnet/state.db', mounts), '/srv/state/state.db');
  t.equal(hostPath('/etc/ovsnet/ca.pem', mounts), '/srv/tls/ca.pem');
  t.equal(hostPath('/var/lib/ovsnetx', mounts), '/var/lib/ovsnetx', 'a prefix of a name is no mount');
});
