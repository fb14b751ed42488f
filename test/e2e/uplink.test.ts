/**
 * VLANs onto the physical network (OVSNET_UPLINK): two hosts sharing one etcd, each cabled to a
 * VLAN-aware switch (test/harness/physical-switch.ts) by its uplink `vl0`. The uplink refused
 * where it cannot be one; the host's address moved to the host port and still reaching the
 * other host; VLAN networks across hosts (tag agreed in etcd, uplink MTU, traffic, 802.1Q tags
 * on the switch, isolation on the wire, a physical host on an access port); enable_icc=false
 * across them; a restart; the
 * uplink put back when OVSNET_UPLINK goes; VLAN and VXLAN throughput between the same hosts.
 */
import t from 'tap';
import { Cluster } from '../harness/cluster.js';
import { IMAGE, MAIN, run, type Ovsnet } from '../harness/host.js';
import { PhysicalSwitch } from '../harness/physical-switch.js';
import { until } from './cluster-setup.js';

const cluster = await Cluster.up('upl', 2);
const sw = await PhysicalSwitch.up('upl').catch(async (err: unknown) => {
  await cluster.down();
  throw err;
});
const daemons: (Ovsnet | undefined)[] = [];
t.teardown(async () => {
  await cluster.down(); // hosts go while their ovsnet still answers
  for (const d of daemons) await d?.kill('SIGTERM').catch(() => undefined);
  await sw.down();
});

const host = (i: number) => {
  const h = cluster.hosts[i];
  if (h === undefined) throw new Error(`no host ${i}`);
  return h;
};
/** The hosts' own addresses on the physical network (on vl0, moved to ovsnet-host). */
const hostAddr = (i: number) => `10.230.0.${i + 1}`;
const env = (i: number, uplink = 'vl0'): Record<string, string> => ({
  OVSNET_STORE: cluster.store,
  OVSNET_HOST: `h${i + 1}`,
  OVSNET_VTEP_IP: cluster.addresses[i] ?? '',
  OVSNET_LOG_LEVEL: 'info',
  ...(uplink === '' ? {} : { OVSNET_UPLINK: uplink }),
});
const start = async (i: number, uplink = 'vl0') => {
  daemons[i] = await host(i).startOvsnet(env(i, uplink));
};
const docker = (i: number, args: readonly string[]) => host(i).dockerOk(args);
const sh = async (i: number, cmd: string) => (await host(i).exec(['sh', '-c', cmd])).stdout.trim();
const ping = async (i: number, from: string, to: string, size = 56) =>
  (await host(i).docker(['exec', from, 'ping', '-c', '2', '-W', '2', '-s', String(size), to])).code === 0;
const ipOf = (i: number, c: string, net: string) =>
  docker(i, ['inspect', '-f', `{{(index .NetworkSettings.Networks "${net}").IPAddress}}`, c]);
/** docker network create of logical network `name` on host i (its answer, to check refusals too). */
const createLogical = (i: number, name: string, subnet: string, range: string, extra: readonly string[] = [], encap = 'vlan') =>
  host(i).docker(
    ['network', 'create', '-d', 'ovsnet', '--ipam-driver', 'ovsnet', '--subnet', subnet, '--ip-range', range].concat([
      '-o',
      `ovsnet.encap=${encap}`,
      '-o',
      `ovsnet.network=${name}`,
      ...extra,
      name,
    ]),
  );
const createVlan = (i: number, name: string, subnet: string, range: string) => createLogical(i, name, subnet, range);
const vlanNetwork = async (i: number, name: string, subnet: string, range: string, extra: readonly string[] = []) => {
  const r = await createLogical(i, name, subnet, range, extra);
  if (r.code !== 0) throw new Error(`network create ${name} on h${i + 1} failed: ${r.stderr}`);
};
const trunks = async (i: number) => (await host(i).exec(['ovs-vsctl', 'get', 'port', 'vl0', 'trunks'])).stdout.trim();

