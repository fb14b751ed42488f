/**
 * Three hosts, each with dockerd, Open vSwitch and ovsnet, sharing one etcd: the host registry,
 * logical networks over VXLAN (cross-host ping and 10 MiB over TCP, isolation between logical
 * networks, the MTU, full-size pings), enable_icc=false across hosts, endpoint groups across hosts
 * (cluster-groups.ts), 3 x 30 containers started in parallel, and a teardown
 * that leaves nothing behind.
 */
import fs from 'node:fs';
import t, { type Test } from 'tap';
import { CREATE_OVSNET, IMAGE, MAIN, run } from '../harness/host.js';
import { tunnelName } from '../../src/driver/vxlan/tunnels.js';
import { MultiHost, rootTraces, TTL_SECONDS, until } from './cluster-setup.js';
import { groupsAcrossHosts } from './cluster-groups.js';

const SUBNETS = ['10.210.0.', '10.211.0.', '10.212.0.', '10.213.0.', '10.214.0.', 'fd5e:212:', 'fd5e:214:'];
const before = await rootTraces(SUBNETS);
// The store bound as a correctness limit with a wide margin (the most it may be): in a CI run with
// another test file beside it on 2 cores, one txn of the 3 x 30 storm took over the default 3 s
// (a container failed with STORE_TIMEOUT). What ovsnet does when etcd does not answer in time is
// cluster-failures.test.ts's, with the default bound.
const m = await MultiHost.up(t, 'clu', { OVSNET_STORE_TIMEOUT_MS: '10000' });
const marks = [m.cluster.underlay.name, ...m.cluster.hosts.flatMap((h) => [h.name, h.dir])];

t.test('hosts reach each other over the underlay, and see each other in the registry', async (t) => {
  t.equal((await m.host(0).exec(['busybox', 'ping', '-c', '1', '-W', '2', m.cluster.addresses[1] ?? ''])).code, 0);
  // A wait, not a speed check: on a loaded machine the third registration came after 5 s.
  t.ok((await until(async () => (await m.registered()).length === 3, 30_000)) < 30_000, 'three hosts registered');
  t.same(await m.registered(), ['h1', 'h2', 'h3']);
});

t.test('logical networks: created on every host, mismatches explained, tunnels to every member', async (t) => {
  for (let i = 0; i < 3; i++) {
    await m.createLogical(i, 'blue', '10.210.0.0/24');
    await m.createLogical(i, 'red', '10.211.0.0/24');
  }
  const bad = await m.docker(1, [
    ...CREATE_OVSNET,
    '--subnet',
    '10.212.9.0/24',
    '-o',
    'ovsnet.network=blue',
    '-o',
    'ovsnet.encap=vxlan',
    'blue2',
  ]);
  t.not(bad.code, 0);
  t.match(
    bad.stderr,
    /logical network blue is vxlan VNI \d+ with subnet 10\.210\.0\.0\/24 \(created on host h1 .*\); this request has subnet 10\.212\.9\.0\/24: pass --subnet 10\.210\.0\.0\/24/,
  );
  const plain = await m.docker(2, ['network', 'create', '-d', 'ovsnet', '--ipam-driver', 'ovsnet', '--subnet', '10.210.0.0/24', 'plain']);
  t.match(plain.stderr, /already used on this host by logical network blue|belongs to logical network blue/);
  for (let i = 0; i < 3; i++) {
    const took = await until(async () => (await m.tunnels(i)).length === 4, 2000);
    t.ok(took < 2000, `host ${i + 1}: 2 networks x 2 peers = 4 tunnels within 2 s (${took} ms)`);
  }
  const doctor = await m
    .host(0)
    .exec(['env', ...Object.entries(m.env(0)).map(([k, v]) => `${k}=${v}`), process.execPath, MAIN, 'doctor', '--json']);
  const checks = JSON.parse(doctor.stdout) as { check: string; ok: boolean; detail: string }[];
  t.match(
    checks.find((c) => c.check === 'hosts'),
    { ok: true, detail: /h1 \(10\.200\.\d+\.1, MTU 1600\)/ },
    'doctor lists the hosts and their tunnel MTU',
  );
  t.match(
    checks.find((c) => c.check === 'vxlan'),
    { ok: true, detail: /on OVS bridge port br-phy/ },
    'doctor: the tunnel address is on OVS (native tunnelling)',
  );
  const scraped = (await m.host(0).exec(['wget', '-q', '-O', '-', 'http://127.0.0.1:9477/metrics'])).stdout;
  t.match(scraped, /^ovsnet_hosts 3$/m, 'metrics: hosts registered');
  t.match(scraped, /^ovsnet_vxlan_tunnels 4$/m, 'metrics: tunnel ports');
});

