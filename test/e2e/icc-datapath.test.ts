/**
 * enable_icc=false's flows (src/driver/network/icc-flows.ts) and its iptables rule
 * (src/driver/ports/nat-rules.ts) by their effect, on a bridge of the test's own
 * (test/harness/ns-switch.ts: namespaces as containers on access ports of one tag, the gateway an
 * internal port with forwarding on). With the flows, members reach the gateway (IPv4, IPv6, its
 * link-local address) and the gateway them, and nothing of a member's reaches another: no ping
 * or TCP either way, no ARP or ND answered, ARP requests seen by no other member, a frame sent to
 * another member's MAC directly dropped (and counted under the network's cookie), a route
 * through the gateway refused by the host, a member's QoS applied on its way to the gateway;
 * removing them gives the segment back.
 */
import { spawn } from 'node:child_process';
import t from 'tap';
import { only } from '../../src/driver/ovs/cookies.js';
import { FlowSync } from '../../src/driver/ovs/flow-sync.js';
import { iccCookie, iccFlows, type IccPlan } from '../../src/driver/network/icc-flows.js';
import { Nat } from '../../src/driver/ports/nat.js';
import { QosFlows, meterId } from '../../src/driver/ovs/qos-flows.js';
import { flavour } from '../../src/driver/ports/iptables-flavour.js';
import { stdinText } from '../../src/lib/exec.js';
import { must, run } from '../harness/host.js';
import { connects, nsSwitch, type Member } from '../harness/ns-switch.js';

const TAG = 20;
const GW = '10.60.0.1';
const GW6 = 'fd60::1';
const sw = await nsSwitch(t, 'icc', { tag: TAG, address: GW, address6: GW6 });
const m1 = await sw.member('m1', TAG, '10.60.0.11', 'fd60::11');
const m2 = await sw.member('m2', TAG, '10.60.0.12', 'fd60::12');
const m3 = await sw.member('m3', TAG, '10.60.0.13', 'fd60::13');
const members = [m1, m2, m3];
const gwPort = (await sw.ofports()).get('gw0') ?? NaN;
const gwMac = await sw.macOf(sw.ns, 'gw0');
const sync = new FlowSync(sw.openflow);
const scope = only(iccCookie(TAG));
const plan: IccPlan = {
  tag: TAG,
  gateway: { ofport: gwPort, mac: gwMac, addresses: [GW], addresses6: [GW6] },
  members: members.map((m) => ({ ofport: m.ofport, mac: m.mac, address: m.address, address6: m.address6 })),
};
const nat = new Nat(async (cmd, args, input) => {
  const r = await run('ip', ['netns', 'exec', sw.ns, cmd, ...args], input === undefined ? {} : { input: stdinText(input) });
  return { ...r, code: r.code ?? -1 };
}, flavour(''));

/**
 * Whether `from` gets an answer to a ping of `to` (neighbour caches flushed first: each check
 * starts from ARP or ND). Three pings, one answer enough (busybox's exit code): a loaded machine
 * can take longer than a second over ND and the first upcalls, and a dropped path answers none
 * of the three, so the negative checks only grow stricter.
 */
async function pings(from: { ns: string }, to: string, flush = true): Promise<boolean> {
  if (flush) for (const ns of [...members.map((m) => m.ns), sw.ns]) await run('ip', ['-n', ns, 'neigh', 'flush', 'all']);
  const six = to.includes(':') ? ['-6'] : [];
  return (await run('ip', ['netns', 'exec', from.ns, 'busybox', 'ping', ...six, '-c', '3', '-i', '0.3', '-W', '1', to])).code === 0;
}

