/**
 * etcd over TLS with client certificates, and with user/password authentication: a private
 * etcd started here (its own ports, certificates and data directory), reached through the
 * OVSNET_ETCD_* settings exactly as `ovsnet serve` reads them.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http2 from 'node:http2';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Etcd3 } from 'etcd3';
import t from 'tap';
import { loadConfig } from '../../../src/config/config.js';
import { EtcdStore } from '../../../src/store/etcd/etcd.js';
import { openStore } from '../../../src/store/open.js';
import { MAIN, NO_OVS } from '../../harness/host.js';
import { put } from '../../../src/store/types.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-etcd-tls-'));
const f = (n: string) => path.join(dir, n);
const ssl = (args: string[]) => {
  const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${r.stderr}`);
};
// A CA, a server certificate for 127.0.0.1, a client certificate.
ssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=ovsnet-test-ca']);
for (const [name, ext] of [
  ['server', 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth'],
  ['client', 'extendedKeyUsage=clientAuth'],
] as const) {
  fs.writeFileSync(f(`${name}.ext`), `${ext}\n`);
  ssl([
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.csr`,
    '-subj',
    `/CN=${name === 'client' ? 'root' : name}`,
  ]);
  ssl([
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    `${name}.pem`,
    '-days',
    '2',
    '-extfile',
    `${name}.ext`,
  ]);
}

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => resolve(typeof a === 'object' && a !== null ? a.port : 0));
    });
  });
const port = await freePort();
const peer = await freePort();
const etcd = spawn(
  'etcd',
  [
    '--name',
    'tls',
    '--data-dir',
    f('data'),
    '--listen-client-urls',
    `https://127.0.0.1:${port}`,
    '--advertise-client-urls',
    `https://127.0.0.1:${port}`,
    '--listen-peer-urls',
    `http://127.0.0.1:${peer}`,
    '--initial-advertise-peer-urls',
    `http://127.0.0.1:${peer}`,
    '--initial-cluster',
    `tls=http://127.0.0.1:${peer}`,
    '--cert-file',
    f('server.pem'),
    '--key-file',
    f('server.key'),
    '--trusted-ca-file',
    f('ca.pem'),
    '--client-cert-auth',
  ],
  { stdio: 'ignore' },
);
t.teardown(async () => {
  etcd.kill('SIGTERM');
  await new Promise((r) => etcd.once('exit', r));
  fs.rmSync(dir, { recursive: true, force: true });
});

const settings = (extra: Record<string, string> = {}) =>
  loadConfig({
    OVSNET_STORE: `etcd://127.0.0.1:${port}`,
    OVSNET_ETCD_CA: f('ca.pem'),
    OVSNET_ETCD_CERT: f('client.pem'),
    OVSNET_ETCD_KEY: f('client.key'),
    ...extra,
  });

t.test('TLS with a client certificate, through the OVSNET_ETCD_* settings', async (t) => {
  const store = openStore(settings().store, 3000);
  t.teardown(() => store.close());
  let ok = false;
  for (let i = 0; i < 50 && !ok; i++) {
    ok = await store.txn({ compares: [], success: [put('/ovsnet-test/tls', 'yes')] }).then(
      () => true,
      () => false,
    );
    if (!ok) await new Promise((r) => setTimeout(r, 100));
  }
  t.ok(ok, 'a write over TLS');
  t.equal((await store.get('/ovsnet-test/tls'))?.value, 'yes');
});

t.test('without a client certificate the store is unavailable, quickly and clearly', async (t) => {
  const store = new EtcdStore({ endpoints: [`https://127.0.0.1:${port}`], timeoutMs: 1000, tls: { ca: fs.readFileSync(f('ca.pem')) } });
  t.teardown(() => store.close());
  const started = Date.now();
  await t.rejects(store.get('/ovsnet-test/tls'), { code: /^STORE_(UNAVAILABLE|TIMEOUT)$/, message: /127\.0\.0\.1/ });
  t.ok(Date.now() - started < 2500);
});

t.test('user and password', async (t) => {
  // Enable authentication with a root user, as an operator would.
  const admin = new Etcd3({
    hosts: `https://127.0.0.1:${port}`,
    credentials: {
      rootCertificate: fs.readFileSync(f('ca.pem')),
      certChain: fs.readFileSync(f('client.pem')),
      privateKey: fs.readFileSync(f('client.key')),
    },
  });
  await admin.user('ovsnet').create('s3cret');
  const root = await admin.user('root').create('rootpw');
  await root.addRole('root');
  await admin.role('ovsnet-rw').create();
  await admin.role('ovsnet-rw').grant({ permission: 'Readwrite', range: admin.range({ prefix: '/' }) });
  await admin.user('ovsnet').addRole('ovsnet-rw');
  await admin.auth.authEnable();
  admin.close();
  const store = openStore(settings({ OVSNET_ETCD_USERNAME: 'ovsnet', OVSNET_ETCD_PASSWORD: 's3cret' }).store, 3000);
  t.teardown(() => store.close());
  await store.txn({ compares: [], success: [put('/ovsnet-test/auth', 'in')] });
  t.equal((await store.get('/ovsnet-test/auth'))?.value, 'in', 'reads and writes as that user');
  // The same password from a file, as the managed plugin reads it from its secrets mount.
  fs.writeFileSync(f('etcd-password'), 's3cret\n', { mode: 0o600 });
  const fromFile = openStore(settings({ OVSNET_ETCD_USERNAME: 'ovsnet', OVSNET_ETCD_PASSWORD_FILE: f('etcd-password') }).store, 3000);
  t.teardown(() => fromFile.close());
  t.equal((await fromFile.get('/ovsnet-test/auth'))?.value, 'in', 'OVSNET_ETCD_PASSWORD_FILE: the same access');
  const wrong = openStore(settings({ OVSNET_ETCD_USERNAME: 'ovsnet', OVSNET_ETCD_PASSWORD: 'nope' }).store, 3000);
  t.teardown(() => wrong.close());
  await t.rejects(wrong.get('/ovsnet-test/auth'), {
    code: 'STORE_FORBIDDEN',
    message: /refused get: .*authentication failed.*check OVSNET_ETCD_USERNAME and OVSNET_ETCD_PASSWORD/,
  });
});

t.test('a user and password over plain http: refused at start, before anything reaches the network', async (t) => {
  // An HTTP/2 server without TLS standing for etcd: it reads what a plain-http gRPC client sends,
  // as anyone on the path could (etcd's Authenticate call carries the password).
  const heard: Buffer[] = [];
  const wire = http2.createServer();
  wire.on('stream', (stream) => stream.on('data', (d: Buffer) => heard.push(d)).on('error', () => undefined));
  await new Promise<void>((r) => wire.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => new Promise((r) => wire.close(r)));
  const wirePort = (wire.address() as net.AddressInfo).port;
  const env = {
    PATH: process.env.PATH ?? '',
    OVSNET_STORE: `etcd://127.0.0.1:${wirePort}`,
    OVSNET_ETCD_USERNAME: 'ovsnet',
    OVSNET_ETCD_PASSWORD: 'plain-s3cret',
    OVSNET_SOCKET: f('plain/ovsnet.sock'),
    OVSNET_OVSDB: NO_OVS,
    OVSNET_JOURNAL: 'off',
  };
  const o = spawn(process.execPath, [MAIN, 'serve'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  o.stdout.on('data', (d: Buffer) => (out += d.toString()));
  o.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((r) => o.on('close', r));
  const code = await Promise.race([exited, new Promise<'running'>((r) => setTimeout(() => r('running'), 5000))]);
  if (code === 'running') {
    o.kill('SIGKILL');
    await exited;
  }
  t.equal(code, 2, 'exit status 2: a bad setting');
  t.match(out, /OVSNET_ETCD_USERNAME and the etcd password would cross the network in clear text/);
  t.notOk(Buffer.concat(heard).includes('plain-s3cret'), 'the password never crossed the wire');
});