t.test('containers on different hosts: ping, 10 MiB over TCP, full-MTU pings; logical networks isolated', async (t) => {
  await Promise.all([m.runOn(0, 'b1', 'blue'), m.runOn(1, 'b2', 'blue'), m.runOn(1, 'r2', 'red'), m.runOn(2, 'r3', 'red')]);
  const [b1, b2, r2, r3] = await Promise.all([m.ip(0, 'b1', 'blue'), m.ip(1, 'b2', 'blue'), m.ip(1, 'r2', 'red'), m.ip(2, 'r3', 'red')]);
  t.not(b1, b2, 'two hosts, two addresses');
  t.equal(await m.dockerOk(0, ['exec', 'b1', 'cat', '/sys/class/net/eth0/mtu']), '1550', 'MTU = underlay 1600 - 50');
  t.ok(await m.ping(0, 'b1', b2), 'h1 -> h2 over the overlay');
  t.ok(await m.ping(1, 'r2', r3), 'h2 -> h3 on the other logical network');
  t.ok(await m.ping(0, 'b1', '10.210.0.1'), 'the gateway answers on every host');
  // 1522 bytes of ICMP payload + 28 of headers = 1550, the MTU: DF is set (Linux's default
  // path-MTU discovery for a packet that fits), so it passes only if the overlay carries it whole.
  t.ok(await m.ping(0, 'b1', b2, 1522), 'full-MTU pings with DF cross hosts');
  t.notOk(await m.ping(1, 'b2', r2), 'blue -> red on one host: isolated');
  t.notOk(await m.ping(0, 'b1', r3), 'blue -> red across hosts: isolated');
  // ovsnet trace on h1 follows the packet into h2's bridge (h2's ovsnet traces its half).
  const traced = await m
    .host(0)
    .exec(['env', ...Object.entries(m.env(0)).map(([k, v]) => `${k}=${v}`), process.execPath, MAIN, 'trace', 'b1', b2, '-o', 'json']);
  const report = JSON.parse(traced.stdout || '{}') as { passes?: { from: string }[]; verdict?: string };
  t.match(report.passes?.at(-1)?.from ?? traced.stderr, /the tunnel from h1, on host h2/, 'trace: a second pass on h2');
  t.match(report.verdict ?? '', /delivered to port ovh\S+ \(endpoint [0-9a-f]{12} on host h2\)/, "trace: delivered to b2's port on h2");

  const size = 10 * 1024 * 1024;
  await m.dockerOk(1, ['exec', '-d', 'b2', 'sh', '-c', 'sleep 30 | nc -l -p 5000 > /tmp/got']);
  await new Promise((r) => setTimeout(r, 300));
  const t0 = Date.now();
  await m.dockerOk(0, ['exec', 'b1', 'sh', '-c', `head -c ${size} /dev/zero | nc -w 5 ${b2} 5000`]);
  let got = '';
  for (let i = 0; i < 100 && got !== String(size); i++) {
    got = (await m.docker(1, ['exec', 'b2', 'sh', '-c', 'wc -c < /tmp/got'])).stdout.trim();
    if (got !== String(size)) await new Promise((r) => setTimeout(r, 100));
  }
  t.equal(got, String(size), `10 MiB over TCP across hosts arrive whole (${Date.now() - t0} ms)`);
});

