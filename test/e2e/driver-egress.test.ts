/**
 * A container's way out, end to end on the userspace datapath (the harness's hosts have no
 * openvswitch module), and the subnets Docker may hand the driver; egress and ingress rules
 * (-o ovsnet.egress, -o ovsnet.ingress) by their effect on traffic, and their refusals.
 *
 * "Outside" is a namespace this test makes, joined to the simulated host by a veth: the host
 * routes 198.19.0.0/24 to it, and it has no route back to container subnets, so only traffic
 * masqueraded to the host's 198.18.0.1 gets an answer (the ingress case adds one).
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { FEATURE } from '../../src/driver/ovs/cookies.js';
import { keys } from '../../src/store/keys.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';
import { DockerHost, IMAGE, MAIN, run, type Ovsnet } from '../harness/host.js';
import { DNS_ANSWER, connectFrom, startOutside } from '../helpers/outside-servers.js';

const FAR = '198.19.0.10';

async function ipOk(args: string[]): Promise<string> {
  const r = await run('ip', args);
  if (r.code !== 0) throw new Error(`ip ${args.join(' ')} failed: ${r.stderr}`);
  return r.stdout.trim();
}

const host = await DockerHost.up('drvegr');
const outside = `${host.name}-o`;
const ovsnet: Ovsnet = await host.startOvsnet();
const stops: (() => void)[] = [];
t.teardown(async () => {
  for (const stop of stops) stop();
  await host.down();
  await ovsnet.kill('SIGTERM');
  await run('ip', ['netns', 'del', outside]);
});
await ipOk(['netns', 'add', outside]);
await ipOk(['link', 'add', 'ox0', 'netns', host.name, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', outside]);
await ipOk(['-n', host.name, 'addr', 'add', '198.18.0.1/24', 'dev', 'ox0']);
await ipOk(['-n', host.name, 'link', 'set', 'ox0', 'up']);
await ipOk(['-n', outside, 'link', 'set', 'lo', 'up']);
await ipOk(['-n', outside, 'addr', 'add', `${FAR}/32`, 'dev', 'lo']);
await ipOk(['-n', outside, 'addr', 'add', '198.18.0.2/24', 'dev', 'eth0']);
await ipOk(['-n', outside, 'link', 'set', 'eth0', 'up']);
await ipOk(['-n', host.name, 'route', 'add', '198.19.0.0/24', 'via', '198.18.0.2']);

const netId = async (net: string) => (await host.dockerOk(['network', 'inspect', '-f', '{{.Id}}', net])).slice(0, 12);
const macOf = async (dev: string) => (await host.exec(['cat', `/sys/class/net/${dev}/address`])).stdout.trim();

t.test('20 fresh containers each reach an outside address on the first try, ARP answered by the gateway', async (t) => {
  await host.dockerOk(['network', 'create', '-d', 'ovsnet', '--ipam-driver', 'ovsnet', '--subnet', '10.44.1.0/24', 'out1']);
  const gwMac = await macOf(`ovg${await netId('out1')}`);
  t.match(gwMac, /^[0-9a-f:]{17}$/);
  const failures: string[] = [];
  const wrongNeighbour: string[] = [];
  for (let i = 0; i < 20; i++) {
    const r = await host.docker([
      'run',
      '--rm',
      '--network',
      'out1',
      IMAGE,
      'sh',
      '-c',
      `ping -c 1 -W 3 ${FAR}; echo "rc=$?"; ip neigh show 10.44.1.1`,
    ]);
    if (!/rc=0/.test(r.stdout)) failures.push(`container ${i}: ${r.stdout}${r.stderr}`);
    const neighbour = /lladdr (\S+)/.exec(r.stdout)?.[1];
    if (neighbour !== gwMac) wrongNeighbour.push(`container ${i}: ${neighbour ?? 'none'}`);
  }
  t.same(failures, [], 'every first ping answered through the masquerade');
  t.same(wrongNeighbour, [], "every container's neighbour entry for its gateway is the gateway port's MAC");
});

t.test(
  'bridge-driver options: enable_ip_masquerade=false, host_binding_ipv4; one ovsnet does not honour refused with its alternative',
  async (t) => {
    // A second address of the host on the outside's link: published ports must not answer there.
    await ipOk(['-n', host.name, 'addr', 'add', '198.18.0.3/24', 'dev', 'ox0']);
    const opt = (o: string) => ['-o', `com.docker.network.bridge.${o}`];
    const create = 'network create -d ovsnet --ipam-driver ovsnet --subnet 10.44.7.0/24'.split(' ');
    await host.dockerOk([
      ...create,
      ...opt('enable_ip_masquerade=false'),
      ...opt('host_binding_ipv4=198.18.0.1'),
      ...opt('enable_icc=true'),
      'nomasq',
    ]);
    // The outside has no route back to 10.44.7.0/24: unmasqueraded, the reply never comes.
    const out = await host.docker(['run', '--rm', '--network', 'nomasq', IMAGE, 'ping', '-c', '1', '-W', '2', FAR]);
    t.not(out.code, 0, 'no masquerade: the outside cannot answer the container');
    await ipOk(['-n', outside, 'route', 'add', '10.44.7.0/24', 'via', '198.18.0.1']);
    const routed = await host.docker(['run', '--rm', '--network', 'nomasq', IMAGE, 'ping', '-c', '1', '-W', '2', FAR]);
    t.equal(routed.code, 0, "routed back by the outside: answered, from the container's own address");
    await host.dockerOk([
      'run',
      '-d',
      '--name',
      'bound',
      '--network',
      'nomasq',
      '-p',
      '8087:80',
      IMAGE,
      'sh',
      '-c',
      'while true; do printf "HTTP/1.0 200 OK\\r\\n\\r\\nbound" | nc -l -p 80; done',
    ]);
    const get = async (addr: string, tries: number) => {
      for (let i = 0; i < tries; i++) {
        const r = await run('ip', ['netns', 'exec', outside, 'busybox', 'nc', '-w', '2', addr, '8087'], { input: '', timeoutMs: 10_000 });
        if (r.stdout.includes('bound')) return true;
        await new Promise((r) => setTimeout(r, 200));
      }
      return false;
    };
    t.ok(await get('198.18.0.1', 50), 'the published port answers on host_binding_ipv4');
    t.notOk(await get('198.18.0.3', 3), "and not on the host's other address");
    await ipOk(['-n', outside, 'route', 'del', '10.44.7.0/24', 'via', '198.18.0.1']);
    // enable_icc=false is honoured (everyday.test.ts, icc-datapath.test.ts); an option ovsnet has
    // no use for is refused, with what it has instead, and leaves no network.
    const named = await host.docker([
      ...['network', 'create', '-d', 'ovsnet', '--subnet', '10.44.8.0/24'],
      ...['-o', 'com.docker.network.bridge.name=br-x', 'named'],
    ]);
    t.not(named.code, 0);
    t.match(named.stderr, /com\.docker\.network\.bridge\.name=br-x is a bridge-driver option ovsnet does not honour: .*OVSNET_BRIDGE/);
    t.not((await host.docker(['network', 'inspect', 'named'])).code, 0, 'no network left');
    await host.dockerOk(['rm', '-f', 'bound']);
    await host.dockerOk(['network', 'rm', 'nomasq']);
  },
);

t.test("the host end of a running container's veth answers no ARP and has no IPv6 address", async (t) => {
  await host.dockerOk(['run', '-d', '--name', 'stay', '--network', 'out1', IMAGE, 'sleep', '600']);
  const ep = await host.dockerOk(['inspect', '-f', '{{(index .NetworkSettings.Networks "out1").EndpointID}}', 'stay']);
  const hostEnd = `ovh${ep.slice(0, 12)}`;
  const vethMac = await macOf(hostEnd);
  const arping = await host.docker(['exec', 'stay', 'busybox', 'arping', '-c', '2', '-w', '3', '-I', 'eth0', '10.44.1.1']);
  t.notMatch(arping.stdout, vethMac, "no ARP reply from the veth's host end");
  t.match(arping.stdout, /Received [12] response/, 'the gateway answers');
  t.equal((await host.exec(['ip', '-o', '-6', 'addr', 'show', 'dev', hostEnd])).stdout.trim(), '', 'no IPv6 address');
  t.match((await host.exec(['ip', '-o', 'link', 'show', hostEnd])).stdout, /NOARP/);
});

t.test("Docker's default IPAM on ovsnet: its own pool and gateway, IPv6 with --subnet fd00:55::/64", async (t) => {
  await host.dockerOk(['network', 'create', '-d', 'ovsnet', 'dflt']);
  const subnet = await host.dockerOk(['network', 'inspect', '-f', '{{(index .IPAM.Config 0).Subnet}}', 'dflt']);
  t.match(subnet, /^(172\.(1[6-9]|2\d|3[01])|192\.168)\./, "a pool of Docker's default IPAM");
  const r = await host.docker(['run', '--rm', '--network', 'dflt', IMAGE, 'ping', '-c', '1', '-W', '3', FAR]);
  t.equal(r.code, 0, `reaches outside: ${r.stdout}${r.stderr}`);
  await host.dockerOk(['network', 'create', '-d', 'ovsnet', '--ipv6', '--subnet', '10.44.2.0/24', '--subnet', 'fd00:55::/64', 'six']);
  const addr6 = await host.dockerOk(['run', '--rm', '--network', 'six', IMAGE, 'ip', '-o', '-6', 'addr', 'show', 'dev', 'eth0']);
  t.match(addr6, /inet6 fd00:55::/);
});

t.test('subnets the driver refuses from any IPAM, each with the rule and what would do', async (t) => {
  const refused = async (args: string[], message: RegExp, what: string) => {
    const r = await host.docker(['network', 'create', '-d', 'ovsnet', ...args]);
    t.not(r.code, 0, what);
    t.match(r.stderr, message, what);
    t.not((await host.docker(['network', 'inspect', args.at(-1) ?? ''])).code, 0, `${what}: no network left`);
  };
  await refused(
    ['--subnet', '198.18.0.0/25', 'near'],
    /subnet 198\.18\.0\.0\/25 overlaps the host's (connected route 198\.18\.0\.0\/24|address 198\.18\.0\.1) on ox0: .*-o ovsnet\.allow-connected=true/,
    "Docker's IPAM, a subnet on the host's own segment",
  );
  await refused(['--subnet', '169.254.0.0/16', 'll'], /169\.254\.0\.0\/16, link-local .*which cannot number containers/, 'link-local');
  await refused(
    ['--ipam-driver', 'ovsnet', '--subnet', '127.0.0.0/8', 'lo8'],
    /Pool 127\.0\.0\.0\/8 overlaps 127\.0\.0\.0\/8, loopback .*use a private range such as 10\.0\.0\.0\/8/,
    "ovsnet's IPAM, loopback",
  );
  await refused(
    ['--ipam-driver', 'ovsnet', '--subnet', '198.18.0.0/24', 'near2'],
    /Pool 198\.18\.0\.0\/24 overlaps the host's .* on ox0: .*choose a free subnet such as 10\.192\.\d+\.0\/24, or share the segment on purpose with --ipam-opt ovsnet\.allow-connected=true/,
    "ovsnet's IPAM, the host's own segment",
  );
  await host.dockerOk(['network', 'create', '-d', 'ovsnet', '--subnet', '198.18.0.128/25', '-o', 'ovsnet.allow-connected=true', 'shared']);
  t.pass('-o ovsnet.allow-connected=true shares the segment on purpose');
});

// Egress and ingress rules. The outside serves TCP on 198.19.0.10 (8080 the allowed port, 9090
// another) and on 198.19.0.11 (another address), and DNS on 198.19.0.53, the resolver the host's
// resolv.conf names (a file bind-mounted in the host's own mount namespace, where dockerd and
// ovsnet read it), and on 198.19.0.11.
const RESOLVER = '198.19.0.53';
const OTHER = '198.19.0.11';
const tagOf = async (net: string) => Number((await host.exec(['ovs-vsctl', 'get', 'port', `ovg${await netId(net)}`, 'tag'])).stdout.trim());
/** The network's egress flows as ovs-ofctl dumps them (its cookie: the feature and its tag). */
const flowsOf = async (net: string) => {
  const cookie = `0x${((FEATURE.egress << 48n) | BigInt(await tagOf(net))).toString(16)}`;
  return (await host.exec(['ovs-ofctl', 'dump-flows', 'ovsnet0', `cookie=${cookie}/-1`])).stdout;
};
/** What a TCP connection from container `c` to addr:port got back ('' when it failed). */
const tcpFrom = async (c: string, addr: string, port: number) =>
  (await host.docker(['exec', c, 'nc', '-w', '3', addr, String(port)])).stdout.trim();
