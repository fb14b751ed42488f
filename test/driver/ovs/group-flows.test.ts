/**
 * Endpoint groups' flows (pure) and how ovs-ofctl is called; their effect on traffic is
 * test/e2e/groups-datapath.test.ts.
 */
import t from 'tap';
import { inScope } from '../../../src/driver/ovs/cookies.js';
import { GroupFlows, groupCookie, groupFlows, groupScope, type GroupPlan } from '../../../src/driver/ovs/groups/group-flows.js';
import { OpenFlow } from '../../../src/driver/ovs/openflow.js';
import { meterId } from '../../../src/driver/ovs/qos-flows.js';

const plan: GroupPlan = {
  parentTag: 10,
  gateway: { ofport: 1, mac: '02:00:00:00:00:01', address: '10.50.0.1' },
  subnet: '10.50.0.0/24',
  groups: [10, 11, 12],
  members: [
    { ofport: 2, mac: '02:00:00:00:00:02', address: '10.50.0.11', group: 11 },
    { ofport: 4, mac: '02:00:00:00:00:04', address: '10.50.0.21', group: 12 },
  ],
  allows: [
    { to: 12, from: 11 },
    { to: 11, from: 12, port: { number: 443, proto: 'tcp' } },
  ],
};

t.test("every flow carries the parent's cookie; members are matched by port", async (t) => {
  const flows = groupFlows(plan);
  t.ok(flows.every((f) => f.startsWith(`cookie=${groupCookie(10)},`)));
  t.not(groupCookie(10), groupCookie(11));
  t.equal(
    flows.filter((f) => f.includes('in_port=2,')).length,
    3,
    "a member's own frames: ARP requests, ARP to the gateway, IP to the gateway",
  );
  t.equal(flows.filter((f) => f.includes('in_port=1,') && f.includes('output:4')).length, 2, "the gateway's ARP to a member");
  t.ok(
    flows.includes(`cookie=${groupCookie(10)},table=41,priority=20,reg7=10,reg6=11,arp,arp_tpa=10.50.0.11,actions=NORMAL`),
    'same group: switched',
  );
  t.match(
    flows.find((f) => f.includes('arp_tpa=10.50.0.0/24')) ?? '',
    /set_field:02:00:00:00:00:01->arp_sha.*IN_PORT$/,
    'proxy ARP with the gateway MAC',
  );
});

t.test("a member's QoS meters and marks its IPv4 to the gateway, which these flows take ahead of qos-flows.ts's", async (t) => {
  const withQos = { ...plan, members: [{ ...plan.members[0]!, qos: { rateKbps: 1000, burstKbit: 500, dscp: 46 } }] };
  t.match(
    groupFlows(withQos).find((f) => f.includes('in_port=2,ip,')) ?? '',
    new RegExp(`actions=meter:${meterId(2)},set_field:46->ip_dscp,load:11->NXM_NX_REG6`),
  );
  t.match(groupFlows(plan).find((f) => f.includes('in_port=2,ip,')) ?? '', /actions=load:11->NXM_NX_REG6/, 'none without QoS');
});

t.test('allows become new-connection rules of table 42, the port one only for its protocol', async (t) => {
  const t42 = groupFlows(plan).filter((f) => f.includes('table=42') && f.includes('ct_state=+new'));
  t.ok(t42.some((f) => f.includes('reg6=12,ct_mark=11,ip,')));
  t.ok(t42.some((f) => f.includes('reg6=11,ct_mark=12,tcp,tp_dst=443,')));
  t.notOk(
    t42.some((f) => f.includes('reg6=11,ct_mark=12,ip,')),
    'no blanket rule for the port-limited allow',
  );
  t.ok(
    t42.some((f) => f.includes('ct_mark=0,')),
    'outside the groups (host, routed traffic) passes',
  );
  t.match(groupFlows(plan).at(-1) ?? '', /table=42,priority=1,reg7=10,actions=drop$/, 'the rest is dropped');
});