// An address freed on one host and given on another keeps its MAC (made from the address). A peer
// that reached it before has that MAC learned on its tunnel to the first host, which floods what
// comes for it to its local ports only: lost, until the peer's switch forgets the MAC (300 s).
// Join announces the endpoint (an ARP announcement through the bridge, as if the container sent
// it), which moves every peer's entry to the new host. What is left is the peer's Open vSwitch
// revalidating the datapath flows it cached for the old place: measured here within the bound,
// with a wide margin under the 300 s.
t.test('an address that moves to another host is reached there at once, not after 300 s: Join announces it', async (t) => {
  const moved = '10.210.0.200';
  await m.dockerOk(0, ['run', '-d', '--name', 'mv1', '--network', 'blue', '--ip', moved, IMAGE, 'sleep', '600']);
  t.ok(await m.ping(1, 'b2', moved), 'h2 -> the address on h1 (h2 learns where its MAC is)');
  await m.dockerOk(0, ['rm', '-f', 'mv1']);
  await m.dockerOk(2, [
    'run',
    '-d',
    '--name',
    'mv3',
    '--network',
    'blue',
    '--ip',
    moved,
    IMAGE,
    'nc',
    '-ll',
    '-p',
    '5001',
    '-e',
    'echo',
    'moved',
  ]);
  const once = async () => (await m.docker(1, ['exec', 'b2', 'ping', '-c', '1', '-W', '1', moved])).code === 0;
  const took = await until(once, 10_000);
  t.ok(took < 10_000, `h2 reaches the address, now on h3, ${took} ms after docker run returned (bound 10 s)`);
  if (took === Number.POSITIVE_INFINITY) t.comment(await m.diagnostics());
  const tcp = await m.docker(1, ['exec', 'b2', 'sh', '-c', `nc -w 2 ${moved} 5001 </dev/null`]);
  t.equal(tcp.stdout.trim(), 'moved', 'a TCP connection to it reaches the container on h3');
  await m.dockerOk(2, ['rm', '-f', 'mv3']);
});

t.test('a dual-stack logical network: IPv6 across hosts, one IPv6 gateway on every host', async (t) => {
  for (const i of [0, 1]) await m.createLogical(i, 'dual', '10.212.0.0/24', ['--ipv6', '--subnet', 'fd5e:212::/64']);
  await Promise.all([m.runOn(0, 'd1', 'dual'), m.runOn(1, 'd2', 'dual')]);
  const v6 = (i: number, c: string) =>
    m.dockerOk(i, ['inspect', '-f', '{{(index .NetworkSettings.Networks "dual").GlobalIPv6Address}}', c]);
  const [a, b] = [await v6(0, 'd1'), await v6(1, 'd2')];
  t.not(a, b, 'distinct IPv6 addresses from the shared pool');
  const ping6 = async (i: number, c: string, to: string) =>
    (await m.docker(i, ['exec', c, 'ping', '-6', '-c', '2', '-W', '2', to])).code === 0;
  t.ok(await ping6(0, 'd1', b), 'IPv6 across hosts');
  t.ok(await ping6(1, 'd2', 'fd5e:212::1'), 'the IPv6 gateway answers on the second host too');
  const flows = (await m.host(1).exec(['ovs-ofctl', 'dump-flows', 'ovsnet0'])).stdout;
  t.match(flows, /icmp_type=135,nd_target=fd5e:212::1 actions=drop/, 'neighbour discovery for the gateway is kept off the tunnels');
});