const ipOf = async (c: string, net: string) =>
  host.dockerOk(['inspect', '-f', `{{(index .NetworkSettings.Networks "${net}").IPAddress}}`, c]);
/** A container answering `c<port>` on each of `ports`. */
const serving = async (name: string, net: string, ports: number[], extra: string[] = []) => {
  const loops = ports.map((p) => `(while true; do echo ${name}${p} | nc -l -p ${p}; done) &`).join(' ');
  await host.dockerOk(['run', '-d', '--name', name, '--network', net, ...extra, IMAGE, 'sh', '-c', `${loops} wait`]);
};
const scrape = async () => (await host.exec(['wget', '-q', '-O', '-', '-T', '3', 'http://127.0.0.1:9477/metrics'])).stdout;
const lookup = async (c: string, server?: string) =>
  (
    await host.docker([
      'exec',
      c,
      'busybox',
      'timeout',
      '6',
      'busybox',
      'nslookup',
      '-type=a',
      'egress.test',
      ...(server === undefined ? [] : [server]),
    ])
  ).stdout;

/** The outside's servers and the host's resolv.conf, made once for the tests below. */
let ready: Promise<{ lines: string[] }> | undefined;
const outsideReady = () =>
  (ready ??= (async () => {
    const conf = path.join(host.dir, 'resolv.conf');
    fs.writeFileSync(conf, `nameserver ${RESOLVER}\n`);
    await host.exec(['mount', '--bind', conf, '/etc/resolv.conf']);
    for (const a of [OTHER, RESOLVER]) await ipOk(['-n', outside, 'addr', 'add', `${a}/32`, 'dev', 'lo']);
    const servers = await startOutside(outside, [
      `tcp,${FAR},8080,allowed`,
      `tcp,${FAR},9090,otherport`,
      `tcp,${OTHER},8080,otheraddr`,
      `dns,${RESOLVER}`,
      `dns,${OTHER}`,
    ]);
    stops.push(servers.stop);
    return servers;
  })());
