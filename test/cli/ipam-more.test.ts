/**
 * `ovsnet ipam adopt host-local NAME` from files the real host-local CNI IPAM plugin wrote
 * (/usr/lib/cni/host-local, Debian's containernetworking-plugins), and `ovsnet ipam
 * --reservations [POOL]`, run as the operator runs them (dist/src/main.js) on an embedded store.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { holders } from '../../src/ipam-driver/state/holder-keys.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';
import { makeIpam, pool } from '../helpers/ipam.js';

const root = new URL('../../../', import.meta.url).pathname;
const HOST_LOCAL = '/usr/lib/cni/host-local';
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-adopt-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
const file = path.join(dir, 'state.db');
const env = { PATH: process.env.PATH ?? '', OVSNET_STORE: `sqlite:${file}`, OVSNET_HOST: 'test-host' };

const ovsnet = (...args: string[]) => spawnSync(process.execPath, [`${root}dist/src/main.js`, ...args], { env, encoding: 'utf8' });

/** One CNI ADD through the real host-local plugin; returns the address it gave. */
function hostLocalAdd(containerId: string, ifname: string): string {
  const conf = { cniVersion: '1.0.0', name: 'hl1', type: 'bridge', ipam: { type: 'host-local', subnet: '10.84.0.0/24', dataDir: dir } };
  const res = spawnSync(HOST_LOCAL, [], {
    input: JSON.stringify(conf),
    encoding: 'utf8',
    env: { CNI_COMMAND: 'ADD', CNI_CONTAINERID: containerId, CNI_NETNS: '/proc/self/ns/net', CNI_IFNAME: ifname, CNI_PATH: '/usr/lib/cni' },
  });
  if (res.status !== 0) throw new Error(`host-local failed: ${res.stdout}${res.stderr}`);
  return ((JSON.parse(res.stdout) as { ips: { address: string }[] }).ips[0]?.address ?? '').split('/')[0] ?? '';
}