t.test(
  'enable_icc=false on a logical network: no container reaches another, on its host or across; each reaches its own gateway',
  async (t) => {
    const icc = ['-o', 'com.docker.network.bridge.enable_icc=false'];
    for (const i of [0, 1]) await m.createLogical(i, 'quiet', '10.213.0.0/24', icc);
    const mixed = await m.docker(2, [
      ...CREATE_OVSNET,
      '--subnet',
      '10.213.0.0/24',
      '-o',
      'ovsnet.network=quiet',
      '-o',
      'ovsnet.encap=vxlan',
      'quiet',
    ]);
    t.not(mixed.code, 0);
    t.match(
      mixed.stderr,
      /enable_icc=false .*this request has enable_icc=true: pass -o com\.docker\.network\.bridge\.enable_icc=false/,
      'every host must say it',
    );
    await Promise.all([m.runOn(0, 'q1', 'quiet'), m.runOn(1, 'q2', 'quiet'), m.runOn(0, 'q3', 'quiet')]);
    const [q1, q2, q3] = await Promise.all([m.ip(0, 'q1', 'quiet'), m.ip(1, 'q2', 'quiet'), m.ip(0, 'q3', 'quiet')]);
    t.ok(await m.ping(0, 'q1', '10.213.0.1'), "q1 -> h1's gateway");
    t.ok(await m.ping(1, 'q2', '10.213.0.1'), "q2 -> h2's gateway");
    t.notOk(await m.ping(0, 'q1', q2), 'q1 (h1) -> q2 (h2): dropped');
    t.notOk(await m.ping(1, 'q2', q1), 'q2 (h2) -> q1 (h1): dropped');
    t.notOk(await m.ping(0, 'q1', q3), 'q1 -> q3, both on h1: dropped');
    t.equal((await m.docker(0, ['exec', 'q1', 'sh', '-c', `busybox nc -w 2 ${q2} 7000 </dev/null`])).stdout.trim(), '', 'no TCP across');

    // What could only come from another host's member: q1's ARP request for q2, put straight into
    // h1's tunnel to h2. h2 drops it (counted under the network's cookie); q2 never hears it.
    const ICC = 'cookie=0x0f62000000000000/0xffff000000000000';
    const dropsOnH2 = async () => {
      const out = (await m.host(1).exec(['ovs-ofctl', '-O', 'OpenFlow13', 'dump-flows', 'ovsnet0', ICC])).stdout;
      const line = out.split('\n').find((l) => /priority=450,tun_id=/.test(l)) ?? '';
      return { vni: Number(/tun_id=(0x[0-9a-f]+|\d+)/.exec(line)?.[1] ?? NaN), packets: Number(/n_packets=(\d+)/.exec(line)?.[1] ?? NaN) };
    };
    const before = await dropsOnH2();
    t.ok(Number.isInteger(before.vni), `h2 drops what the tunnels of VNI ${before.vni} bring`);
    const port = await m.dockerOk(0, ['exec', 'q1', 'cat', '/sys/class/net/eth0/address']);
    const tunnel = (
      await m.host(0).exec(['ovs-vsctl', 'get', 'Interface', tunnelName(before.vni, m.cluster.addresses[1] ?? '') ?? 'none', 'ofport'])
    ).stdout.trim();
    const mac = port.replace(/:/g, '');
    const ip4 = (a: string) =>
      a
        .split('.')
        .map((x) => Number(x).toString(16).padStart(2, '0'))
        .join('');
    // Ethernet broadcast from q1; ARP: Ethernet/IPv4, 6/4-byte addresses, request; q1 asks for q2.
    const arp = `ffffffffffff${mac}0806` + `0001080006040001${mac}${ip4(q1)}000000000000${ip4(q2)}`;
    for (let k = 0; k < 3; k++)
      await m.host(0).exec(['ovs-ofctl', 'packet-out', 'ovsnet0', `in_port=controller packet=${arp} actions=output:${tunnel}`]);
    const took = await until(async () => (await dropsOnH2()).packets >= before.packets + 3, 3000);
    t.ok(took < 3000, `h2's drop flow counted the 3 frames from the tunnel (${before.packets} -> ${(await dropsOnH2()).packets})`);
    const neigh = await m.dockerOk(1, ['exec', 'q2', 'ip', 'neigh', 'show', q1]);
    t.notMatch(neigh, new RegExp(port, 'i'), `q2 never learnt q1's MAC: ${neigh || 'no entry'}`);

    for (const i of [0, 1]) await m.dockerOk(i, ['rm', '-f', ...(i === 0 ? ['q1', 'q3'] : ['q2'])]);
    for (const i of [0, 1]) await m.dockerOk(i, ['network', 'rm', 'quiet']);
  },
);