const ports: string[] = [];
for (const i of [0, 1]) {
  ports.push(await sw.trunk(host(i), 'vl0', `${hostAddr(i)}/24`));
  // A static route through the uplink: it moves with the address.
  await host(i).exec(['ip', 'route', 'add', '10.239.0.0/16', 'via', hostAddr(1 - i)]);
}

t.test('an uplink that cannot be one refuses the start, saying why', async (t) => {
  const refused = async (uplink: string) => {
    const r = await host(0).exec([
      'env',
      'OVSNET_SOCKET=/run/ovsnet-refused.sock',
      'OVSNET_STORE=sqlite:/run/ovsnet-refused/state.db',
      'OVSNET_JOURNAL=off',
      `OVSNET_UPLINK=${uplink}`,
      process.execPath,
      MAIN,
      'serve',
    ]);
    return `${r.code} ${r.stdout}${r.stderr}`;
  };
  t.match(await refused('nope0'), /OVSNET_UPLINK=nope0: this host has no interface nope0; its interfaces: .*vl0/);
  t.match(await refused('ul0'), /OVSNET_UPLINK=ul0: ul0 is already a port of Open vSwitch bridge br-phy: remove it there/);
  t.match(await refused('lo'), /OVSNET_UPLINK=lo: the loopback interface/);
  // A port of a Linux bridge, an address with a lease, an OVS internal port, the bridge itself.
  await sh(0, 'ip link add rb0 type bridge && ip link add rp0 type veth peer name rp1 && ip link set rp0 master rb0');
  await sh(0, 'ip addr add 10.238.0.5/24 dev rp1 valid_lft 3600 preferred_lft 3600');
  await host(0).exec(['ovs-vsctl', 'add-port', 'br-phy', 'ui0', '--', 'set', 'interface', 'ui0', 'type=internal']);
  try {
    t.match(await refused('rp0'), /OVSNET_UPLINK=rp0: rp0 is a port of rb0 \(a Linux bridge or bond\): take it out/);
    t.match(await refused('rp1'), /OVSNET_UPLINK=rp1: its address 10\.238\.0\.5\/24 is leased \(DHCP or router advertisement\)/);
    t.match(await refused('ui0'), /OVSNET_UPLINK=ui0: ui0 is an Open vSwitch internal port, not a physical interface/);
    // The bridge itself, with a port, as docker0 is: its addresses would be moved.
    t.match(await refused('rb0'), /OVSNET_UPLINK=rb0: rb0 is a Linux bridge, not an interface cabled to the physical switch/);
  } finally {
    await sh(0, 'ip link del rp0; ip link del rb0; ovs-vsctl del-port br-phy ui0');
  }
  t.equal(await trunks(0), '', 'nothing was made of vl0');
});

t.test("the uplink becomes a trunk port; the host's address and routes move to ovsnet-host and still work", async (t) => {
  await start(0);
  await start(1);
  for (const i of [0, 1]) {
    const took = await until(async () => /inet /.test(await sh(i, 'ip -4 addr show dev ovsnet-host')), 10_000);
    t.ok(took < 10_000, `h${i + 1}: the host port holds an address`);
    t.equal(await trunks(i), '[0]', `h${i + 1}: vl0 trunks untagged traffic only (no VLAN network yet)`);
    t.notMatch(await sh(i, 'ip -4 addr show dev vl0'), /inet /, `h${i + 1}: no address left on vl0`);
    t.match(await sh(i, 'ip -4 addr show dev ovsnet-host'), new RegExp(`inet ${hostAddr(i).replace(/\./g, '\\.')}/24`));
    t.match(await sh(i, 'ip route show 10.239.0.0/16'), /via .* dev ovsnet-host/, 'the static route moved with it');
  }
  t.equal((await host(0).exec(['busybox', 'ping', '-c', '2', '-W', '2', hostAddr(1)])).code, 0, 'h1 reaches h2 over the switch');
});

