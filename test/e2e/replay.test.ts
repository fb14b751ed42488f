/**
 * Docker's requests as Engine 20.10, 25, 27, 28 and 29 send them (test/replay/engine-*.json,
 * built from moby's remote API types at each release; each file says which fields), replayed
 * on the plugin socket of the real daemon in one simulated host: each answer as recorded, and
 * the effects checked in the host (the Join's veth, gateway addresses, published ports' DNAT
 * rules and listeners). Then every field those engines added, with wrong types, huge and hostile
 * values: refused naming the field, the store, OVS and the NAT table unchanged.
 */
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import t, { type Test } from 'tap';
import { DockerHost, pluginCall } from '../harness/host.js';

const REPLAY = fileURLToPath(new URL('../../../test/replay/', import.meta.url));

const host = await DockerHost.up('replay');
const ovsnet = await host.startOvsnet();
/** The container Docker would make: a namespace in the host, and a server in it answering its own address on port 80. */
const SANDBOX = `rp-${randomBytes(3).toString('hex')}`;
let server = '';
t.teardown(async () => {
  if (server !== '') await host.exec(['kill', server]);
  await host.exec(['ip', 'netns', 'del', SANDBOX]);
  await ovsnet.kill('SIGTERM');
  await host.down();
});

const call = (method: string, body?: unknown) => pluginCall(ovsnet.socket, method, body);
const sh = async (args: string[]) => (await host.exec(args)).stdout.trim();

interface Step {
  call: string;
  body?: unknown;
  /** The answer, exactly. */
  answer?: unknown;
  /** What the answer must hold at least. */
  match?: Record<string, unknown>;
  /** What must hold in the host afterwards, or what Docker does then: see effect(). */
  effect?: string;
  effects?: string[];
}

/** The file with each {{NAME}} made a fresh Docker ID (64 hex digits), one per name. */
function load(file: string): { comment: string; calls: Step[] } {
  const ids = new Map<string, string>();
  const text = fs
    .readFileSync(path.join(REPLAY, file), 'utf8')
    .replace(/\{\{(\w+)\}\}/g, (_, name: string) => ids.get(name) ?? ids.set(name, randomBytes(32).toString('hex')).get(name) ?? '');
  return JSON.parse(text) as { comment: string; calls: Step[] };
}

/** The host's links holding `address` (ip -o addr: "N: DEV inet(6) ADDR/BITS ..."). */
async function holders(address: string): Promise<string[]> {
  const lines = (await sh(['ip', '-o', 'addr', 'show'])).split('\n');
  return lines.filter((l) => l.split(/\s+/)[3]?.split('/')[0] === address).map((l) => l.split(/\s+/)[1] ?? '');
}

/** Destinations of the DNAT rules for host port `port`, and whether something listens on it. */
async function published(port: number): Promise<{ to: string[]; listening: boolean }> {
  const rules = (await sh(['iptables', '-t', 'nat', '-S', 'OVSNET-DNAT'])).split('\n');
  const to = rules
    .filter((r) => r.includes(`--dport ${port} `) && r.includes('-j DNAT'))
    .map((r) => /--to-destination (\S+)/.exec(r)?.[1] ?? '?');
  const listening = (await sh(['ss', '-Hltn', `sport = :${port}`])) !== '';
  return { to, listening };
}

/** Join's SrcName by EndpointID: where Docker moves the interface back after Leave. */
const srcNames = new Map<string, string>();
const inSandbox = (args: string[]) => host.exec(['ip', 'netns', 'exec', SANDBOX, ...args]);

/** What Docker does after Join: the interface moved into the container, renamed, its MAC and address set. */
async function plug(src: string, name: string, cidr: string, mac: string): Promise<void> {
  if (server === '') {
    await sh(['ip', 'netns', 'add', SANDBOX]);
    await inSandbox(['ip', 'link', 'set', 'lo', 'up']);
    const js = 'require("net").createServer((s) => s.on("error", () => {}).end(s.localAddress)).listen(80, "0.0.0.0")';
    server = await sh(['sh', '-c', `ip netns exec ${SANDBOX} ${process.execPath} -e '${js}' >/dev/null 2>&1 & echo $!`]);
  }
  await sh(['ip', 'link', 'set', src, 'netns', SANDBOX]);
  await inSandbox(['ip', 'link', 'set', src, 'name', name]);
  await inSandbox(['ip', 'link', 'set', name, 'address', mac, 'up']);
  await inSandbox(['ip', 'addr', 'add', cidr, 'dev', name]);
}

