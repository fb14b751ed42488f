/**
 * Endpoint groups' OpenFlow rules (src/driver/ovs/group-flows.ts) by their effect, on a bridge
 * of the test's own (test/harness/ns-switch.ts: own ovsdb-server and ovs-vswitchd in a namespace
 * of the test's, userspace datapath): namespaces on access ports of a parent's
 * tag and two groups' tags, one subnet, the gateway an internal port on the parent's tag with
 * forwarding on. Same-group members talk directly; cross-group ping and TCP are dropped; an
 * allow lets the allowed group's new connections (to one port only, when it names one) in and
 * nothing else; removal leaves no flow of the parent's.
 */
import t from 'tap';
import type { GroupAllow } from '../../src/driver/model/group-options.js';
import { scopeArg } from '../../src/driver/ovs/cookies.js';
import { GroupFlows, groupScope } from '../../src/driver/ovs/groups/group-flows.js';
import { QosFlows, meterId } from '../../src/driver/ovs/qos-flows.js';
import { must, run } from '../harness/host.js';
import { connects as connectsTo, nsSwitch } from '../harness/ns-switch.js';

const PARENT = 10;
const A = 11;
const B = 12;
const GW = '10.50.0.1';
const GW6 = 'fd50::1';

const sw = await nsSwitch(t, 'grp', { tag: PARENT, address: GW, address6: GW6 });
// The gateway routes between groups; the flows drop its redirects, the host sends none either.
await sw.inSw(['sysctl', '-qw', 'net.ipv4.conf.all.send_redirects=0', 'net.ipv4.conf.gw0.send_redirects=0']);
const inSw = (args: readonly string[]) => sw.inSw(args);
/** A member of `group`, its group in the plan's terms. */
const member = async (name: string, group: number, address: string, address6: string) => ({
  ...(await sw.member(name, group, address, address6)),
  group,
});

const a1 = await member('a1', A, '10.50.0.11', 'fd50::11');
const a2 = await member('a2', A, '10.50.0.12', 'fd50::12');
const b1 = await member('b1', B, '10.50.0.21', 'fd50::21');
const p1 = await member('p1', PARENT, '10.50.0.31', 'fd50::31');
const gateway = { ofport: (await sw.ofports()).get('gw0') ?? NaN, mac: await sw.macOf(sw.ns, 'gw0'), address: GW, address6: GW6 };
const flows = new GroupFlows(sw.openflow);
const qosFlows = new QosFlows(sw.openflow);
/** How many flows of the parent's (its cookie scope) the bridge holds. */
const parentFlows = async () =>
  (await inSw(['ovs-ofctl', '-O', 'OpenFlow13', 'dump-flows', 'br0', scopeArg(groupScope(PARENT))])).stdout
    .split('\n')
    .filter((l) => l.includes('cookie=')).length;
const plan = (allows: GroupAllow[]) => ({
  parentTag: PARENT,
  gateway,
  subnet: '10.50.0.0/24',
  subnet6: 'fd50::/64',
  groups: [PARENT, A, B],
  members: [a1, a2, b1, p1],
  allows,
});

/** Whether `from` gets an answer to a ping of `to` (neighbour caches flushed first: each check starts from ARP or ND). */
async function pings(from: { ns: string }, to: string): Promise<boolean> {
  for (const m of [a1, a2, b1, p1]) await run('ip', ['-n', m.ns, 'neigh', 'flush', 'all']);
  const six = to.includes(':') ? ['-6'] : [];
  return (await run('ip', ['netns', 'exec', from.ns, 'busybox', 'ping', ...six, '-c', '1', '-W', '1', to])).code === 0;
}

/** Whether a TCP connection from `from` to `to`:`port` (its IPv6 address with `six`) gets the listener's greeting. */
function connects(
  from: { ns: string },
  to: { ns: string; address: string; address6?: string },
  port: number,
  six = false,
): Promise<boolean> {
  return connectsTo(from, to, (six ? to.address6 : to.address) ?? '', port);
}

t.test('without flows the tags alone cut every group off the gateway', async (t) => {
  t.ok(await pings(a1, a2.address), 'same group: switched on its tag');
  t.notOk(await pings(a1, GW), 'a group member cannot reach the gateway on the parent tag');
});

t.test('groups: same-group traffic switched, cross-group dropped, the gateway reachable', async (t) => {
  await flows.apply('br0', plan([]));
  t.ok(await pings(a1, a2.address), 'a1 -> a2 (same group)');
  t.ok(await connects(a2, a1, 8080), 'a2 -> a1 TCP (same group)');
  t.ok(await pings(a1, GW), 'a1 -> gateway');
  t.ok(await pings(b1, GW), 'b1 -> gateway');
  t.ok(await pings(p1, GW), 'p1 (the parent) -> gateway');
  t.notOk(await pings(a1, b1.address), 'a1 -> b1 dropped');
  t.notOk(await pings(b1, a1.address), 'b1 -> a1 dropped');
  t.notOk(await pings(p1, a1.address), 'parent -> group A dropped');
  t.notOk(await pings(a1, p1.address), 'group A -> parent dropped');
  t.notOk(await connects(a1, b1, 8080), 'a1 -> b1 TCP dropped');
  const arp = (await must('ip', ['-n', a1.ns, 'neigh', 'show', b1.address])).stdout;
  t.match(arp, gateway.mac, "a1 resolved b1's address to the gateway's MAC (proxy ARP)");
});

