/**
 * A network's egress and ingress flows (pure): which flows a plan makes, in which tables and
 * under which cookie; nothing without members; what a hostile record could slip in never reaches
 * a flow. Installed on a real bridge (diff-flows sees no change after) and their effect on
 * traffic: test/e2e/driver-egress.test.ts.
 */
import t from 'tap';
import { inScope, OWN } from '../../../src/driver/ovs/cookies.js';
import {
  EGRESS_TABLE,
  INGRESS_TABLE,
  IN_TABLE,
  OUT_TABLE,
  egressCookie,
  egressFlows,
  egressScope,
  egressZone,
  type EgressPlan,
} from '../../../src/driver/network/egress-flows.js';

const GW = '02:00:00:00:00:01';
const M1 = '02:00:00:00:00:02';
const M2 = '02:00:00:00:00:03';
const plan: EgressPlan = {
  tag: 7,
  ways: [{ ofport: 1, mac: GW, addresses: ['10.50.0.1'] }],
  subnets: ['10.50.0.0/24'],
  peers: false,
  members: [
    { ofport: 2, mac: M1, published: [{ proto: 'tcp', port: 80 }] },
    { ofport: 3, mac: M2, published: [] },
  ],
  egress: [{ cidr: '198.19.0.10/32', port: { number: 8080, proto: 'tcp' } }, { cidr: '203.0.113.0/24' }],
  ingress: [{ cidr: '198.18.0.2/32' }],
  dns: ['10.255.255.53'],
};
const { ingress: _ingress, ...noIngress } = plan;
const { egress: _egress, ...noEgress } = plan;
const inTable = (flows: string[], table: number) => flows.filter((f) => f.includes(`,table=${table},priority=`));
const tableZero = (flows: string[]) => flows.filter((f) => !/^cookie=[^,]+,table=/.test(f));

t.test("every flow under the network's cookie, in ovsnet's space; its own zone", async (t) => {
  const flows = egressFlows(plan);
  const cookie = `cookie=0x${egressCookie(7).toString(16)},`;
  t.ok(flows.every((f) => f.startsWith(cookie)));
  t.ok(inScope(egressCookie(7), OWN) && inScope(egressCookie(7), egressScope(7)) && !inScope(egressCookie(8), egressScope(7)));
  t.equal(egressZone(7), 0x3007, 'apart from groups (the tag), VIPs (0x1000, 0x2000 + the tag)');
  t.equal(new Set(flows).size, flows.length, 'no flow twice');
  t.equal(new Set(flows.map((f) => f.replace(/,actions=.*/, ''))).size, flows.length, 'no match twice');
  for (const p of [plan, noIngress, noEgress]) {
    t.notOk(
      egressFlows(p).some((f) => f.includes('ct(') && !/,(ip|ipv6|tcp6?|udp6?|sctp6?),/.test(f.replace(/actions=.*/, ''))),
      'ct() only where the match names IPv4 or IPv6, as OpenFlow wants (else OFPBAC_MATCH_INCONSISTENT)',
    );
  }
});

t.test(
  "table 0: a member's IP to the gateway MAC, and the gateway's unicast, into the zone; above groups and enable_icc=false (450-453), below VIPs",
  async (t) => {
    const zero = tableZero(egressFlows(plan));
    t.equal(zero.length, 6, '2 members x 2 families out, 2 families in');
    t.ok(zero.every((f) => f.includes('priority=460,reg8=0,')));
    t.ok(
      zero.includes(
        `cookie=0xf63000000000007,priority=460,reg8=0,in_port=2,dl_dst=${GW},ip,actions=set_field:0x7->reg8,ct(zone=12295,table=62)`,
      ),
    );
    t.ok(zero.some((f) => f.includes(`in_port=3,dl_dst=${GW},ipv6,`) && f.includes(`table=${OUT_TABLE})`)));
    t.ok(
      zero.includes(
        'cookie=0xf63000000000007,priority=460,reg8=0,in_port=1,dl_dst=00:00:00:00:00:00/01:00:00:00:00:00,ip,actions=set_field:0x7->reg8,ct(zone=12295,table=63)',
      ),
      "the gateway's unicast to anyone: this host's members and a logical network's on other hosts",
    );
  },
);

t.test(
  'out: replies and ND pass, new connections to the rules, the rest dropped; the rules by destination, DNS to the resolvers',
  async (t) => {
    const out = inTable(egressFlows(plan), OUT_TABLE);
    t.ok(out.includes(`cookie=0xf63000000000007,table=62,priority=50,reg8=7,ct_state=+est+trk,actions=resubmit(,0)`));
    t.ok(out.some((f) => f.includes('ct_state=+rel+trk,actions=resubmit(,0)')));
    t.equal(out.filter((f) => f.includes('icmp6,icmp_type=')).length, 5, 'Neighbor Discovery (133-137), which conntrack does not track');
    t.ok(out.includes(`cookie=0xf63000000000007,table=62,priority=30,reg8=7,ct_state=+new+trk,actions=resubmit(,64)`));
    t.match(out.at(-1), /table=62,priority=1,reg8=7,actions=drop$/);
    const rules = inTable(egressFlows(plan), EGRESS_TABLE);
    t.same(rules, [
      'cookie=0xf63000000000007,table=64,priority=20,reg8=7,tcp,nw_dst=198.19.0.10/32,tp_dst=8080,actions=ct(commit,zone=12295),resubmit(,0)',
      'cookie=0xf63000000000007,table=64,priority=20,reg8=7,ip,nw_dst=203.0.113.0/24,actions=ct(commit,zone=12295),resubmit(,0)',
      'cookie=0xf63000000000007,table=64,priority=1,reg8=7,actions=drop',
      'cookie=0xf63000000000007,table=64,priority=10,reg8=7,tcp,nw_dst=10.255.255.53,tp_dst=53,actions=ct(commit,zone=12295),resubmit(,0)',
      'cookie=0xf63000000000007,table=64,priority=10,reg8=7,udp,nw_dst=10.255.255.53,tp_dst=53,actions=ct(commit,zone=12295),resubmit(,0)',
    ]);
    t.same(
      inTable(egressFlows({ ...plan, dns: 'any' }), EGRESS_TABLE)
        .filter((f) => f.includes('tp_dst=53'))
        .map((f) => /reg8=7,([a-z0-9]+),tp_dst/.exec(f)?.[1]),
      ['tcp', 'tcp6', 'udp', 'udp6'],
      'resolvers unknown: port 53 to any address',
    );
    t.equal(inTable(egressFlows({ ...plan, egress: [] }), EGRESS_TABLE).length, 3, 'none: DNS only, and the drop');
  },
);