let tags: number[] = [];
t.test('VLAN networks across hosts: one tag per network in etcd, the uplink MTU, traffic with no tunnel', async (t) => {
  for (const i of [0, 1]) {
    await vlanNetwork(i, 'vblue', '10.220.0.0/24', '10.220.0.0/25');
    await vlanNetwork(i, 'vred', '10.221.0.0/24', '10.221.0.0/25');
  }
  tags = (await trunks(0)).replace(/[[\]]/g, '').split(', ').map(Number).slice(1);
  t.equal(tags.length, 2, 'h1 trunks the two tags');
  t.equal(await trunks(1), await trunks(0), 'h2 trunks the same tags');
  await Promise.all([
    docker(0, ['run', '-d', '--name', 'b1', '--cap-add', 'NET_ADMIN', '--network', 'vblue', IMAGE, 'sleep', '600']),
    docker(1, ['run', '-d', '--name', 'b2', '--network', 'vblue', IMAGE, 'sleep', '600']),
    docker(1, ['run', '-d', '--name', 'r2', '--network', 'vred', IMAGE, 'sleep', '600']),
  ]);
  const [b2, r2] = [await ipOf(1, 'b2', 'vblue'), await ipOf(1, 'r2', 'vred')];
  t.equal(await docker(0, ['exec', 'b1', 'cat', '/sys/class/net/eth0/mtu']), '1500', "MTU = the uplink's (no tunnel overhead)");
  t.ok(await ping(0, 'b1', b2), 'h1 -> h2 on vblue');
  t.ok(await ping(0, 'b1', b2, 1472), 'full-size pings (1500 bytes) with DF');
  t.ok(await ping(1, 'b2', '10.220.0.1'), 'the gateway answers on h2');
  t.ok(await ping(0, 'b1', '10.220.0.1'), 'and on h1');
  const guard = (await host(1).exec(['ovs-ofctl', 'dump-flows', 'ovsnet0'])).stdout;
  t.match(
    guard,
    new RegExp(`arp,in_port=\\d+,dl_vlan=${tags[0]},arp_tpa=10\\.220\\.0\\.1 actions=drop`),
    'ARP for the gateway is kept off the uplink',
  );
  // No tunnel: no VXLAN port (ovx...) on either host's bridge, nor a vxlan interface in OVS.
  for (const i of [0, 1]) {
    const listed = await host(i).exec(['ovs-vsctl', '--bare', '--columns=name,type', 'list', 'Interface']);
    t.equal(listed.code, 0, listed.stderr);
    t.notMatch(listed.stdout, /\bovx[0-9a-zA-Z]+\b|\bvxlan\b/, `no VXLAN port on h${i + 1}`);
  }
  const seen = await sw.capture(ports[0] ?? '', ['vlan', 'and', 'icmp'], () => ping(0, 'b1', b2), 4);
  t.ok(seen.length >= 2, `the switch saw the pings on h1's port: ${seen.join(' | ')}`);
  t.ok(
    seen.every((l) => l.includes(`vlan ${tags[0]},`) && l.includes('ethertype 802.1Q')),
    `all 802.1Q frames of vblue's tag ${tags[0]}`,
  );
  // Isolation on the wire: b1 takes an address in vred's subnet and tries r2 directly, on-link.
  await docker(0, ['exec', 'b1', 'ip', 'addr', 'add', '10.221.0.250/24', 'dev', 'eth0']);
  const tried = await sw.capture(ports[0] ?? '', ['vlan'], () => ping(0, 'b1', r2), 10);
  t.notOk(await ping(0, 'b1', r2), 'vblue -> vred on-link across hosts: nothing answers');
  // Frames of the attempt (ARP for r2, or pings to it) carry vblue's tag only (other frames may pass: IPv6 of vred's containers).
  const attempt = tried.filter((l) => l.includes(r2));
  t.ok(attempt.length > 0, `the attempt crossed the switch: ${attempt.join(' | ')}`);
  t.ok(
    attempt.every((l) => l.includes(`vlan ${tags[0]},`)),
    "all on vblue's tag on the wire",
  );
  await docker(0, ['exec', 'b1', 'ip', 'addr', 'del', '10.221.0.250/24', 'dev', 'eth0']);

  const size = 10 * 1024 * 1024;
  await docker(1, ['exec', '-d', 'b2', 'sh', '-c', 'sleep 30 | nc -l -p 5000 > /got']);
  await new Promise((r) => setTimeout(r, 300));
  await docker(0, ['exec', 'b1', 'sh', '-c', `head -c ${size} /dev/zero | nc -w 5 ${b2} 5000`]);
  const got = await until(
    async () => (await host(1).docker(['exec', 'b2', 'sh', '-c', 'wc -c < /got'])).stdout.trim() === String(size),
    10_000,
  );
  t.ok(got < 10_000, '10 MiB over TCP across hosts arrive whole');
});