t.test('allow: B lets A in; B to A stays dropped', async (t) => {
  await flows.apply('br0', plan([{ to: B, from: A }]));
  t.ok(await pings(a1, b1.address), 'a1 -> b1 allowed');
  t.ok(await connects(a2, b1, 8080), 'a2 -> b1 TCP allowed');
  t.notOk(await pings(b1, a1.address), 'b1 -> a1 still dropped');
  t.notOk(await connects(b1, a1, 8080), 'b1 -> a1 TCP still dropped');
  t.notOk(await pings(p1, b1.address), 'the parent -> b1 still dropped');
});

t.test('allow with :PORT/tcp: that port only', async (t) => {
  await flows.apply('br0', plan([{ to: B, from: A, port: { number: 8080, proto: 'tcp' } }]));
  t.ok(await connects(a1, b1, 8080), 'a1 -> b1:8080 allowed');
  t.notOk(await connects(a1, b1, 8081), 'a1 -> b1:8081 dropped');
  t.notOk(await pings(a1, b1.address), 'a1 -> b1 ping dropped');
  t.ok(await pings(a1, a2.address), 'same group unaffected');
});

t.test('IPv6 as IPv4: ND answered as ARP is, same group switched, cross group only what is allowed', async (t) => {
  await flows.apply('br0', plan([{ to: B, from: A, port: { number: 8080, proto: 'tcp' } }]));
  t.ok(await pings(a1, a2.address6), 'a1 -> a2 (same group)');
  t.match((await must('ip', ['-n', a1.ns, 'neigh', 'show', a2.address6])).stdout, a2.mac, "a1 resolved a2's address to a2's MAC");
  t.ok(await connects(a2, a1, 8080, true), 'a2 -> a1 TCP (same group)');
  t.ok(await pings(a1, GW6), 'a1 -> gateway');
  t.ok(await pings(p1, GW6), 'p1 (the parent) -> gateway');
  t.ok(await connects(a1, b1, 8080, true), 'a1 -> b1:8080 allowed');
  t.notOk(await connects(a1, b1, 8081, true), 'a1 -> b1:8081 dropped');
  t.notOk(await pings(a1, b1.address6), 'a1 -> b1 ping dropped');
  const nd = (await must('ip', ['-n', a1.ns, 'neigh', 'show', b1.address6])).stdout;
  t.match(nd, gateway.mac, "a1 resolved b1's address to the gateway's MAC (proxy ND)");
  t.notOk(await connects(b1, a1, 8080, true), 'b1 -> a1 TCP dropped');
  t.notOk(await pings(p1, a1.address6), 'parent -> group A dropped');
  // Duplicate address detection (source ::) passes with the proxy in place: a new address of the subnet stays.
  await must('ip', ['-n', b1.ns, 'addr', 'add', 'fd50::99/64', 'dev', 'eth0']);
  await new Promise((r) => setTimeout(r, 2500));
  const dad = (await must('ip', ['-n', b1.ns, '-6', 'addr', 'show', 'dev', 'eth0'])).stdout;
  t.match(dad, /inet6 fd50::99\/64 scope global \n/, `fd50::99 passed DAD: ${dad.split('\n').find((l) => l.includes('::99')) ?? 'none'}`);
});

t.test("a member's QoS holds for what goes through the gateway: its meter and DSCP mark", async (t) => {
  const qos = { rateKbps: 10_000, burstKbit: 5000, dscp: 46 };
  await qosFlows.apply('br0', a1.ofport, qos);
  await flows.apply('br0', { ...plan([{ to: B, from: A }]), members: [{ ...a1, qos }, a2, b1, p1] });
  const ipt = (args: string[]) => must('ip', ['netns', 'exec', b1.ns, 'iptables', '-w', ...args]);
  await ipt(['-A', 'INPUT', '-s', a1.address, '-m', 'dscp', '--dscp', '46']);
  t.ok(await pings(a1, b1.address), 'a1 -> b1 allowed, through the meter');
  const line = (await ipt(['-L', 'INPUT', '-v', '-x', '-n'])).stdout.split('\n').find((l) => l.includes('DSCP match 0x2e'));
  t.ok(Number(line?.trim().split(/\s+/)[0]) >= 1, `b1 saw a1's packets marked DSCP 46: ${line ?? 'no rule'}`);
  const meters = (await inSw(['ovs-ofctl', '-O', 'OpenFlow13', 'meter-stats', 'br0', `meter=${meterId(a1.ofport)}`])).stdout;
  t.match(meters, /packet_in_count:[1-9]/, 'the meter counted them');
  await qosFlows.remove('br0', a1.ofport);
});

t.test('remove: no flow of the parent is left', async (t) => {
  t.ok((await parentFlows()) > 0);
  await flows.remove('br0', PARENT);
  t.equal(await parentFlows(), 0);
  const rest = (await inSw(['ovs-ofctl', '-O', 'OpenFlow13', 'dump-flows', 'br0'])).stdout.split('\n').filter((l) => l.includes('cookie='));
  t.same(
    rest.map((l) => /priority=(\d+)/.exec(l)?.[1]),
    ['0'],
    'only the NORMAL flow of a fresh bridge remains',
  );
  t.notOk(await pings(a1, b1.address), 'a1 -> b1: different tags, no path');
  await flows.remove('br0', PARENT); // idempotent
});
