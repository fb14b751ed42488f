/**
 * Endpoint groups through Docker, by their effect: a parent network named with
 * -o ovsnet.network and two groups sharing its subnet and pool, each on a tag of its own. One
 * pool hands out every address once; a group's containers reach each other and the gateway;
 * between groups (and the parent) new connections pass only where the receiving group allows the
 * sender (all of it, or one port); frames sent to another group's MAC directly do not arrive
 * (separate at layer 2); after ovs-vswitchd restarts, the rules come back; everything goes with
 * the networks. The OpenFlow rules alone are test/e2e/groups-datapath.test.ts's. Last, on the same
 * host, an infra network (item 4) beside its gateway: the one across hosts is uplink.test.ts's.
 */
import t from 'tap';
import { DockerHost, IMAGE, MAIN, type Ovsnet } from '../harness/host.js';
import { until } from './cluster-setup.js';

// IPv6 as the ipv6.test.ts host has it: the parent and its groups are dual-stack.
const host = await DockerHost.up('groups', { dockerdArgs: '--experimental --ip6tables' });
const ovsnet: Ovsnet = await host.startOvsnet();
t.teardown(async () => {
  await host.down();
  await ovsnet.kill('SIGTERM');
});

const SUBNET = '10.71.0.0/24';
const SUBNET6 = 'fd71::/64';
const V6 = ['--ipv6', '--subnet', SUBNET6];
const create = (name: string, ...args: string[]) =>
  host.docker(['network', 'create', '-d', 'ovsnet', '--ipam-driver', 'ovsnet', '--subnet', SUBNET, ...args, name]);
/** Group `name` of parent `parent`, on `subnet` (the parent's unless said). */
const group = (name: string, extra: string[] = [], parent = 'app', subnet = SUBNET) =>
  host.docker([
    ...['network', 'create', '-d', 'ovsnet', '--ipam-driver', 'ovsnet', '--subnet', subnet, '--ipam-opt', `ovsnet.group=${name}`],
    ...['-o', `ovsnet.network=${parent}`, '-o', `ovsnet.group=${name}`, ...extra, name],
  ]);
const run = (name: string, network: string, ...cmd: string[]) =>
  host.dockerOk([
    'run',
    '-d',
    '--name',
    name,
    '--cap-add',
    'NET_ADMIN',
    '--network',
    network,
    IMAGE,
    ...(cmd.length > 0 ? cmd : ['sleep', '600']),
  ]);
const ip = async (c: string, net: string, field = 'IPAddress') =>
  (await host.dockerOk(['inspect', '-f', `{{(index .NetworkSettings.Networks "${net}").${field}}}`, c])).trim();
const ping = async (from: string, to: string) =>
  (await host.docker(['exec', from, 'ping', ...(to.includes(':') ? ['-6'] : []), '-c', '1', '-W', '1', to])).code === 0;
/** A TCP connection from `from` to `to`:`port` answered by the listener there (nc -l in the container). */
const tcp = async (from: string, to: string, port: number) =>
  (await host.docker(['exec', from, 'sh', '-c', `echo hi | nc -w 2 ${to} ${port}`])).stdout.includes('pong');
const listen = (c: string, port: number) =>
  host.dockerOk(['exec', '-d', c, 'sh', '-c', `while true; do echo pong | nc -l -p ${port}; done`]);

/** The host's /metrics, 1.1 s after the last scrape (ovsnet reads the bridge at most once a second). */
const scrape = async () => {
  await new Promise((r) => setTimeout(r, 1100));
  return (await host.exec(['wget', '-q', '-O', '-', '-T', '5', 'http://127.0.0.1:9477/metrics'])).stdout;
};
/** A series' value (NaN when absent); `labels` as the text has them (IDs and names: no regex character). */
const valueIn = (text: string, name: string, labels: string) =>
  Number(new RegExp(`^${name}\\{${labels}\\} (\\d+)$`, 'm').exec(text)?.[1] ?? NaN);