let groupsAfterRestart: ((t: Test) => Promise<void>) | undefined;
t.test('endpoint groups of a logical network across hosts: what the receiving group allows, nothing else', async (t) => {
  groupsAfterRestart = await groupsAcrossHosts(t, m);
});

t.test('3 hosts x 30 containers started in parallel get 90 distinct addresses', async (t) => {
  const names = (i: number) => Array.from({ length: 30 }, (_, k) => `p${i + 1}-${k}`);
  const t0 = Date.now();
  // 90 starts on 2 cores beside other test files: a wait of 3 minutes each (a bound on a hang,
  // not a speed check; one run, its machine loaded, took 92 s in all and timed out at 60 s).
  const runs = await Promise.allSettled(
    [0, 1, 2].flatMap((i) =>
      names(i).map((n) => m.dockerOk(i, ['run', '-d', '--name', n, '--network', 'blue', IMAGE, 'sleep', '600'], 180_000)),
    ),
  );
  const failed = runs.flatMap((r) => (r.status === 'rejected' ? [String(r.reason)] : []));
  // The first failure in the assertion's name too (a CI's summary lists failed names only);
  // Docker's words there, the logs' tails (dockerOk's) in the diff below it.
  const first = failed[0]?.split('\n--- ')[0] ?? '';
  t.same(
    failed,
    [],
    `90 containers up in ${Date.now() - t0} ms${failed.length > 0 ? `; ${failed.length} failed, the first: ${first}` : ''}`,
  );
  t.comment(await m.latencies());
  const addresses: string[] = [];
  for (let i = 0; i < 3; i++) {
    const out = await m.dockerOk(i, ['inspect', '-f', '{{(index .NetworkSettings.Networks "blue").IPAddress}}', ...names(i)]);
    addresses.push(...out.split('\n'));
  }
  t.equal(addresses.length, 90);
  t.equal(new Set(addresses).size, 90, '90 distinct addresses');
  const blue = (await m.pools(0)).find((p) => p.pool === '10.210.0.0/24');
  t.match(blue, { logical: 'blue', used: 93 }, 'the pool counts 90 + b1 + b2 + the gateway');
  // Each running container's address reserved (none freed under it, none held twice): said by address on a mismatch.
  const held = await m.reservations(0, '10.210.0.0/24');
  const unreserved = addresses.filter((a) => !held.some((r) => r.address === a));
  t.same(unreserved, [], "every running container's address is reserved");
  if (blue?.used !== 93 || unreserved.length > 0)
    t.comment(`reservations:\n${held.map((r) => JSON.stringify(r)).join('\n')}\n${await m.diagnostics()}`);
  for (const h of ['h1', 'h2', 'h3']) t.ok((blue?.blocks[h] ?? 0) >= 1, `${h} owns blocks of the shared pool`);
  const scraped = (await m.host(0).exec(['wget', '-q', '-O', '-', 'http://127.0.0.1:9477/metrics'])).stdout;
  t.match(scraped, /^ovsnet_ipam_blocks_owned\{pool="10\.210\.0\.0\/24"\} [1-9]/m, 'metrics: blocks this host owns');
  for (let i = 0; i < 3; i++) await m.dockerOk(i, ['rm', '-f', ...names(i)]);
  const after = (await m.pools(0)).find((p) => p.pool === '10.210.0.0/24');
  t.equal(after?.used, 3, 'every address released once the containers are gone');
});