// A container that sends nothing yet (Docker turns IPv6 off on an IPv4 network) is still on the
// wire once joined: its announcement (src/driver/endpoint/announce.ts) tells the physical
// switch where its MAC is, and the VLAN's machines that held its address under another MAC.
t.test(
  "a container joined to a VLAN network is announced on the wire: its ARP announcement on the host's trunk, on the VLAN's tag",
  async (t) => {
    const seen = await sw.capture(
      ports[1] ?? '',
      ['vlan', 'and', 'arp'],
      () => docker(1, ['run', '-d', '--name', 'an2', '--network', 'vblue', IMAGE, 'sleep', '600']),
      2,
    );
    const ip = await ipOf(1, 'an2', 'vblue');
    const mac = await docker(1, ['inspect', '-f', '{{(index .NetworkSettings.Networks "vblue").MacAddress}}', 'an2']);
    const announced = seen.filter((l) => l.includes(`Request who-has ${ip} tell ${ip}`));
    t.ok(announced.length > 0, `the switch saw it on h2's port: ${seen.join(' | ')}`);
    t.ok(
      announced.length > 0 && announced.every((l) => l.includes(`${mac} > ff:ff:ff:ff:ff:ff`) && l.includes(`vlan ${tags[0]},`)),
      `from its MAC (${mac}), broadcast, tagged ${tags[0]}`,
    );
    await docker(1, ['rm', '-f', 'an2']);
  },
);

t.test('a physical host on the switch access port of a VLAN (no ovsnet) reaches its containers, and only them', async (t) => {
  const station = await sw.station(tags[0] ?? 0, ['10.220.0.200/24', '10.221.0.200/24']);
  const [b1, b2, r2] = [await ipOf(0, 'b1', 'vblue'), await ipOf(1, 'b2', 'vblue'), await ipOf(1, 'r2', 'vred')];
  const from = (to: string) => run('ip', ['netns', 'exec', station, 'busybox', 'ping', '-c', '2', '-W', '2', to]);
  t.equal((await from(b1)).code, 0, 'reaches b1 on h1');
  t.equal((await from(b2)).code, 0, 'reaches b2 on h2');
  t.not((await from(r2)).code, 0, 'not r2 of vred, though on-link for it');
  t.equal((await host(1).docker(['exec', 'b2', 'ping', '-c', '1', '-W', '2', '10.220.0.200'])).code, 0, 'and b2 reaches it');
});

t.test('enable_icc=false on a VLAN across hosts: each container reaches its own gateway only; nothing of theirs on the wire', async (t) => {
  for (const i of [0, 1])
    await vlanNetwork(i, 'vquiet', '10.225.0.0/24', '10.225.0.0/25', ['-o', 'com.docker.network.bridge.enable_icc=false']);
  await Promise.all([
    docker(0, ['run', '-d', '--name', 'q1', '--network', 'vquiet', IMAGE, 'sleep', '600']),
    docker(1, ['run', '-d', '--name', 'q2', '--network', 'vquiet', IMAGE, 'sleep', '600']),
  ]);
  const [q1, q2] = [await ipOf(0, 'q1', 'vquiet'), await ipOf(1, 'q2', 'vquiet')];
  t.ok(await ping(0, 'q1', '10.225.0.1'), "q1 -> h1's gateway");
  t.ok(await ping(1, 'q2', '10.225.0.1'), "q2 -> h2's gateway");
  const gateway = `ovg${(await docker(0, ['network', 'inspect', '-f', '{{.Id}}', 'vquiet'])).slice(0, 12)}`;
  const vlan = Number((await host(0).exec(['ovs-vsctl', 'get', 'port', gateway, 'tag'])).stdout.trim());
  const seen = await sw.capture(ports[0] ?? '', ['vlan'], () => ping(0, 'q1', q2), 10);
  t.notOk(await ping(1, 'q2', q1), 'q2 -> q1 across hosts: dropped');
  t.same(
    seen.filter((l) => l.includes(q2)),
    [],
    "q1's attempt at q2 (its ARP) never reached the wire",
  );
  const flows = (await host(1).exec(['ovs-ofctl', 'dump-flows', 'ovsnet0'])).stdout;
  t.match(flows, new RegExp(`priority=450,in_port=\\d+,dl_vlan=${vlan} actions=drop`), "h2 drops the network's frames from the uplink");
  const station = await sw.station(vlan, ['10.225.0.200/24']);
  t.not(
    (await run('ip', ['netns', 'exec', station, 'busybox', 'ping', '-c', '2', '-W', '2', q2])).code,
    0,
    'nor does a physical host on the VLAN reach q2',
  );
  await docker(0, ['rm', '-f', 'q1']);
  await docker(1, ['rm', '-f', 'q2']);
  for (const i of [0, 1]) await docker(i, ['network', 'rm', 'vquiet']);
});