/** `ovsnet endpoints -o wide`'s last five columns (sent and received packets and bytes, policy drops) for an endpoint. */
const wideCounters = async (endpoint: string) => {
  const r = await host.exec(['env', 'OVSNET_STORE=sqlite:/run/ovsnet/state.db', process.execPath, MAIN, 'endpoints', '-o', 'wide']);
  const header = r.stdout.split('\n')[0] ?? '';
  const row = r.stdout.split('\n').find((l) => l.startsWith(endpoint)) ?? '';
  const [sentPkts, sentBytes, receivedPkts, receivedBytes, drops] = row.trim().split(/\s+/).slice(-5).map(Number);
  return { out: r.stdout, header, row, stderr: r.stderr, sentPkts, sentBytes, receivedPkts, receivedBytes, drops };
};
const endpointOf = async (c: string, net: string) => (await ip(c, net, 'EndpointID')).slice(0, 12);
const networkOf = async (net: string) => (await host.dockerOk(['network', 'inspect', '-f', '{{.Id}}', net])).slice(0, 12);

let addr: Record<string, string> = {};
const addr6: Record<string, string> = {};

t.test('a parent and two groups: one pool, own tags, refusals that say what to give', async (t) => {
  t.equal((await create('app', ...V6, '-o', 'ovsnet.network=app')).code, 0);
  const plain = await create('nogroup');
  t.match(
    plain.stderr,
    /overlaps pool 10\.71\.0\.0\/24 .*--ipam-opt ovsnet\.group=NAME/,
    'a repeat without the group option is an overlap, with the hint',
  );
  t.equal((await group('web', V6)).code, 0, 'group web (dual-stack, as its parent)');
  t.equal((await group('db', [...V6, '-o', 'ovsnet.allow=web:5432/tcp'])).code, 0, 'group db lets web in on 5432/tcp');
  const dup = await group('web');
  t.match(dup.stderr, /web.*(already|exists)/, 'a second group web is refused');
  const other = await group('x', [], 'app', '10.72.0.0/24');
  t.match(other.stderr, /this host has no ovsnet pool 10\.72\.0\.0\/24; create the parent first/, 'another subnet is refused');
  const orphan = await group('y', [], 'nope');
  t.match(orphan.stderr, /ovsnet\.network=nope: no network on this host has that name; create the parent first/);
  for (const [c, net] of [
    ['w1', 'web'],
    ['w2', 'web'],
    ['d1', 'db'],
    ['p1', 'app'],
  ] as const) {
    await run(c, net);
    addr = { ...addr, [c]: await ip(c, net) };
    addr6[c] = await ip(c, net, 'GlobalIPv6Address');
  }
  t.equal(new Set(Object.values(addr)).size, 4, `four distinct addresses from the one pool: ${Object.values(addr).join(' ')}`);
  const pools = JSON.parse(
    await host.exec(['env', 'OVSNET_STORE=sqlite:/run/ovsnet/state.db', process.execPath, MAIN, 'ipam', '--json']).then((r) => r.stdout),
  ) as {
    pool: string;
    used: number;
  }[];
  t.match(
    pools.filter((p) => p.pool === SUBNET),
    [{ used: 5 }],
    'one pool counting the four and the gateway',
  );
  const cli = (...args: string[]) =>
    host.exec(['env', 'OVSNET_STORE=sqlite:/run/ovsnet/state.db', process.execPath, MAIN, 'networks', ...args]);
  const shown = JSON.parse((await cli('-o', 'json')).stdout) as { groupsName?: string; groups?: { name: string; endpoints: number }[] }[];
  t.match(
    shown.find((n) => n.groupsName === 'app')?.groups,
    [
      { name: 'db', endpoints: 1 },
      { name: 'web', endpoints: 2 },
    ],
    'ovsnet networks: the groups under their parent, with their endpoint counts',
  );
  t.match((await cli()).stdout, /\n└ [0-9a-f]{12} +db\b/, 'and in the table, indented under it');
});