t.test('adopt host-local: each address for its attachment, none handed out twice', async (t) => {
  if (!fs.existsSync(HOST_LOCAL)) throw new Error(`${HOST_LOCAL} is missing: install containernetworking-plugins`);
  const store = new SqliteStore({ file });
  let ipam = makeIpam(store, { host: 'test-host' });
  const { poolId } = await ipam.requestPool(pool('10.84.0.0/24'));
  await ipam.requestAddress({ poolId, address: '', gateway: true });
  // ovsnet already gave 10.84.0.4 to a Docker container: host-local's .4 is a conflict.
  await ipam.requestAddress({ poolId, address: '10.84.0.4', gateway: false, name: 'web' });
  await ipam.stop();
  const given = [hostLocalAdd('cid1', 'eth0'), hostLocalAdd('cid2', 'eth0'), hostLocalAdd('cid3', 'net1')];
  t.same(given, ['10.84.0.2', '10.84.0.3', '10.84.0.4'], 'host-local handed out .2 to .4');

  const first = ovsnet('ipam', 'adopt', 'host-local', 'hl1', '--dir', dir, '--json');
  t.equal(first.status, 1, 'exit status 1: one address could not be adopted');
  t.match(JSON.parse(first.stdout), [
    { address: '10.84.0.2', holder: 'cni/cid1/eth0', outcome: 'adopted', detail: 'pool 10.84.0.0/24' },
    { address: '10.84.0.3', holder: 'cni/cid2/eth0', outcome: 'adopted' },
    {
      address: '10.84.0.4',
      holder: 'cni/cid3/net1',
      outcome: 'taken',
      detail: /already reserved by a request for this exact address "web" \(host test-host/,
    },
  ]);
  const again = ovsnet('ipam', 'adopt', 'host-local', 'hl1', '--dir', dir, '--json');
  t.match(
    (JSON.parse(again.stdout) as { outcome: string }[]).map((r) => r.outcome),
    ['held', 'held', 'taken'],
    'adopting again changes nothing',
  );

  const listed = ovsnet('ipam', '--reservations', '10.84.0.0/24');
  t.equal(listed.status, 0, listed.stderr);
  const lines = listed.stdout.trim().split('\n');
  t.match(lines[0], /^POOL +ADDRESS +KIND +HOLDER +HOST +AGE$/);
  t.match(lines.slice(1), [
    /^10\.84\.0\.0\/24 +10\.84\.0\.1 +gateway +docker\/gateway +test-host +\d+s$/,
    /^10\.84\.0\.0\/24 +10\.84\.0\.2 +static +cni\/cid1\/eth0 +test-host +\d+s$/,
    /^10\.84\.0\.0\/24 +10\.84\.0\.3 +static +cni\/cid2\/eth0 +test-host +\d+s$/,
    /^10\.84\.0\.0\/24 +10\.84\.0\.4 +static +docker\/name\/test-host\/web +test-host +\d+s$/,
  ]);
  t.equal(lines.length, 5);
  t.match(JSON.parse(ovsnet('ipam', '--reservations', '--json').stdout), [{ address: '10.84.0.1' }, { adopted: 'host-local hl1' }, {}, {}]);

  // The daemon's IPAM, started afresh: the attachments get their addresses, nobody else does.
  ipam = makeIpam(store, { host: 'test-host' });
  t.equal(
    (await ipam.requestAddress({ poolId, address: '', gateway: false, holder: holders.cni('cid2', 'eth0') })).address,
    '10.84.0.3/24',
  );
  t.equal((await ipam.requestAddress({ poolId, address: '', gateway: false })).address, '10.84.0.5/24', 'dynamic: past the adopted');
  await ipam.stop();
  await store.close();
});

t.test('mistakes say what would be valid', async (t) => {
  const bad = ovsnet('ipam', 'adopt', 'dhcp', 'x');
  t.equal(bad.status, 2);
  t.match(bad.stderr, 'ovsnet: expected ipam adopt host-local NAME or ipam adopt docker NETWORK, not ipam adopt dhcp x');
  const missing = ovsnet('ipam', 'adopt', 'host-local', 'nope', '--dir', dir);
  t.equal(missing.status, 1);
  t.match(missing.stderr, `ovsnet: no host-local network nope: ${dir}/nope does not exist; give the name of a directory under ${dir}`);
  const noPool = ovsnet('ipam', '--reservations', '10.99.0.0/24');
  t.equal(noPool.status, 1);
  t.match(noPool.stderr, 'ovsnet: no ovsnet pool is 10.99.0.0/24: give a subnet or PoolID of one of 10.84.0.0/24');
  const flag = ovsnet('ipam', '--reservations', '--bogus');
  t.equal(flag.status, 2);
  t.match(flag.stderr, "Unknown option '--bogus'");
});

t.test(
  'adopt host-local: links, FIFOs, large files and names the CNI spec refuses are reported and adopt nothing; NAME stays under --dir',
  async (t) => {
    const base = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-adopt-hostile-'));
    t.teardown(() => fs.rmSync(base, { recursive: true, force: true }));
    const db = path.join(base, 'state', 'state.db');
    const store = new SqliteStore({ file: db });
    const ipam = makeIpam(store, { host: 'test-host' });
    await ipam.requestPool(pool('10.85.0.0/24'));
    await ipam.stop();
    await store.close();
    const run = (...args: string[]) =>
      spawnSync(process.execPath, [`${root}dist/src/main.js`, ...args], {
        env: { ...env, OVSNET_STORE: `sqlite:${db}` },
        encoding: 'utf8',
        timeout: 20_000, // a FIFO read would block for ever
      });
    const nets = path.join(base, 'networks');
    const hl = path.join(nets, 'hl2');
    fs.mkdirSync(hl, { recursive: true });
    const secret = path.join(base, 'root-only');
    fs.writeFileSync(secret, 'rootsecret\neth0\n', { mode: 0o600 });
    fs.symlinkSync(secret, path.join(hl, '10.85.0.2'));
    execFileSync('mkfifo', [path.join(hl, '10.85.0.3')]);
    fs.writeFileSync(path.join(hl, '10.85.0.4'), 'a/b\neth0');
    fs.writeFileSync(path.join(hl, '10.85.0.5'), '\u001b[2Jx\neth0');
    fs.writeFileSync(path.join(hl, '10.85.0.6'), 'x'.repeat(4096));
    fs.writeFileSync(path.join(hl, '10.85.0.7'), 'c0ffee\n..');
    fs.writeFileSync(path.join(hl, '10.85.0.8'), 'goodid\neth1');
    const outside = path.join(base, 'x');
    fs.mkdirSync(outside);
    fs.writeFileSync(path.join(outside, '10.85.0.9'), 'evil\neth0');

    const r = run('ipam', 'adopt', 'host-local', 'hl2', '--dir', nets, '--json');
    t.equal(r.status, 1, `exit status 1: some files refused (${r.stderr})`);
    t.match(JSON.parse(r.stdout), [
      { address: '10.85.0.2', outcome: 'refused', detail: /hl2\/10\.85\.0\.2: a symbolic link: not adopted/ },
      { address: '10.85.0.3', outcome: 'refused', detail: /not a regular file: not adopted/ },
      { address: '10.85.0.4', outcome: 'refused', detail: /holds "a\/b eth0", whose name is not a container ID/ },
      { address: '10.85.0.5', outcome: 'refused', detail: /holds "\\u001b\[2Jx eth0", whose name is not a container ID/ },
      { address: '10.85.0.6', outcome: 'refused', detail: /4096 bytes, more than a reservation's 1024/ },
      { address: '10.85.0.7', outcome: 'refused', detail: /whose name is not an interface name/ },
      { address: '10.85.0.8', holder: 'cni/goodid/eth1', outcome: 'adopted' },
    ]);
    t.notMatch(r.stdout, /rootsecret/, "the linked file's content is never read");
    for (const name of ['../x', '..', 'a/b', '.']) {
      const o = run('ipam', 'adopt', 'host-local', name, '--dir', nets);
      t.equal(o.status, 1, `${name}: refused`);
      t.match(o.stderr, `is not a host-local network name: a CNI network name`);
    }
    const held = JSON.parse(run('ipam', '--reservations', '10.85.0.0/24', '--json').stdout) as { address: string }[];
    t.same(
      held.map((h) => h.address),
      ['10.85.0.8'],
      'only the plain reservation was adopted: nothing from a refused file, nothing from outside --dir',
    );
  },
);