t.test('in: the rules by source, and each member its published ports', async (t) => {
  const rules = inTable(egressFlows(plan), INGRESS_TABLE);
  t.ok(
    rules.includes(
      'cookie=0xf63000000000007,table=65,priority=20,reg8=7,ip,nw_src=198.18.0.2/32,actions=ct(commit,zone=12295),resubmit(,0)',
    ),
  );
  t.same(
    rules.filter((f) => f.includes('priority=30')),
    [
      `cookie=0xf63000000000007,table=65,priority=30,reg8=7,dl_dst=${M1},tcp,tp_dst=80,actions=ct(commit,zone=12295),resubmit(,0)`,
      `cookie=0xf63000000000007,table=65,priority=30,reg8=7,dl_dst=${M1},tcp6,tp_dst=80,actions=ct(commit,zone=12295),resubmit(,0)`,
    ],
  );
  t.match(
    rules.find((f) => f.includes('priority=1,')) ?? '',
    /table=65,priority=1,reg8=7,actions=drop$/,
    'the policy drop, counted under the cookie',
  );
  t.equal(inTable(egressFlows(noIngress), INGRESS_TABLE).length, 0, 'no ingress: no table 65');
  t.ok(
    inTable(egressFlows(noIngress), IN_TABLE).includes(
      'cookie=0xf63000000000007,table=63,priority=30,reg8=7,ct_state=+new+trk,ip,actions=ct(commit,zone=12295),resubmit(,0)',
    ),
    'every new connection in committed, so that its replies pass table 62 as established',
  );
});

t.test('a group (peers): routed peers of the subnet pass, the host does not; the shared gateway matched per member', async (t) => {
  const flows = egressFlows({
    ...noIngress,
    peers: true,
    ways: [...plan.ways, { ofport: 9, mac: '02:00:00:00:00:09', addresses: ['10.50.0.254'] }],
  });
  const out = inTable(flows, OUT_TABLE);
  t.ok(out.includes('cookie=0xf63000000000007,table=62,priority=45,reg8=7,ct_state=+new+trk,ip,nw_dst=10.50.0.1,actions=resubmit(,64)'));
  t.ok(
    out.some((f) => f.includes('priority=45') && f.includes('nw_dst=10.50.0.254,')),
    "the infra port's address is the host's too",
  );
  t.ok(
    out.includes(
      'cookie=0xf63000000000007,table=62,priority=40,reg8=7,ct_state=+new+trk,ip,nw_dst=10.50.0.0/24,actions=ct(commit,zone=12295),resubmit(,0)',
    ),
  );
  const zero = tableZero(flows).filter((f) => f.includes('in_port=1,'));
  t.same(
    zero.map((f) => /dl_dst=([^,]+)/.exec(f)?.[1]),
    [M1, M2, M1, M2],
    "what the parent's gateway sends: to this network's members only (it serves the whole family)",
  );
});

t.test('nothing without members or a way out; hostile plan values never reach a flow', async (t) => {
  t.same(egressFlows({ ...plan, members: [] }), []);
  t.same(egressFlows({ ...plan, ways: [] }), []);
  const hostile = egressFlows({
    ...plan,
    members: [...plan.members, { ofport: 4, mac: '02:00:00:00:00:04,actions=drop', published: [{ proto: 'tcp,nw_src=1.2.3.4', port: 1 }] }],
    egress: [
      { cidr: '10.0.0.0/8,actions=output:1' },
      { cidr: ' 10.0.0.0/8' },
      { cidr: '10.0.0.0/8', port: { number: 70000, proto: 'tcp' } },
    ],
    ingress: [{ cidr: '10.0.0.0/8', port: { number: 1, proto: 'sctp' as 'tcp' } }],
    dns: ['1.2.3.4\nadd', '5.6.7.8'],
  });
  t.notOk(
    hostile.some((f) => /\n|actions=drop,|output:1|nw_src=1\.2\.3\.4|70000|sctp|in_port=4/.test(f)),
    'no injected text, no member with a bad MAC',
  );
  t.ok(
    hostile.some((f) => f.includes('nw_dst=5.6.7.8,tp_dst=53')),
    'the good resolver stays',
  );
  t.equal(inTable(hostile, EGRESS_TABLE).filter((f) => f.includes('priority=20')).length, 0, 'no egress rule survives');
});