t.test('within a group, to the gateway, and between groups only what is allowed', async (t) => {
  await listen('d1', 5432);
  await listen('d1', 80);
  await listen('w1', 80);
  await listen('p1', 80);
  t.ok(await ping('w1', addr.w2 ?? ''), 'w1 -> w2: same group');
  t.ok(await ping('w1', '10.71.0.1'), 'w1 -> the gateway');
  t.ok(await ping('d1', '10.71.0.1'), 'd1 -> the gateway');
  t.ok(await tcp('w1', addr.d1 ?? '', 5432), 'w1 -> d1:5432/tcp: db allows web on it');
  t.notOk(await tcp('w1', addr.d1 ?? '', 80), 'w1 -> d1:80/tcp: not allowed');
  t.notOk(await ping('w1', addr.d1 ?? ''), 'w1 -> d1 ping: not allowed');
  t.notOk(await tcp('d1', addr.w1 ?? '', 80), 'd1 -> w1:80: web allows nobody');
  t.notOk(await tcp('p1', addr.w1 ?? '', 80), 'p1 (the parent) -> w1: not allowed either');
  t.notOk(await tcp('w1', addr.p1 ?? '', 80), 'w1 -> p1: the parent allows nobody');
});

t.test(
  "counters: N pings move the endpoints' packets by N (metrics and ovsnet endpoints -o wide), M refused ones the policy drops by M",
  async (t) => {
    const N = 10;
    const M = 5;
    const [w1, w2, app] = [await endpointOf('w1', 'web'), await endpointOf('w2', 'web'), await networkOf('app')];
    const web = await networkOf('web');
    const series = (text: string, name: string, ep: string) =>
      valueIn(text, `ovsnet_endpoint_${name}_total`, `network="${web}",endpoint="${ep}"`);
    const before = await scrape();
    const cliBefore = await wideCounters(w1);
    t.match(
      cliBefore.header,
      /SENT PKTS +SENT BYTES +RECEIVED PKTS +RECEIVED BYTES +POLICY DROPS$/,
      "ovsnet endpoints -o wide: the counters' columns",
    );
    t.notMatch(cliBefore.stderr, /cannot read the endpoints' counters/, 'read from the bridge');
    t.ok(series(before, 'sent_packets', w1) >= 0, `w1's series is there: ${series(before, 'sent_packets', w1)}`);
    const pinged = await host.docker(['exec', 'w1', 'ping', '-c', String(N), '-i', '0.2', '-W', '1', addr.w2 ?? '']);
    t.match(pinged.stdout, new RegExp(`${N} packets received`), `${N} pings w1 -> w2 answered`);
    const after = await scrape();
    for (const [ep, name] of [
      [w1, 'sent_packets'],
      [w1, 'received_packets'],
      [w2, 'sent_packets'],
      [w2, 'received_packets'],
    ] as const) {
      const moved = series(after, name, ep) - series(before, name, ep);
      t.ok(moved >= N, `${ep === w1 ? 'w1' : 'w2'} ${name}: moved by ${moved} (>= ${N})`);
    }
    t.ok(series(after, 'sent_bytes', w1) - series(before, 'sent_bytes', w1) >= N * 84, "and its bytes: at least the pings' IP packets");
    const cliAfter = await wideCounters(w1);
    t.comment(`ovsnet endpoints -o wide:\n${cliAfter.out}`);
    t.comment(
      after
        .split('\n')
        .filter((l) => /^ovsnet_(endpoint_\w+|policy_drops)_total\{/.test(l))
        .join('\n'),
    );
    t.ok((cliAfter.sentPkts ?? 0) - (cliBefore.sentPkts ?? 0) >= N, `ovsnet endpoints -o wide, w1: ${cliBefore.row} -> ${cliAfter.row}`);
    t.ok((cliAfter.receivedPkts ?? 0) - (cliBefore.receivedPkts ?? 0) >= N, 'received too');
    t.ok((cliAfter.receivedBytes ?? 0) > (cliBefore.receivedBytes ?? 0), 'and bytes');
    const json = JSON.parse(
      (await host.exec(['env', 'OVSNET_STORE=sqlite:/run/ovsnet/state.db', process.execPath, MAIN, 'endpoints', '--json'])).stdout,
    ) as { endpoint: string; counters?: { sentPackets: number } }[];
    t.ok((json.find((e) => e.endpoint === w1)?.counters?.sentPackets ?? 0) >= N, '--json has them too');
    // Refused: w1 (web) -> d1 (db allows web on 5432/tcp only): each echo request is dropped on its way to d1.
    const drops = (text: string) => valueIn(text, 'ovsnet_policy_drops_total', `network="${app}"`);
    const refused = await host.docker(['exec', 'w1', 'ping', '-c', String(M), '-i', '0.2', '-W', '1', addr.d1 ?? '']);
    t.match(refused.stdout, / 0 packets received/, `${M} pings w1 -> d1 refused`);
    const dropped = await scrape();
    const moved = drops(dropped) - drops(after);
    t.ok(moved >= M, `ovsnet_policy_drops_total of the parent app moved by ${moved} (>= ${M})`);
    t.equal(
      series(dropped, 'policy_drops', w1),
      series(after, 'policy_drops', w1),
      "w1's own: unmoved (the groups' drops match the parent's registers, not w1's port: the network's only)",
    );
  },
);

t.test('IPv6 as IPv4: within a group, to the gateway, and between groups only what is allowed', async (t) => {
  // Between groups the gateway routes: ovsnet turned IPv6 forwarding on with the first IPv6 network.
  t.equal((await host.exec(['sysctl', '-n', 'net.ipv6.conf.all.forwarding'])).stdout.trim(), '1', "the host's IPv6 forwarding, on");
  t.match(addr6.w1, /^fd71::/, `w1 has an IPv6 address of the parent's subnet: ${addr6.w1 ?? 'none'}`);
  t.ok(await ping('w1', addr6.w2 ?? ''), 'w1 -> w2 ping -6: same group');
  t.ok(await ping('w1', 'fd71::1'), 'w1 -> the gateway');
  t.ok(await tcp('w1', addr6.d1 ?? '', 5432), 'w1 -> d1:5432/tcp: db allows web on it');
  t.notOk(await tcp('w1', addr6.d1 ?? '', 80), 'w1 -> d1:80/tcp: not allowed');
  t.notOk(await ping('w1', addr6.d1 ?? ''), 'w1 -> d1 ping -6: not allowed');
  t.notOk(await tcp('d1', addr6.w1 ?? '', 80), 'd1 -> w1:80: web allows nobody');
  t.notOk(await tcp('p1', addr6.w1 ?? '', 80), 'p1 (the parent) -> w1: not allowed either');
  const lladdr = async (c: string, a: string) =>
    /lladdr (\S+)/.exec(await host.dockerOk(['exec', c, 'ip', '-6', 'neigh', 'show', a]))?.[1] ?? 'none';
  const d1Mac = (await host.dockerOk(['exec', 'd1', 'cat', '/sys/class/net/eth0/address'])).trim();
  const viaGw = await lladdr('w1', addr6.d1 ?? '');
  t.equal(viaGw, await lladdr('w1', 'fd71::1'), "w1 resolved d1's IPv6 address to the gateway's MAC (proxy ND)");
  t.not(viaGw, d1Mac, "not d1's own");
});

t.test('separate at layer 2: frames to another group member’s MAC do not arrive', async (t) => {
  const mac = async (c: string) => (await host.dockerOk(['exec', c, 'cat', '/sys/class/net/eth0/address'])).trim();
  // w2 sends straight to the member's MAC (a static neighbour entry), past the gateway's proxy ARP.
  await host.dockerOk(['exec', 'w2', 'busybox', 'arp', '-s', addr.w1 ?? '', await mac('w1')]);
  t.ok(await tcp('w2', addr.w1 ?? '', 80), 'to a member of its own group: arrives (the method works)');
  await host.dockerOk(['exec', 'w2', 'busybox', 'arp', '-s', addr.d1 ?? '', await mac('d1')]);
  t.notOk(await tcp('w2', addr.d1 ?? '', 5432), "to d1's MAC directly, even on the port db allows web: not delivered");
});

t.test("ovsnet trace: the datapath's verdict with the rule that made it, and it follows the bridge", async (t) => {
  interface Trace {
    passes: { from: string; outcome: { kind: string; ports: string[] }; steps: { meaning: string }[] }[];
    verdict: string;
  }
  const trace = async (...args: string[]): Promise<Trace> => {
    const r = await host.exec(['env', 'OVSNET_STORE=sqlite:/run/ovsnet/state.db', process.execPath, MAIN, 'trace', ...args, '-o', 'json']);
    if (r.code !== 0) throw new Error(`ovsnet trace ${args.join(' ')}: ${r.stderr}`);
    return JSON.parse(r.stdout) as Trace;
  };
  const port = async (c: string) => {
    const id = (await host.dockerOk(['inspect', '-f', '{{(index .NetworkSettings.Networks "db").EndpointID}}', c])).trim();
    return `endpoint ${id.slice(0, 12)}`;
  };
  const allowed = await trace('w1', 'd1:5432/tcp');
  t.equal(allowed.passes.length, 2, 'two passes: to the gateway, and routed back from it');
  t.match(
    allowed.verdict,
    /^allowed: db allows web on 5432\/tcp \(-o ovsnet\.allow on network db; endpoint groups of network app\); delivered to port ovh\S+ \(endpoint [0-9a-f]{12}\)$/,
  );
  t.ok(allowed.verdict.includes(await port('d1')), `delivered to d1's port: ${allowed.verdict}`);
  // As an operator sees it (docs/operators-guide.md shows this output).
  const shown = await host.exec(['env', 'OVSNET_STORE=sqlite:/run/ovsnet/state.db', process.execPath, MAIN, 'trace', 'w1', 'd1:80/tcp']);
  t.comment(`$ ovsnet trace w1 d1:80/tcp\n${shown.stdout}`);
  t.match(shown.stdout, /\nverdict +dropped: db does not allow web \(-o ovsnet\.allow on network db/, 'w1 -> d1:80/tcp: dropped, and why');
  const icmp = await trace('w1', 'd1');
  t.match(icmp.verdict, /^dropped: .*ovsnet\.allow/, `ping w1 -> d1: ${icmp.verdict}`);
  const same = await trace('w1', addr.w2 ?? '');
  t.match(same.verdict, /delivered to port ovh/, `w1 -> w2 (one group): ${same.verdict}`);
  t.match(await trace('w1', '198.51.100.7:443/tcp').then((r) => r.verdict), /leaves through the gateway ovg\S+ to the host \(masqueraded/);
  // The verdict is the bridge's: a flow added by hand (no cookie: ovsnet leaves it alone) that
  // drops 5432/tcp ahead of db's allow, and trace says so; taken out, allowed again.
  const foreign = 'table=42,priority=60000,tcp,tp_dst=5432';
  await host.exec(['ovs-ofctl', '-O', 'OpenFlow13', 'add-flow', 'ovsnet0', `${foreign},actions=drop`]);
  const handDropped = (await trace('w1', 'd1:5432/tcp')).verdict;
  t.match(handDropped, /^dropped by a flow without a cookie: not ovsnet's/, `with a drop added by hand: ${handDropped}`);
  await host.exec(['ovs-ofctl', '-O', 'OpenFlow13', '--strict', 'del-flows', 'ovsnet0', foreign]);
  t.match((await trace('w1', 'd1:5432/tcp')).verdict, /^allowed: /, 'taken out: allowed again');
  const bad = await host.exec([
    'env',
    'OVSNET_STORE=sqlite:/run/ovsnet/state.db',
    process.execPath,
    MAIN,
    'trace',
    'w1',
    'd1:5432,actions=drop',
  ]);
  t.equal(bad.code, 2, 'a DEST with OpenFlow syntax: a usage error');
  t.match(bad.stderr, /expected DEST\[:PORT\]/);
  const ghost = await host.exec(['env', 'OVSNET_STORE=sqlite:/run/ovsnet/state.db', process.execPath, MAIN, 'trace', 'nobody', 'd1']);
  t.match(ghost.stderr, /knows no container "nobody"/);
});

t.test('ovs-vswitchd restarted: the rules come back, and with them what they allow and deny', async (t) => {
  const [w1, web, app] = [await endpointOf('w1', 'web'), await networkOf('web'), await networkOf('app')];
  const sent = (text: string) => valueIn(text, 'ovsnet_endpoint_sent_packets_total', `network="${web}",endpoint="${w1}"`);
  const drops = (text: string) => valueIn(text, 'ovsnet_policy_drops_total', `network="${app}"`);
  const before = await scrape();
  await host.vswitchd('restart');
  const back = await until(() => tcp('w1', addr.d1 ?? '', 5432), 30_000);
  t.ok(back < 30_000, `w1 -> d1:5432 again ${back} ms after the restart (checked every 10 s)`);
  t.notOk(await ping('w1', addr.d1 ?? ''), 'and w1 -> d1 ping still dropped');
  t.ok(await ping('w1', addr.w2 ?? ''), 'w1 -> w2 still');
  // OVS counts the re-added drop flows from 0: the metrics go on from where they were.
  const flowsNow = await host.exec([
    'ovs-ofctl',
    '-O',
    'OpenFlow13',
    'dump-flows',
    'ovsnet0',
    'table=42,cookie=0x0f60000000000000/0xffff000000000000',
  ]);
  const after = await scrape();
  t.ok(sent(after) >= sent(before), `w1's sent packets never went down: ${sent(before)} -> ${sent(after)}`);
  t.ok(drops(after) > drops(before), `the parent's policy drops went on up: ${drops(before)} -> ${drops(after)}`);
  const raw = Math.max(0, ...[...flowsNow.stdout.matchAll(/n_packets=(\d+).* actions=drop/g)].map((m) => Number(m[1])));
  t.ok(drops(after) >= drops(before) + raw, `over OVS's own count since the restart (${raw}): nothing lost to the reset`);
});

t.test('a container leaving and coming: its rules follow; everything goes with the networks', async (t) => {
  await host.dockerOk(['rm', '-f', 'd1']);
  await run('d2', 'db');
  const d2 = await ip('d2', 'db');
  await listen('d2', 5432);
  t.ok(await tcp('w1', d2, 5432), 'a new db container is reachable on 5432 from web');
  t.notOk(await ping('w1', d2), 'and not by ping');
  await host.dockerOk(['rm', '-f', 'w1', 'w2', 'd2', 'p1']);
  for (const n of ['web', 'db', 'app']) await host.dockerOk(['network', 'rm', n]);
  const flows = await host.exec(['ovs-ofctl', '-O', 'OpenFlow13', 'dump-flows', 'ovsnet0', 'cookie=0x0f60000000000000/0xffff000000000000']);
  t.notMatch(flows.stdout, /cookie=/, 'no group rule left');
  const pools = await host.exec(['env', 'OVSNET_STORE=sqlite:/run/ovsnet/state.db', process.execPath, MAIN, 'ipam', '--json']);
  t.notMatch(pools.stdout, /10\.71\.0\.0/, 'the pool went with the last network');
});

t.test(
  'an infra network on one host, beside its gateway: the host holds a second address of the pool, its services are reached there; gone with the network',
  async (t) => {
    const made = await create('inf', '-o', 'ovsnet.infra=true');
    t.equal(made.code, 0, made.stderr);
    const port = `ovi${(await host.dockerOk(['network', 'inspect', '-f', '{{.Id}}', 'inf'])).slice(0, 12)}`;
    const address = /inet ([\d.]+)\//.exec((await host.exec(['ip', '-4', 'addr', 'show', 'dev', port])).stdout)?.[1] ?? '';
    t.match(address, /^10\.71\.0\.\d+$/, `the host's infra port ${port} holds ${address}`);
    t.not(address, '10.71.0.1', "an address of its own, not the gateway's");
    await run('c1', 'inf');
    t.not(await ip('c1', 'inf'), address, "the container's address is another");
    // A service of the host itself (in its namespace), reached from the container at the infra address.
    await host.exec(['sh', '-c', '(echo served-by-host | timeout 20 busybox nc -l -p 7100) >/dev/null 2>&1 &']);
    await new Promise((r) => setTimeout(r, 300));
    const got = await host.docker(['exec', 'c1', 'sh', '-c', `nc -w 3 ${address} 7100 </dev/null`]);
    t.equal(got.stdout.trim(), 'served-by-host', "the container reaches the host's service on the infra address");
    await host.dockerOk(['rm', '-f', 'c1']);
    await host.dockerOk(['network', 'rm', 'inf']);
    t.not((await host.exec(['ip', 'link', 'show', port])).code, 0, 'the infra port went with the network');
    const pools = await host.exec(['env', 'OVSNET_STORE=sqlite:/run/ovsnet/state.db', process.execPath, MAIN, 'ipam', '--json']);
    t.notMatch(pools.stdout, /10\.71\.0\.0/, 'and its address with the pool');
  },
);
