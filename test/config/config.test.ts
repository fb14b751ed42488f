import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { loadConfig, SETTINGS } from '../../src/config/config.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));

t.test('defaults: embedded store, info logs, the standard socket', async (t) => {
  const c = loadConfig({});
  t.same(c.store, { kind: 'sqlite', file: '/var/lib/ovsnet/state.db' });
  t.equal(c.logLevel, 'info');
  t.equal(c.socket, '/run/docker/plugins/ovsnet.sock');
  t.equal(c.storeTimeoutMs, 3000);
  t.equal(c.metrics, undefined, 'metrics off');
  t.same(loadConfig({ OVSNET_METRICS_ADDR: '9477' }).metrics, { host: '127.0.0.1', port: 9477 }, 'a bare port is on loopback');
  t.same(loadConfig({ OVSNET_METRICS_ADDR: '0.0.0.0:9100' }).metrics, { host: '0.0.0.0', port: 9100 });
  t.match(loadConfig({}).host, { ttlSeconds: 10, reclaimGraceSeconds: 600 }, 'a dead host is reclaimed after 10 minutes by default');
  t.equal(loadConfig({ OVSNET_RECLAIM_GRACE: '0' }).host.reclaimGraceSeconds, 0);
  t.equal(loadConfig({}).journal, '/var/lib/ovsnet/unconfirmed.json');
  t.equal(loadConfig({ OVSNET_JOURNAL: 'off' }).journal, '', 'off: memory only');
  t.equal(loadConfig({}).spareVeths, 16, 'released veth pairs kept by default');
  t.equal(loadConfig({ OVSNET_SPARE_VETHS: '0' }).spareVeths, 0, '0: each one deleted');
  t.equal(loadConfig({}).nice, 'inherit', 'the priority left as started by default');
  t.equal(loadConfig({ OVSNET_NICE: '-10' }).nice, -10);
  t.equal(loadConfig({ OVSNET_NICE: '-20' }).nice, -20);
  t.equal(loadConfig({ OVSNET_NICE: '19' }).nice, 19);
  t.ok(Object.isFrozen(c) && Object.isFrozen(c.store), 'frozen');
});

t.test('etcd endpoints, TLS and auth', async (t) => {
  const c = loadConfig({
    OVSNET_STORE: 'etcd://h1:2379,10.0.0.2:2379',
    OVSNET_ETCD_CA: '/ca.pem',
    OVSNET_ETCD_CERT: '/c.pem',
    OVSNET_ETCD_KEY: '/k.pem',
    OVSNET_ETCD_USERNAME: 'u',
    OVSNET_ETCD_PASSWORD: 'p',
  });
  t.same(c.store, {
    kind: 'etcd',
    endpoints: ['https://h1:2379', 'https://10.0.0.2:2379'],
    tls: { caFile: '/ca.pem', certFile: '/c.pem', keyFile: '/k.pem' },
    auth: { username: 'u', password: 'p' },
  });
  t.same(loadConfig({ OVSNET_STORE: 'etcd://localhost:2379' }).store, { kind: 'etcd', endpoints: ['http://localhost:2379'] });
});

t.test('the etcd password from a file: in no environment, never with the plain value', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-config-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'etcd-password');
  fs.writeFileSync(file, 's3cret pass\n', { mode: 0o600 });
  const tls = { OVSNET_STORE: 'etcd://h1:2379', OVSNET_ETCD_CA: '/ca.pem', OVSNET_ETCD_USERNAME: 'ovsnet' };
  const c = loadConfig({ ...tls, OVSNET_ETCD_PASSWORD_FILE: file });
  t.same(
    c.store,
    { kind: 'etcd', endpoints: ['https://h1:2379'], tls: { caFile: '/ca.pem' }, auth: { username: 'ovsnet', password: 's3cret pass' } },
    'the first line, its newline dropped',
  );
  t.throws(() => loadConfig({ ...tls, OVSNET_ETCD_PASSWORD_FILE: file, OVSNET_ETCD_PASSWORD: 'other' }), {
    code: 'CONFIG_INVALID',
    message: /OVSNET_ETCD_PASSWORD and OVSNET_ETCD_PASSWORD_FILE are both set: set one/,
  });
  t.throws(() => loadConfig({ ...tls, OVSNET_ETCD_PASSWORD_FILE: path.join(dir, 'missing') }), {
    message: /OVSNET_ETCD_PASSWORD_FILE=.*missing cannot be read: ENOENT.*\(expected a readable file holding the password\)/,
  });
  fs.writeFileSync(file, '');
  t.throws(() => loadConfig({ ...tls, OVSNET_ETCD_PASSWORD_FILE: file }), {
    message: /expected the password on one line, not an empty file/,
  });
  t.throws(() => loadConfig({ ...tls, OVSNET_ETCD_PASSWORD_FILE: 'etcd-password' }), {
    message: /OVSNET_ETCD_PASSWORD_FILE="etcd-password" is not valid: expected an absolute path/,
  });
});