/** The infra port of network `net` on host i and its IPv4 address ('' if none). */
const infraPort = async (i: number, net: string) => {
  const port = `ovi${(await docker(i, ['network', 'inspect', '-f', '{{.Id}}', net])).slice(0, 12)}`;
  return { port, address: /inet ([\d.]+)\//.exec(await sh(i, `ip -4 addr show dev ${port} 2>/dev/null`))?.[1] ?? '' };
};

t.test('an infra network: the host holds an address of the pool on it; containers and the physical VLAN reach its services', async (t) => {
  for (const i of [0, 1]) await vlanNetwork(i, 'vinfra', '10.224.0.0/24', '10.224.0.0/25', ['-o', 'ovsnet.infra=true', '--internal']);
  const [h1, h2] = [await infraPort(0, 'vinfra'), await infraPort(1, 'vinfra')];
  t.match(h1.address, /^10\.224\.0\.\d+$/, `h1's infra port ${h1.port} holds ${h1.address}`);
  t.match(h2.address, /^10\.224\.0\.\d+$/, `h2's holds ${h2.address}`);
  t.not(h1.address, h2.address, 'one address per host, from the shared pool');
  t.equal(await sh(0, `ip link show ${h1.port} >/dev/null && iptables-save | grep -c 10.224.0 || true`), '0', 'no NAT rule');
  await docker(1, ['run', '-d', '--name', 'i2', '--network', 'vinfra', IMAGE, 'sleep', '600']);
  // A service of h1 itself, listening on every address: reached from a container on h2.
  await host(0).exec(['sh', '-c', '(echo served-by-h1 | timeout 20 busybox nc -l -p 7000) >/dev/null 2>&1 &']);
  await new Promise((r) => setTimeout(r, 300));
  const got = await host(1).docker(['exec', 'i2', 'sh', '-c', `nc -w 3 ${h1.address} 7000 </dev/null`]);
  t.equal(got.stdout.trim(), 'served-by-h1', "a container on h2 reaches h1's service on its infra address");
  const vlan = Number((await host(0).exec(['ovs-vsctl', 'get', 'port', h1.port, 'tag'])).stdout.trim());
  const station = await sw.station(vlan, ['10.224.0.200/24']);
  t.equal(
    (await run('ip', ['netns', 'exec', station, 'busybox', 'ping', '-c', '2', '-W', '2', h1.address])).code,
    0,
    'and so does a physical host on the VLAN',
  );
});

t.test('ovsnet restarted: the uplink is found again, the infra port put back, traffic flows', async (t) => {
  const infra = await infraPort(0, 'vinfra');
  await daemons[0]?.kill('SIGTERM');
  await host(0).exec(['ovs-vsctl', 'del-port', infra.port]);
  await start(0);
  t.equal(await trunks(0), await trunks(1));
  t.ok(await ping(0, 'b1', await ipOf(1, 'b2', 'vblue')), 'h1 -> h2 after the restart');
  t.match(await sh(0, 'ip -4 addr show dev ovsnet-host'), /inet 10\.230\.0\.1\/24/);
  // Reconcile runs in the background after the start: wait for it.
  const back = await until(async () => (await infraPort(0, 'vinfra')).address === infra.address, 10_000);
  t.ok(back < 10_000, `the infra port is back with its address (${back} ms)`);
  await docker(0, ['network', 'rm', 'vinfra']);
  t.not((await host(0).exec(['ip', 'link', 'show', infra.port])).code, 0, 'removed with the network');
  t.equal((await host(0).exec(['ovs-vsctl', 'port-to-br', infra.port])).code === 0, false, 'and from OVS');
});

t.test('VLAN over the uplink beside VXLAN between the same two hosts: TCP throughput', async (t) => {
  for (const i of [0, 1]) {
    const r = await createLogical(i, 'vx', '10.223.0.0/24', '10.223.0.0/25', [], 'vxlan');
    t.equal(r.code, 0, r.stderr);
  }
  await docker(0, ['network', 'connect', 'vx', 'b1']);
  await docker(1, ['network', 'connect', 'vx', 'b2']);
  const size = 64 * 1024 * 1024;
  const measure = async (net: string, port: number): Promise<number> => {
    const to = await ipOf(1, 'b2', net);
    await until(() => ping(0, 'b1', to), 5000);
    await docker(1, ['exec', '-d', 'b2', 'sh', '-c', `sleep 60 | nc -l -p ${port} > /dev/null`]);
    await new Promise((r) => setTimeout(r, 300));
    const t0 = process.hrtime.bigint();
    await docker(0, ['exec', 'b1', 'sh', '-c', `head -c ${size} /dev/zero | nc -w 5 ${to} ${port}`]);
    return (size * 8) / (Number(process.hrtime.bigint() - t0) / 1e9) / 1e6;
  };
  const vlan = await measure('vblue', 5101);
  const vxlan = await measure('vx', 5102);
  t.ok(vlan > 0 && vxlan > 0);
  t.comment(`64 MiB b1 -> b2 (h1 -> h2, docker exec included): VLAN uplink ${vlan.toFixed(0)} Mbit/s, VXLAN ${vxlan.toFixed(0)} Mbit/s`);
});

t.test('started without OVSNET_UPLINK: the uplink is put back as it was', async (t) => {
  await docker(1, ['rm', '-f', 'b2', 'r2']);
  await docker(1, ['rm', '-f', 'i2']);
  for (const n of ['vblue', 'vred', 'vx', 'vinfra']) await docker(1, ['network', 'rm', n]);
  await daemons[1]?.kill('SIGTERM');
  await start(1, '');
  // The address goes back first, then the routes through it: wait for both, then say which is missing.
  const address = () => sh(1, 'ip -4 addr show dev vl0');
  const route = () => sh(1, 'ip route show 10.239.0.0/16');
  const back = await until(async () => /inet 10\.230\.0\.2\/24/.test(await address()) && /dev vl0/.test(await route()), 10_000);
  t.ok(back < 10_000, `the address and the route are back on vl0 (${back} ms)`);
  t.match(await address(), /inet 10\.230\.0\.2\/24/, 'the address');
  t.match(await route(), /dev vl0/, 'the route');
  t.equal((await host(1).exec(['ovs-vsctl', 'port-to-br', 'vl0'])).code === 0, false, 'vl0 is no bridge port');
  t.equal((await host(1).exec(['ip', 'link', 'show', 'ovsnet-host'])).code === 0, false, 'ovsnet-host is gone');
  t.equal((await host(1).exec(['busybox', 'ping', '-c', '2', '-W', '2', hostAddr(0)])).code, 0, 'h2 reaches h1 from vl0');
  const refused = await createVlan(1, 'vblue', '10.220.0.0/24', '10.220.0.0/25');
  t.match(
    refused.stderr,
    /logical network vblue with -o ovsnet\.encap=vlan goes onto the physical network through an uplink, and this host has none: set OVSNET_UPLINK/,
  );
});