/** Containers and networks a test made, removed whether it passed or not. */
const cleanup = async (containers: string[], networks: string[]) => {
  await host.docker(['rm', '-f', ...containers]);
  for (const n of networks) await host.docker(['network', 'rm', n]);
};

t.test(
  'egress rules: to the allowed destination only, replies and DNS to the host resolver pass; a network without them passes all',
  async (t) => {
    const servers = await outsideReady();
    t.teardown(() => cleanup(['e1', 'f1'], ['egr', 'free']));
    const create = 'network create -d ovsnet --ipam-driver ovsnet --subnet'.split(' ');
    await host.dockerOk([...create, '10.44.10.0/24', '-o', `ovsnet.egress=${FAR}/32:8080/tcp`, 'egr']);
    await host.dockerOk([...create, '10.44.11.0/24', 'free']);
    await serving('e1', 'egr', [7000]);
    await host.dockerOk(['run', '-d', '--name', 'f1', '--network', 'free', IMAGE, 'sleep', '600']);
    await scrape(); // the counters count from their first read

    t.equal(await tcpFrom('e1', FAR, 8080), 'allowed', 'the allowed destination and port: connected, its reply passed');
    t.equal(await tcpFrom('e1', FAR, 9090), '', 'another port of it: no connection');
    t.equal(await tcpFrom('e1', OTHER, 8080), '', 'another address: no connection');
    t.not((await host.docker(['exec', 'e1', 'ping', '-c', '1', '-W', '2', FAR])).code, 0, 'nor ICMP (the rule names one TCP port)');
    t.match(
      await lookup('e1'),
      new RegExp(`Address:? .*${DNS_ANSWER.replace(/\./g, '\\.')}`),
      "names resolve: Docker's resolver reaches the host's resolver",
    );
    t.match(servers.lines.join('\n'), new RegExp(`dns ${RESOLVER.replace(/\./g, '\\.')} egress\\.test`), 'through the outside resolver');
    t.notMatch(await lookup('e1', OTHER), new RegExp(DNS_ANSWER.replace(/\./g, '\\.')), 'DNS to another server: refused');
    t.notOk(
      servers.lines.some((l) => l.startsWith(`dns ${OTHER}`)),
      'it never saw the query',
    );
    t.match(
      await flowsOf('egr'),
      new RegExp(`udp,reg8=0x[0-9a-f]+,nw_dst=${RESOLVER.replace(/\./g, '\\.')},tp_dst=53`),
      "the resolver as read from the host's resolv.conf",
    );
    const drops = /table=64, n_packets=(\d+),[^\n]*priority=1,/.exec(await flowsOf('egr'));
    t.ok(Number(drops?.[1] ?? 0) > 0, `the policy drop flow counts what it dropped under the network's cookie: ${drops?.[1] ?? 'none'}`);
    const counted = new RegExp(`ovsnet_policy_drops_total\\{network="${await netId('egr')}"\\} (\\d+)`).exec(await scrape());
    t.ok(Number(counted?.[1] ?? 0) > 0, `and in the metrics, per network: ovsnet_policy_drops_total ${counted?.[1] ?? 'absent'}`);
    const trace = async (dest: string) => {
      const r = await host.exec([
        'env',
        'OVSNET_STORE=sqlite:/run/ovsnet/state.db',
        process.execPath,
        MAIN,
        'trace',
        'e1',
        dest,
        '-o',
        'json',
      ]);
      return (JSON.parse(r.stdout) as { verdict: string }).verdict;
    };
    t.match(await trace(`${OTHER}:8080/tcp`), /^dropped: not among -o ovsnet\.egress/, 'ovsnet trace says why a destination is refused');
    t.notMatch(await trace(`${FAR}:8080/tcp`), /^dropped/, 'and lets the allowed one through');
    const hostService = await startOutside(host.name, ['tcp,0.0.0.0,2222,hostservice']);
    stops.push(hostService.stop);
    t.equal(
      await tcpFrom('e1', '10.44.10.1', 2222),
      '',
      "the host is outside too: a service of the host's on the gateway address, not allowed",
    );
    t.equal(await tcpFrom('f1', '10.44.11.1', 2222), 'hostservice', 'reached from a network without rules');
    hostService.stop();
    const fromHost = await host.exec(['busybox', 'nc', '-w', '3', await ipOf('e1', 'egr'), '7000']);
    t.equal(
      fromHost.stdout.trim(),
      'e17000',
      'without ingress rules the host still reaches the container, whose replies pass the egress rules',
    );

    t.equal(await tcpFrom('f1', FAR, 9090), 'otherport', 'a network without egress rules: every destination, as before');
    t.equal(await tcpFrom('f1', OTHER, 8080), 'otheraddr');
    t.equal((await host.docker(['exec', 'f1', 'ping', '-c', '1', '-W', '2', FAR])).code, 0);
    t.notMatch(await flowsOf('free'), /cookie=/, 'and no egress flow at all');

    await host.vswitchd('restart');
    let back = '';
    for (let i = 0; i < 40 && back === ''; i++) back = await tcpFrom('e1', FAR, 8080);
    t.equal(back, 'allowed', 'ovs-vswitchd restarted (it keeps no flow): the rules are back, with the way out as it is now');
    t.equal(await tcpFrom('e1', OTHER, 8080), '', 'and still hold');
    const doc = await host.exec(['env', 'OVSNET_STORE=sqlite:/run/ovsnet/state.db', process.execPath, MAIN, 'doctor', '--json']);
    t.match(
      (JSON.parse(doc.stdout) as { check: string; ok: boolean; detail: string }[]).find((c) => c.check === 'openflow'),
      { ok: true, detail: /holds exactly ovsnet's flows/ },
      'ovs-ofctl reads the flows back as ovsnet wrote them: the periodic sync changes nothing',
    );
    await host.dockerOk(['rm', '-f', 'e1', 'f1']);
    t.notMatch(await flowsOf('egr'), /cookie=/, 'its last container gone: no flow left');
  },
);

t.test('ingress rules: a routed client reaches a container port only from an allowed source; published ports from anywhere', async (t) => {
  await ipOk(['-n', outside, 'addr', 'add', '198.18.0.4/24', 'dev', 'eth0']);
  await ipOk(['-n', outside, 'route', 'add', '10.44.12.0/24', 'via', '198.18.0.1']);
  await ipOk(['-n', outside, 'route', 'add', '10.44.13.0/24', 'via', '198.18.0.1']);
  await outsideReady();
  t.teardown(() => cleanup(['srv', 'p1'], ['ing', 'plain']));
  const create = 'network create -d ovsnet --ipam-driver ovsnet --subnet'.split(' ');
  await host.dockerOk([...create, '10.44.12.0/24', '-o', 'ovsnet.ingress=198.18.0.2/32:8080/tcp', 'ing']);
  await host.dockerOk([...create, '10.44.13.0/24', 'plain']);
  await serving('srv', 'ing', [80, 8080, 7070], ['-p', '8089:80']);
  await serving('p1', 'plain', [8080]);
  const srv = await ipOf('srv', 'ing');
  let first = '';
  for (let i = 0; i < 30 && first === ''; i++) first = await connectFrom(outside, srv, 8080, '198.18.0.2');
  t.equal(first, 'srv8080', "from the allowed source to the allowed port: in (the host's firewall lets it through too)");
  t.equal(await connectFrom(outside, srv, 8080, '198.18.0.4'), '', 'from another source: no connection');
  t.equal(await connectFrom(outside, srv, 7070, '198.18.0.2'), '', 'to another port: no connection');
  t.equal(await connectFrom(outside, '198.18.0.1', 8089, '198.18.0.4'), 'srv80', 'a published port: from anywhere');
  t.equal(
    (await host.exec(['busybox', 'nc', '-w', '3', srv, '8080'])).stdout.trim(),
    '',
    'the host itself (its gateway address) is not allowed',
  );
  t.equal(
    (await host.exec(['busybox', 'nc', '-w', '3', '198.18.0.1', '8089'])).stdout.trim(),
    'srv80',
    'but it reaches the published port through its own relay',
  );
  t.equal(await tcpFrom('srv', OTHER, 8080), 'otheraddr', 'egress unruled: the container reaches the outside');
  t.equal((await host.docker(['exec', 'srv', 'ping', '-c', '1', '-W', '2', FAR])).code, 0, 'its replies pass the ingress rules');
  const p1 = await ipOf('p1', 'plain');
  t.equal(await connectFrom(outside, p1, 8080, '198.18.0.2'), '', 'a network without ingress rules: nothing routed gets in, as before');
  t.equal((await host.exec(['busybox', 'nc', '-w', '3', p1, '8080'])).stdout.trim(), 'p18080', 'and the host does');
  await cleanup(['srv', 'p1'], ['ing', 'plain']);
  const left = (await host.exec(['iptables-save'])).stdout.split('\n').filter((l) => l.includes('198.18.0.2/32'));
  t.same(left, [], "the network's firewall rules for its sources went with it");
  await ipOk(['-n', outside, 'route', 'del', '10.44.12.0/24']);
  await ipOk(['-n', outside, 'route', 'del', '10.44.13.0/24']);
});

t.test("egress on an endpoint group: its way out is ruled, its peers through the gateway are the groups' to rule", async (t) => {
  await outsideReady();
  t.teardown(() => cleanup(['g1', 'pp'], ['gw1', 'gp']));
  const create = 'network create -d ovsnet --ipam-driver ovsnet --subnet 10.44.14.0/24'.split(' ');
  await host.dockerOk([...create, '-o', 'ovsnet.network=gp', '-o', 'ovsnet.allow=gw1', 'gp']);
  await host.dockerOk([
    ...create,
    '--ipam-opt',
    'ovsnet.group=gw1',
    '-o',
    'ovsnet.network=gp',
    '-o',
    'ovsnet.group=gw1',
    '-o',
    `ovsnet.egress=${FAR}/32:8080/tcp`,
    'gw1',
  ]);
  await serving('pp', 'gp', [7000]);
  await host.dockerOk(['run', '-d', '--name', 'g1', '--network', 'gw1', IMAGE, 'sleep', '600']);
  t.equal(await tcpFrom('g1', FAR, 8080), 'allowed', "the group's allowed destination");
  t.equal(await tcpFrom('g1', OTHER, 8080), '', 'another: no connection');
  t.equal(await tcpFrom('g1', await ipOf('pp', 'gp'), 7000), 'pp7000', 'its parent, which allows it, through the gateway: not outside');
  t.equal(await tcpFrom('pp', OTHER, 8080), 'otheraddr', 'the parent has no egress rules: every destination');
});

t.test('egress with enable_icc=false: both hold, the rules above the isolation', async (t) => {
  await outsideReady();
  t.teardown(() => cleanup(['i1', 'i2'], ['iso']));
  const opts = ['-o', 'com.docker.network.bridge.enable_icc=false', '-o', `ovsnet.egress=${FAR}/32:8080/tcp`];
  await host.dockerOk(['network', 'create', '-d', 'ovsnet', '--ipam-driver', 'ovsnet', '--subnet', '10.44.16.0/24', ...opts, 'iso']);
  await serving('i2', 'iso', [7000]);
  await host.dockerOk(['run', '-d', '--name', 'i1', '--network', 'iso', IMAGE, 'sleep', '600']);
  t.equal(await tcpFrom('i1', FAR, 8080), 'allowed', 'the allowed destination');
  t.equal(await tcpFrom('i1', OTHER, 8080), '', 'another: no connection');
  t.equal(await tcpFrom('i1', await ipOf('i2', 'iso'), 7000), '', 'nor the other container (enable_icc=false)');
});

t.test('malformed, huge and injected values: refused naming the option and its form, no network, record or flow', async (t) => {
  const store = new SqliteStore({ file: host.storeFile });
  t.teardown(() => store.close());
  const records = async () => (await store.list(keys.networks)).kvs.length;
  const before = await records();
  const bad = [
    '10.0.0.0/8,actions=drop',
    '10.0.0.0/8\nactions=drop',
    '10.0.0.0/8;cookie=0',
    '10.0.0.0/8, 10.1.0.0/16',
    '10.0.0.0/8:0/tcp',
    '10.0.0.0/8:70000/tcp',
    '10.0.0.0/8:80/sctp',
    'x'.repeat(10_000),
    Array.from({ length: 10_000 }, () => '1.2.3.4/32').join(','),
  ];
  for (const key of ['ovsnet.egress', 'ovsnet.ingress']) {
    for (const [i, value] of bad.entries()) {
      const name = `bad${i}`;
      const r = await host.docker([
        'network',
        'create',
        '-d',
        'ovsnet',
        '--ipam-driver',
        'ovsnet',
        '--subnet',
        '10.44.15.0/24',
        '-o',
        `${key}=${value}`,
        name,
      ]);
      t.not(r.code, 0, `${key} #${i} refused`);
      t.match(
        r.stderr,
        new RegExp(`-o ${key.replace('.', '\\.')}=.*expected -o ${key.replace('.', '\\.')}=CIDR\\[:PORT/tcp\\|udp\\]\\[,\\.\\.\\.\\]`),
        `${key} #${i}: names the option and the form`,
      );
      t.not((await host.docker(['network', 'inspect', name])).code, 0, `${key} #${i}: no network`);
    }
  }
  const v6 = await host.docker([
    'network',
    'create',
    '-d',
    'ovsnet',
    '--ipam-driver',
    'ovsnet',
    '--subnet',
    '10.44.15.0/24',
    '-o',
    'ovsnet.egress=fd00::/8',
    'v6only',
  ]);
  t.match(v6.stderr, /fd00::\/8 is IPv6 and the network has no IPv6 subnet/, 'an IPv6 rule on an IPv4 network: refused, saying why');
  t.equal(await records(), before, 'no record in the store');
  const flows = (
    await host.exec(['ovs-ofctl', 'dump-flows', 'ovsnet0', `cookie=0x${(FEATURE.egress << 48n).toString(16)}/0xffff000000000000`])
  ).stdout;
  t.notMatch(flows, /cookie=/, 'no egress flow on the bridge');
});

t.test('everything removed', async (t) => {
  const all = (await host.dockerOk(['ps', '-aq'])).split('\n').filter((x) => x !== '');
  if (all.length > 0) await host.dockerOk(['rm', '-f', ...all]);
  await host.dockerOk(['network', 'rm', 'out1', 'dflt', 'six', 'shared']);
  t.equal((await host.exec(['ovs-vsctl', 'list-ports', 'ovsnet0'])).stdout.trim(), '', 'no port on the bridge');
});