t.test('apply syncs the parent flows in one bundle, remove deletes them by cookie; a failure names the command', async (t) => {
  const calls: { args: string[]; input?: string; file?: string }[] = [];
  let diff = { code: 0, stdout: '', stderr: '' };
  const ok = new GroupFlows(
    new OpenFlow(async (_cmd, args, input) => {
      const i = args.indexOf('diff-flows');
      // diff-flows reads the wanted flows from its stdin, given as a file (/dev/stdin).
      const file = typeof input === 'object' ? input.file : undefined;
      calls.push({ args: [...args], ...(typeof input === 'string' ? { input } : {}), ...(file === undefined ? {} : { file }) });
      return i < 0 ? { code: 0, stdout: '', stderr: '' } : diff;
    }),
  );
  const flows = groupFlows(plan);
  // What ovs-ofctl diff-flows says of a bridge with none of them yet (+: wanted only), and a
  // leftover flow of a member gone (-: on the switch only), and another parent's.
  const diffLine = (f: string) => {
    const cookie = /^cookie=(0x[0-9a-f]+),/.exec(f)?.[1] ?? '';
    const [match = '', actions = ''] = f.slice(`cookie=${cookie},`.length).split(',actions=');
    return `${match} cookie=${cookie} actions=${actions}`;
  };
  const stale = `priority=400,in_port=9,arp,arp_op=1 cookie=${groupCookie(10)} actions=drop`;
  const other = `priority=400,in_port=8,arp,arp_op=1 cookie=${groupCookie(11)} actions=drop`;
  diff = { code: 2, stdout: [...flows.map((f) => `+${diffLine(f)}`), `-${stale}`, `-${other}`].join('\n') + '\n', stderr: '' };
  await ok.apply('br0', plan);
  t.same(
    calls.map((c) => c.args.slice(0, 4)),
    [
      ['-O', 'OpenFlow13', 'diff-flows', 'br0'],
      ['-O', 'OpenFlow14', '--bundle', 'add-flows'],
    ],
    'one diff, then one bundle; no dump-meters (groups have no meters of their own)',
  );
  t.equal(calls[0]?.file, flows.join('\n') + '\n', "the plan's flows are the wanted side");
  t.same(calls[1]?.args.slice(4), ['br0', '-']);
  const lines = (calls[1]?.input ?? '').trim().split('\n');
  t.equal(lines.filter((l) => l.startsWith('add ')).length, flows.length, 'every flow added');
  t.same(
    lines.filter((l) => !l.startsWith('add ')),
    ['delete_strict table=0 priority=400,in_port=9,arp,arp_op=1'],
    "the leftover deleted by its match; another parent's flow untouched",
  );
  calls.length = 0;
  diff = { code: 0, stdout: '', stderr: '' };
  await ok.apply('br0', plan);
  t.same(
    calls.map((c) => c.args[2]),
    ['diff-flows'],
    'then, with the bridge as planned: one read, no write',
  );
  calls.length = 0;
  await ok.remove('br0', 10);
  t.same(
    calls.map((c) => c.args),
    [['-O', 'OpenFlow13', 'del-flows', 'br0', 'cookie=0xf6000000000000a/0xfffffffeffffffff']],
    "remove: one del-flows of the parent's cookie (bit 32, 0.x's generation, either way)",
  );
  t.same(groupScope(10), { value: 0xf6000000000000an, mask: 0xfffffffeffffffffn });
  t.ok(inScope(0xf6000010000000an, groupScope(10)), "a 0.x flow of the parent's second generation is the parent's");
  t.notOk(inScope(BigInt(groupCookie(11)), groupScope(10)), "another parent's is not");
  const failing = new GroupFlows(new OpenFlow(async () => ({ code: 1, stdout: '', stderr: 'br0 is not a bridge' })));
  await t.rejects(failing.remove('br0', 10), { code: 'OVS_FAILED', message: /del-flows br0 .*br0 is not a bridge/ });
  await t.rejects(failing.apply('br0', plan), { code: 'OVS_FAILED', message: /diff-flows br0 .*br0 is not a bridge/ });
});