t.test('ovs-vswitchd restarted: tunnels come back with it, the gateway guard within the check period', async (t) => {
  await m.host(1).vswitchd('restart');
  const guarded = async () =>
    /arp_tpa=10\.210\.0\.1 actions=drop/.test((await m.host(1).exec(['ovs-ofctl', 'dump-flows', 'ovsnet0'])).stdout);
  const took = await until(guarded, 15_000);
  t.ok(took < 15_000, `guard flows back ${took} ms after the restart (checked every 10 s)`);
  // The host's underlay (on OVS here) was down meanwhile: if that outlasted the TTL, its peers
  // dropped its tunnels and add them again once it is registered again.
  const b2 = await m.ip(1, 'b2', 'blue');
  const flows = await until(() => m.ping(0, 'b1', b2), 15_000);
  t.ok(flows < 15_000, `cross-host traffic flows again (${flows} ms after the guard)`);
  if (flows === Number.POSITIVE_INFINITY) t.comment(await m.diagnostics());
  await t.test('endpoint groups across hosts, after the restart', async (t) => {
    if (groupsAfterRestart === undefined) t.fail('the groups case did not get that far');
    else await groupsAfterRestart(t);
  });
});

t.test('a host killed is gone from its peers within the TTL, its tunnels with it', async (t) => {
  const complete = await until(async () => (await m.tunnels(0)).join() === 'h2,h2,h2,h3,h3', 15_000);
  t.ok(complete < 15_000, 'before: h1 has its tunnels to h2 (blue, red, dual) and h3 (blue, red)');
  const killedAt = Date.now();
  await m.daemons[2]?.kill('SIGKILL');
  const took = await until(
    async () => (await m.tunnels(0)).every((p) => p !== 'h3') && (await m.tunnels(1)).every((p) => p !== 'h3'),
    10_000,
  );
  t.ok(took < TTL_SECONDS * 1000 + 2000, `tunnels to h3 gone from h1 and h2 after ${took} ms (TTL ${TTL_SECONDS} s)`);
  t.same(await m.tunnels(0), ['h2', 'h2', 'h2'], 'h1 keeps its tunnels to h2 (blue, red, dual)');
  await m.start(2);
  const back = await until(
    async () => (await m.tunnels(0)).filter((p) => p === 'h3').length === 2 && (await m.tunnels(2)).length === 4,
    5000,
  );
  t.ok(back < 5000, `back: tunnels again within ${back} ms of its start (${Date.now() - killedAt} ms in all)`);
  const r2 = await m.ip(1, 'r2', 'red');
  const flows = await until(() => m.ping(2, 'r3', r2), 10_000);
  t.ok(flows < 10_000, `and traffic flows again (${flows} ms later)`);
  if (flows === Number.POSITIVE_INFINITY) t.comment(await m.diagnostics());
});

t.test('down leaves no namespace, directory, link, route, mount or rule of the cluster', async (t) => {
  await m.cluster.down();
  const left = (await run('ip', ['netns', 'list'])).stdout;
  for (const name of [m.cluster.underlay.name, ...m.cluster.hosts.map((h) => h.name)])
    t.notMatch(left, new RegExp(name), `${name} removed`);
  t.notOk(fs.existsSync(m.cluster.underlay.dir));
  t.notOk(
    m.cluster.hosts.some((h) => fs.existsSync(h.dir)),
    'host directories removed',
  );
  t.notOk(fs.existsSync(m.cluster.etcdDir), "etcd's data directory removed");
  t.same(await rootTraces(marks), [], 'no link, route, mount or rule names the cluster');
  t.same(await rootTraces(SUBNETS), before, "the machine's own namespace has no route or rule of the overlay subnets");
});