/** What tcpdump on `on`'s eth0 saw (`filter`) while `act` ran. */
async function seen(on: Member, filter: string, act: () => Promise<unknown>): Promise<string> {
  const dump = spawn('ip', ['netns', 'exec', on.ns, 'tcpdump', '-l', '-n', '-e', '-i', 'eth0', filter], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  dump.stdout.on('data', (d: Buffer) => (out += d.toString()));
  await new Promise<void>((resolve) => dump.stderr.once('data', () => resolve())); // "listening on eth0"
  try {
    await act();
    await new Promise((r) => setTimeout(r, 300));
  } finally {
    dump.kill('SIGTERM');
    await new Promise((r) => dump.once('close', r));
  }
  return out;
}

/** The packets the network's drop flow for `m`'s port counted. */
async function dropped(m: Member): Promise<number> {
  const out = (
    await sw.inSw(['ovs-ofctl', '-O', 'OpenFlow13', 'dump-flows', 'br0', `cookie=0x${iccCookie(TAG).toString(16)}/-1,in_port=${m.ofport}`])
  ).stdout;
  const line = out.split('\n').find((l) => l.includes('priority=450'));
  return Number(/n_packets=(\d+)/.exec(line ?? '')?.[1] ?? NaN);
}

t.test('without the flows, one segment: members reach each other', async (t) => {
  t.ok(await pings(m1, m2.address), 'm1 -> m2');
  t.ok(await pings(m1, GW), 'm1 -> gateway');
});

t.test('enable_icc=false: each member reaches the gateway and the gateway each member; nothing between members', async (t) => {
  await sync.sync('br0', scope, { flows: iccFlows(plan) });
  t.equal((await sync.diff('br0', scope, { flows: iccFlows(plan) })).flows.lines.length, 0, 'the bridge holds them as written');
  for (const m of members) {
    t.ok(await pings(m, GW), `${m.ns} -> gateway`);
    t.ok(await pings(m, GW6), `${m.ns} -> gateway (IPv6)`);
  }
  t.ok(await pings(sw, m2.address), 'gateway -> m2');
  t.ok(await pings(sw, m2.address6), 'gateway -> m2 (IPv6)');
  t.ok(await connects(sw, m1, m1.address, 8080), 'the host opens TCP to m1 (published ports take this way)');
  t.ok(await connects(m1, sw, GW, 8081), 'm1 opens TCP to the host');
  const ll = /inet6 (fe80::[0-9a-f:]+)\//.exec((await sw.inSw(['ip', '-6', 'addr', 'show', 'dev', 'gw0', 'scope', 'link'])).stdout)?.[1];
  t.ok(ll !== undefined && (await pings(m1, `${ll}%eth0`)), `m1 -> the gateway's link-local address ${ll ?? 'none'}`);

  t.notOk(await pings(m1, m2.address), 'm1 -> m2 dropped');
  t.notOk(await pings(m2, m1.address), 'm2 -> m1 dropped');
  t.notOk(await pings(m1, m2.address6), 'm1 -> m2 (IPv6) dropped');
  t.notOk(await connects(m1, m2, m2.address, 8080), 'm1 -> m2 TCP dropped');
  t.notOk(await connects(m2, m3, `${m3.address6}`, 8080), 'm2 -> m3 TCP over IPv6 dropped');
  t.notMatch((await must('ip', ['-n', m1.ns, 'neigh', 'show', m2.address])).stdout, m2.mac, "m1 never learnt m2's MAC (ARP unanswered)");
  t.notMatch((await must('ip', ['-n', m1.ns, 'neigh', 'show', m2.address6])).stdout, m2.mac, 'nor over ND');
});

t.test("a member's ARP request for another member reaches no member; one for the gateway reaches the gateway only", async (t) => {
  const arping = (target: string) => run('ip', ['netns', 'exec', m1.ns, 'busybox', 'arping', '-c', '2', '-w', '2', '-I', 'eth0', target]);
  const toMember = await seen(m2, `arp and host ${m1.address}`, () => arping(m3.address));
  t.equal(toMember.trim(), '', `m2 saw nothing of m1's ARP for m3: ${toMember}`);
  t.notOk((await arping(m3.address)).code === 0, 'and m3 never answered');
  const toGateway = await seen(m2, `arp and host ${m1.address}`, () => arping(GW));
  t.equal(toGateway.trim(), '', `nor of m1's ARP for the gateway: ${toGateway}`);
  t.equal((await arping(GW)).code, 0, 'which the gateway answered');
  const gatewayAsks = await seen(m2, `arp and host ${GW}`, () => pings(sw, m3.address));
  t.notMatch(gatewayAsks, /who-has/, `the gateway's ARP for m3 went to m3 only: ${gatewayAsks}`);
});

t.test("a frame sent to another member's MAC directly is dropped, and counted under the network's cookie", async (t) => {
  await must('ip', ['-n', m1.ns, 'neigh', 'replace', m2.address, 'lladdr', m2.mac, 'dev', 'eth0', 'nud', 'permanent']);
  const before = await dropped(m1);
  const got = await seen(m2, `icmp and host ${m1.address}`, () => pings(m1, m2.address, false));
  t.equal(got.trim(), '', `m2 saw none of it: ${got}`);
  t.ok((await dropped(m1)) > before, `m1's drop flow counted it (${before} -> ${await dropped(m1)})`);
  await must('ip', ['-n', m1.ns, 'neigh', 'del', m2.address, 'dev', 'eth0']);
});

t.test('routed through the gateway: forwarded by the host with enable_icc=true rules, dropped with false', async (t) => {
  await must('ip', ['-n', m1.ns, 'route', 'add', `${m2.address}/32`, 'via', GW]);
  t.teardown(() => run('ip', ['-n', m1.ns, 'route', 'del', `${m2.address}/32`]));
  const requests = () => seen(m2, `icmp[icmptype] = icmp-echo and src host ${m1.address}`, () => pings(m1, m2.address));
  await nat.addNetwork('i'.repeat(64), '10.60.0.0/24', 'gw0', true, true);
  t.match(await requests(), /echo request/, 'enable_icc=true: m1 reaches m2 through the gateway (control; the flows drop its answer)');
  await nat.removeNetwork('i'.repeat(64), '10.60.0.0/24', 'gw0');
  await nat.addNetwork('i'.repeat(64), '10.60.0.0/24', 'gw0', true, false);
  const got = await requests();
  t.equal(got.trim(), '', `enable_icc=false: the host drops it, m2 sees nothing: ${got}`);
  t.ok(await pings(m1, GW), 'the gateway itself still answers');
  await nat.removeNetwork('i'.repeat(64), '10.60.0.0/24', 'gw0');
});

t.test("a member's QoS holds for what it sends the gateway: its meter and DSCP mark", async (t) => {
  const qos = { rateKbps: 10_000, burstKbit: 5000, dscp: 46 };
  const qosFlows = new QosFlows(sw.openflow);
  await qosFlows.apply('br0', m1.ofport, qos);
  const withQos = { ...plan, members: plan.members.map((m) => (m.ofport === m1.ofport ? { ...m, qos } : m)) };
  await sync.sync('br0', scope, { flows: iccFlows(withQos) });
  const rule = ['INPUT', '-s', m1.address, '-m', 'dscp', '--dscp', '46'];
  await sw.inSw(['iptables', '-w', '-A', ...rule]);
  t.ok(await pings(m1, GW), 'm1 -> gateway, through the meter');
  t.notOk(await pings(m1, m2.address), 'm1 -> m2 still dropped');
  const line = (await sw.inSw(['iptables', '-w', '-L', 'INPUT', '-v', '-x', '-n'])).stdout
    .split('\n')
    .find((l) => l.includes('DSCP match 0x2e'));
  t.ok(Number(line?.trim().split(/\s+/)[0]) >= 1, `the gateway saw m1's packets marked DSCP 46: ${line ?? 'no rule'}`);
  const meters = (await sw.inSw(['ovs-ofctl', '-O', 'OpenFlow13', 'meter-stats', 'br0', `meter=${meterId(m1.ofport)}`])).stdout;
  t.match(meters, /packet_in_count:[1-9]/, 'the meter counted them');
  await sw.inSw(['iptables', '-w', '-D', ...rule]);
  await sync.sync('br0', scope, { flows: iccFlows(plan) });
  await qosFlows.remove('br0', m1.ofport);
});

t.test('removed: the segment is whole again, no flow of the network left', async (t) => {
  await sync.sync('br0', scope, { flows: [] });
  const left = (await sw.inSw(['ovs-ofctl', '-O', 'OpenFlow13', 'dump-flows', 'br0', `cookie=0x${iccCookie(TAG).toString(16)}/-1`])).stdout;
  t.notMatch(left, /priority=/, 'none left');
  t.ok(await pings(m1, m2.address), 'm1 -> m2');
});