t.test("the gateway's ICMP redirects stay on the bridge", async (t) => {
  t.match(groupFlows(plan)[0], /priority=401,in_port=1,icmp,icmp_type=5,actions=drop$/);
});

/** The plan on a dual-stack parent: the same members with IPv6 addresses. */
const dual: GroupPlan = {
  ...plan,
  gateway: { ...plan.gateway, address6: 'fd50::1' },
  subnet6: 'fd50::/64',
  members: plan.members.map((m, i) => ({ ...m, address6: `fd50::${i + 11}` })),
};

t.test('an IPv4 parent has no IPv6 flow; a dual-stack one has the IPv4 flows unchanged and IPv6 ones beside them', async (t) => {
  const v4 = groupFlows(plan);
  t.notOk(
    v4.some((f) => /icmp6|ipv6|tcp6/.test(f)),
    'none on IPv4 only',
  );
  const both = groupFlows(dual);
  t.same(
    both.filter((f) => !/icmp6|ipv6|tcp6/.test(f)),
    v4,
  );
  t.equal(both.at(-1), v4.at(-1), 'the drop of table 42 still last');
});

t.test('IPv6: ND answered as ARP is, conntrack mirrors IPv4, redirects dropped', async (t) => {
  const c = `cookie=${groupCookie(10)}`;
  const flows = groupFlows(dual);
  t.ok(flows.includes(`${c},priority=401,in_port=1,icmp6,icmp_type=137,actions=drop`), "the gateway's ICMPv6 redirects dropped");
  t.ok(
    flows.includes(`${c},priority=401,in_port=2,icmp6,icmp_type=135,actions=load:11->NXM_NX_REG6[],load:10->NXM_NX_REG7[],resubmit(,41)`),
    "a member's solicitations go to table 41, above its IPv6 to conntrack",
  );
  t.ok(flows.includes(`${c},table=41,priority=30,reg7=10,icmp6,ipv6_src=::,icmp_type=135,actions=NORMAL`), 'DAD never answered');
  t.ok(
    flows.includes(`${c},table=41,priority=20,reg7=10,reg6=11,icmp6,icmp_type=135,nd_target=fd50::11,actions=NORMAL`),
    'same group: switched',
  );
  t.match(
    flows.find((f) => f.includes('nd_target=fd50::/64')) ?? '',
    /set_field:02:00:00:00:00:01->eth_src,.*move:NXM_NX_ND_TARGET\[\]->NXM_NX_IPV6_SRC\[\],set_field:255->nw_ttl,set_field:2->nd_options_type,set_field:0x60000000->nd_reserved,set_field:136->icmpv6_type,resubmit\(,41\)$/,
    'any other address of the subnet: the solicitation turned into an advertisement',
  );
  t.ok(
    flows.includes(`${c},table=41,priority=10,reg7=10,icmp6,icmp_type=136,actions=set_field:02:00:00:00:00:01->nd_tll,IN_PORT`),
    "then the gateway's MAC as its target link-layer address, back out",
  );
  t.ok(
    flows.includes(`${c},priority=401,in_port=1,icmp6,icmp_type=135,nd_target=fd50::12,actions=output:4`),
    "the gateway's solicitation reaches the member",
  );
  const t42 = flows.filter((f) => f.includes('table=42') && f.includes('ct_state=+new'));
  t.ok(t42.some((f) => f.includes('reg6=12,ct_mark=11,ipv6,')));
  t.ok(t42.some((f) => f.includes('reg6=11,ct_mark=12,tcp6,tp_dst=443,')));
  t.ok(t42.some((f) => f.includes('ct_mark=0,ipv6,')));
  t.ok(
    flows.some((f) => f.includes('table=43') && f.includes('+new+trk,ipv6,') && f.includes('move:NXM_NX_REG6[]->NXM_NX_CT_MARK[]')),
    'the group mark in ct_mark',
  );
});