/** What a TCP client on the host's loopback gets from host port `port` ('' for nothing), tried for up to 5 s. */
async function reach(port: number): Promise<string> {
  const js = `const s = require("net").connect(${port}, "127.0.0.1"); let d = ""; s.on("data", (b) => (d += b)); s.on("close", () => console.log(d)); s.on("error", () => {}); s.setTimeout(2000, () => s.destroy())`;
  let got = '';
  for (let i = 0; i < 25 && got === ''; i++) {
    got = await sh([process.execPath, '-e', js]);
    if (got === '') await new Promise((r) => setTimeout(r, 200));
  }
  return got;
}

async function effect(t: Test, what: string, answer: Record<string, unknown>, step: Step): Promise<void> {
  const [kind = '', a = '', b = '', c = ''] = what.split(' ');
  const endpointId = (step.body as { EndpointID?: string } | undefined)?.EndpointID ?? '';
  if (kind === 'plug') {
    await plug(srcNames.get(endpointId) ?? '', a, b, c);
    t.match(
      await sh(['ip', 'netns', 'exec', SANDBOX, 'ip', '-o', 'addr', 'show', 'dev', a]),
      b.split('/')[0] ?? '',
      `${a} in the container`,
    );
  } else if (kind === 'unplug') {
    // Docker moves it back to the host, renamed to its SrcName, before DeleteEndpoint.
    await inSandbox(['ip', 'link', 'set', a, 'netns', String(ovsnet.child.pid ?? 0), 'name', srcNames.get(endpointId) ?? '']);
    t.equal((await host.exec(['ip', 'link', 'show', srcNames.get(endpointId) ?? ''])).code, 0, `${a} back in the host`);
  } else if (kind === 'reach') {
    t.equal(await reach(Number(a)), b, `127.0.0.1:${a} reaches the container at ${b}`);
  } else if (kind === 'link') {
    const src = (answer.InterfaceName as { SrcName?: string } | undefined)?.SrcName ?? '';
    t.equal((await host.exec(['ip', 'link', 'show', src])).code, 0, `Join's SrcName ${src} exists in the host`);
  } else if (kind === 'gateway') {
    const [dev] = await holders(a);
    t.ok(dev, `a gateway port holds ${a}`);
    if (b === 'ipv6-only') {
      t.same(await sh(['ip', '-o', '-4', 'addr', 'show', 'dev', (dev ?? '').replace(/@.*/, '')]), '', `${dev ?? ''} holds no IPv4 address`);
    }
  } else if (kind === 'no-address') {
    t.same(await holders(a), [], `no link holds ${a}`);
  } else if (kind === 'published') {
    const got = await published(Number(a));
    t.same(got, b === 'none' ? { to: [], listening: false } : { to: [b], listening: true }, `host port ${a}: ${b}`);
  } else {
    t.fail(`unknown effect ${what}`);
  }
}

for (const file of fs
  .readdirSync(REPLAY)
  .filter((f) => f.endsWith('.json'))
  .sort()) {
  t.test(file, async (t) => {
    const { comment, calls } = load(file);
    t.comment(comment.slice(0, 120));
    for (const [i, step] of calls.entries()) {
      const res = await call(step.call, step.body);
      const body = res.body as Record<string, unknown>;
      const what = `${i}: ${step.call}`;
      t.equal(res.status, 200, `${what} ${res.status === 200 ? '' : JSON.stringify(body)}`);
      if (step.answer !== undefined) t.same(body, step.answer, `${what}: the answer`);
      if (step.match !== undefined) t.match(body, step.match, `${what}: the answer holds`);
      if (step.call === 'NetworkDriver.Join') {
        srcNames.set((step.body as { EndpointID: string }).EndpointID, (body.InterfaceName as { SrcName: string }).SrcName);
      }
      for (const e of step.effects ?? (step.effect === undefined ? [] : [step.effect])) await effect(t, e, body, step);
    }
  });
}

/** Every store key and value, OVS's ports with their external IDs, the nat table's ovsnet rules. */
async function state(): Promise<string> {
  const db = new Database(host.storeFile, { readonly: true, fileMustExist: true });
  try {
    const rows = db.prepare('SELECT key, value FROM kv ORDER BY key').all() as { key: Buffer | string; value: Buffer | string }[];
    const kv = rows.map((r) => `${r.key.toString()}=${r.value.toString()}`);
    const ports = await sh(['ovs-vsctl', '--bare', '--columns=name,external_ids', 'list', 'Port']);
    const nat = (await sh(['iptables-save', '-t', 'nat'])).split('\n').filter((l) => l.includes('OVSNET'));
    return JSON.stringify({ kv, ports: ports.split('\n').sort(), nat });
  } finally {
    db.close();
  }
}