t.test('credentials over plain http are refused unless the risk is accepted by name', async (t) => {
  const plain = { OVSNET_STORE: 'etcd://h1:2379', OVSNET_ETCD_USERNAME: 'ovsnet', OVSNET_ETCD_PASSWORD: 'p' };
  t.throws(() => loadConfig(plain), {
    code: 'CONFIG_INVALID',
    message:
      /OVSNET_ETCD_USERNAME and the etcd password would cross the network in clear text: etcd:\/\/h1:2379 is plain http without OVSNET_ETCD_CA\. Set OVSNET_ETCD_CA \(TLS\), or OVSNET_ETCD_ALLOW_PLAINTEXT_CREDENTIALS=true/,
  });
  t.same(loadConfig({ ...plain, OVSNET_ETCD_ALLOW_PLAINTEXT_CREDENTIALS: 'true' }).store, {
    kind: 'etcd',
    endpoints: ['http://h1:2379'],
    auth: { username: 'ovsnet', password: 'p' },
  });
  t.throws(() => loadConfig({ ...plain, OVSNET_ETCD_ALLOW_PLAINTEXT_CREDENTIALS: 'yes' }), {
    message: /OVSNET_ETCD_ALLOW_PLAINTEXT_CREDENTIALS="yes" is not valid: expected true or false/,
  });
  t.same(
    loadConfig({ OVSNET_STORE: 'etcd://h1:2379' }).store,
    { kind: 'etcd', endpoints: ['http://h1:2379'] },
    'no credentials: plain http stays allowed',
  );
});

const bad: [Record<string, string>, RegExp][] = [
  [{ OVSNET_STORE: 'mysql://x' }, /OVSNET_STORE="mysql:\/\/x" is not valid: expected sqlite:\/absolute\/path\.db or etcd:\/\/host:port/],
  [{ OVSNET_STORE: 'sqlite:relative.db' }, /OVSNET_STORE.*absolute path/],
  [{ OVSNET_STORE: 'etcd://h1' }, /OVSNET_STORE.*host:port/],
  [{ OVSNET_STORE: 'etcd://h1:99999' }, /OVSNET_STORE/],
  [{ OVSNET_STORE_TIMEOUT_MS: '20000' }, /OVSNET_STORE_TIMEOUT_MS="20000" is not valid: expected an integer from 100 to 10000/],
  [{ OVSNET_STORE_TIMEOUT_MS: 'fast' }, /OVSNET_STORE_TIMEOUT_MS/],
  [{ OVSNET_LOG_LEVEL: 'loud' }, /OVSNET_LOG_LEVEL="loud" is not valid: expected fatal\|error\|warn\|info\|debug\|trace\|silent/],
  [{ OVSNET_SOCKET: 'ovsnet.sock' }, /OVSNET_SOCKET.*absolute path ending in \.sock/],
  [{ OVSNET_METRICS_ADDR: 'everywhere' }, /OVSNET_METRICS_ADDR="everywhere" is not valid: expected PORT \(on 127\.0\.0\.1\) or HOST:PORT/],
  [{ OVSNET_DATAPATH: 'kernel' }, /OVSNET_DATAPATH="kernel" is not valid: expected auto\|system\|netdev/],
  [{ OVSNET_HOST_TTL: '1' }, /OVSNET_HOST_TTL="1" is not valid: expected seconds, an integer from 2 to 300/],
  [{ OVSNET_JOURNAL: 'unconfirmed.json' }, /OVSNET_JOURNAL="unconfirmed.json" is not valid: expected an absolute file path, or off/],
  [{ OVSNET_SPARE_VETHS: '1000' }, /OVSNET_SPARE_VETHS="1000" is not valid: expected an integer from 0 to 256/],
  [{ OVSNET_NICE: '-21' }, /OVSNET_NICE="-21" is not valid: expected an integer from -20 to 19, or inherit/],
  [{ OVSNET_NICE: '20' }, /OVSNET_NICE="20" is not valid/],
  [{ OVSNET_NICE: '+5' }, /OVSNET_NICE="\+5" is not valid/],
  [{ OVSNET_NICE: '-10;reboot' }, /OVSNET_NICE="-10;reboot" is not valid/],
  [{ OVSNET_NICE: '1'.repeat(10_000) }, /OVSNET_NICE="1{10000}" is not valid/],
  [{ OVSNET_NICE: 'Inherit' }, /OVSNET_NICE="Inherit" is not valid/],
  [{ OVSNET_RECLAIM_GRACE: '10m' }, /OVSNET_RECLAIM_GRACE="10m" is not valid: expected seconds, an integer from 0 to 86400/],
  [{ OVSNET_VTEP_IP: '10.0.0' }, /OVSNET_VTEP_IP="10\.0\.0" is not valid/],
  [{ OVSNET_BRIDGE: 'a-bridge-name-too-long' }, /OVSNET_BRIDGE/],
  [{ OVSNET_OVSDB: '/var/run/db.sock' }, /OVSNET_OVSDB.*unix:\/absolute\/path or tcp:host:port/],
  [{ OVSNET_SOKET: '/x.sock' }, /OVSNET_SOKET is not a setting of ovsnet: valid ones are OVSNET_STORE/],
  [{ OVSNET_ETCD_CA: '/ca.pem' }, /OVSNET_ETCD_CA applies only with OVSNET_STORE=etcd/],
  [{ OVSNET_STORE: 'etcd://h:1', OVSNET_ETCD_CERT: '/c' }, /OVSNET_ETCD_CERT and OVSNET_ETCD_KEY go together/],
  [
    { OVSNET_STORE: 'etcd://h:1', OVSNET_ETCD_USERNAME: 'u' },
    /OVSNET_ETCD_USERNAME and OVSNET_ETCD_PASSWORD \(or OVSNET_ETCD_PASSWORD_FILE\) go together/,
  ],
  [{ OVSNET_ETCD_PASSWORD_FILE: '/run/secrets/p' }, /OVSNET_ETCD_PASSWORD_FILE applies only with OVSNET_STORE=etcd/],
];
for (const [env, message] of bad) {
  t.test(`refuses ${JSON.stringify(env)}`, async (t) => {
    t.throws(() => loadConfig(env), { code: 'CONFIG_INVALID', message });
  });
}