t.test('every field Engine 27-29 added: wrong types, huge and hostile values refused naming it, nothing changed', async (t) => {
  const NET = randomBytes(32).toString('hex');
  const pool = { AddressSpace: 'LocalDefault', Pool: '10.78.0.0/24', SubPool: '', Options: {}, V6: false };
  t.equal((await call('IpamDriver.RequestPool', pool)).status, 200);
  const gateway = { PoolID: 'LocalDefault/10.78.0.0/24', Address: '', Options: { RequestAddressType: 'com.docker.network.gateway' } };
  t.equal((await call('IpamDriver.RequestAddress', gateway)).status, 200);
  const IPv4Data = [{ AddressSpace: 'LocalDefault', Pool: '10.78.0.0/24', Gateway: '10.78.0.1/24' }];
  const network = { NetworkID: NET, Options: { 'com.docker.network.generic': {} }, IPv4Data, IPv6Data: [] };
  t.equal((await call('NetworkDriver.CreateNetwork', network)).status, 200);
  const before = await state();
  const huge = 'z'.repeat(300_000);
  const IPV4 = 'com.docker.network.enable_ipv4';
  const IFNAME = 'com.docker.network.endpoint.ifname';
  const endpoint = (v: unknown) => ({
    NetworkID: NET,
    EndpointID: randomBytes(32).toString('hex'),
    Interface: { Address: '10.78.0.9/24', AddressIPv6: '', MacAddress: '' },
    Options: { [IFNAME]: v, 'com.docker.network.endpoint.sysctls': 'net.ipv4.conf.IFNAME.forwarding=0' },
  });
  const v6only = (v: unknown, v4: unknown[] = []) => ({
    NetworkID: randomBytes(32).toString('hex'),
    Options: { [IPV4]: v, 'com.docker.network.generic': {} },
    IPv4Data: v4,
    IPv6Data: [{ AddressSpace: 'LocalDefault', Pool: 'fd00:78::/64', Gateway: 'fd00:78::1/64' }],
  });
  const ifnameErr =
    /^CreateEndpoint: Options\.com\.docker\.network\.endpoint\.ifname is .*; expected an interface name: 1 to 15 printable ASCII/;
  const cases: [string, unknown, RegExp][] = [
    ['NetworkDriver.GwAllocCheck', { Options: [] }, /^GwAllocCheck: Options must be an object$/],
    [
      'NetworkDriver.GwAllocCheck',
      { Options: { [IPV4]: 'false' } },
      /^GwAllocCheck: Options\.com\.docker\.network\.enable_ipv4 must be true or false, got "false"$/,
    ],
    [
      'NetworkDriver.GwAllocCheck',
      { Options: { [IPV4]: huge } },
      /enable_ipv4 must be true or false, got "z{79}\.\.\. \(300002 characters\)$/,
    ],
    [
      'NetworkDriver.GwAllocCheck',
      { Options: { 'com.docker.network.generic': { 'ovsnet.group': { $ne: 1 } } } },
      /generic\.ovsnet\.group must be a string/,
    ],
    ['NetworkDriver.CreateNetwork', v6only(0), /^CreateNetwork: Options\.com\.docker\.network\.enable_ipv4 must be true or false, got 0$/],
    ['NetworkDriver.CreateNetwork', v6only(null, [1]), /^CreateNetwork: IPv4Data\[0\] must be an object$/],
    [
      'NetworkDriver.CreateNetwork',
      v6only(false, IPv4Data),
      /^CreateNetwork: Options\.com\.docker\.network\.enable_ipv4 is false but IPv4Data has 1 entries/,
    ],
    ...['', 'x'.repeat(16), huge, '../../etc', 'a b', 'eth0\n', '.', '..', 'a:0', 'ü', 15, false, { a: 1 }, ['eth0']].map(
      (v): [string, unknown, RegExp] => ['NetworkDriver.CreateEndpoint', endpoint(v), ifnameErr],
    ),
    [
      'NetworkDriver.CreateEndpoint',
      { ...endpoint('ok0'), Options: { 'ovsnet.sysctls': '1' } },
      /ovsnet\.sysctls is not an ovsnet endpoint option/,
    ],
  ];
  for (const [method, body, err] of cases) {
    const res = await call(method, body);
    t.equal(res.status, 500, `${method} refused`);
    t.match(res.body, { Err: err }, `${method}: ${String((res.body as { Err?: string }).Err).slice(0, 100)}`);
    t.ok(String((res.body as { Err?: string }).Err).length < 500, 'a bounded message');
  }
  t.equal(await state(), before, 'store, OVS ports and NAT rules unchanged');
  t.equal((await call('NetworkDriver.DeleteNetwork', { NetworkID: NET })).status, 200);
  t.equal((await call('IpamDriver.ReleaseAddress', { PoolID: 'LocalDefault/10.78.0.0/24', Address: '10.78.0.1' })).status, 200);
  t.equal((await call('IpamDriver.ReleasePool', { PoolID: 'LocalDefault/10.78.0.0/24' })).status, 200);
});