t.test('every problem is reported at once, one per line', async (t) => {
  t.throws(() => loadConfig({ OVSNET_LOG_LEVEL: 'x', OVSNET_SOCKET: 'y' }), { message: /OVSNET_LOG_LEVEL[^\n]*\n[^\n]*OVSNET_SOCKET/ });
});

t.test('the process exits non-zero with one clear line per bad setting', async (t) => {
  const res = spawnSync(process.execPath, [`${root}dist/src/main.js`, 'serve'], {
    env: { PATH: process.env.PATH ?? '', OVSNET_LOG_LEVEL: 'chatty', OVSNET_STORE_TIMEOUT_MS: '0' },
    encoding: 'utf8',
    timeout: 10_000,
  });
  t.equal(res.status, 2, 'exit status 2: bad settings');
  t.match(res.stderr, /OVSNET_LOG_LEVEL="chatty" is not valid/);
  t.match(res.stderr, /OVSNET_STORE_TIMEOUT_MS="0" is not valid/);
  t.notMatch(res.stderr, /at .*\.js:\d+/, 'no stack trace');
});

t.test('the settings reference (docs/settings.md) and plugin/config.json document every setting', async (t) => {
  const page = fs.readFileSync(`${root}docs/settings.md`, 'utf8');
  const plugin = JSON.parse(fs.readFileSync(`${root}plugin/config.json`, 'utf8')) as { env: { name: string }[] };
  for (const name of Object.keys(SETTINGS)) {
    t.match(page, new RegExp(`\\| \`${name}\` \\|`), `docs/settings.md documents ${name}`);
    t.ok(
      plugin.env.some((e) => e.name === name),
      `plugin/config.json has ${name}`,
    );
  }
});

t.test('OVSNET_SCOPE and OVSNET_VXLAN_PORT: swarm networks need etcd; one tunnel port', async (t) => {
  t.match(loadConfig({}), { scope: 'local', vxlanPort: 4789 });
  t.match(loadConfig({ OVSNET_SCOPE: 'global', OVSNET_STORE: 'etcd://h1:2379', OVSNET_VXLAN_PORT: '4790' }), {
    scope: 'global',
    vxlanPort: 4790,
  });
  t.throws(() => loadConfig({ OVSNET_SCOPE: 'global' }), {
    message: /OVSNET_SCOPE="global" is not valid \(a swarm network spans hosts.*set OVSNET_STORE=etcd:\/\/\.\.\. on every node\)/,
  });
  t.throws(() => loadConfig({ OVSNET_SCOPE: 'swarm' }), { message: /OVSNET_SCOPE="swarm" is not valid: expected local or global/ });
  for (const port of ['0', '65536', '47a9']) {
    t.throws(() => loadConfig({ OVSNET_VXLAN_PORT: port }), { message: /OVSNET_VXLAN_PORT=.* is not valid: expected a UDP port/ });
  }
});

t.test('OVSNET_DOCKER_HOST: the Engine socket read for swarm VIPs, unix:// and an absolute path, or off', async (t) => {
  t.equal(loadConfig({}).dockerSocket, '/var/run/docker.sock');
  t.equal(loadConfig({ OVSNET_DOCKER_HOST: 'unix:///run/user/0/docker.sock' }).dockerSocket, '/run/user/0/docker.sock');
  t.equal(loadConfig({ OVSNET_DOCKER_HOST: 'off' }).dockerSocket, '', 'off: not followed');
  for (const bad of [
    'tcp://10.0.0.1:2375',
    '/var/run/docker.sock',
    'unix://var/run/docker.sock',
    'unix:///var/../etc/x',
    'unix:///a\u0007b',
    `unix:///${'a'.repeat(4096)}`,
  ]) {
    t.throws(() => loadConfig({ OVSNET_DOCKER_HOST: bad }), {
      message: /OVSNET_DOCKER_HOST=.* is not valid: expected unix:\/\/\/absolute\/path \(no "\.\.", at most 4096 characters\), or off/,
    });
  }
});
