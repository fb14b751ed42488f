/**
 * enable_icc=false's flows (src/driver/network/icc-flows.ts), as text: what leaves a member's port
 * (for the gateway only, to the gateway's port only; the rest dropped), what the gateway's port
 * sends straight to a member, what arrives from other hosts, QoS carried along, the cookie. By
 * their effect on traffic: test/e2e/icc-datapath.test.ts; in the driver: test/driver/network/icc-driver.test.ts.
 */
import t from 'tap';
import { FEATURE, OWN, cookieOf, inScope } from '../../../src/driver/ovs/cookies.js';
import { ICC_PRIORITY, iccCookie, iccFlows, type IccPlan } from '../../../src/driver/network/icc-flows.js';
import { meterId } from '../../../src/driver/ovs/qos-flows.js';

const GM = '02:00:00:00:00:01';
const gateway = { ofport: 1, mac: GM, addresses: ['10.9.0.1'], addresses6: [] as string[] };
const m2 = { ofport: 2, mac: '02:42:0A:09:00:02', address: '10.9.0.2' };
const m3 = { ofport: 3, mac: '02:42:0a:09:00:03', address: '10.9.0.3' };
const plan: IccPlan = { tag: 7, gateway, members: [m3, m2] };
const C = 'cookie=0xf62000000000007';

const priorityOf = (f: string) => Number(/priority=(\d+)/.exec(f)?.[1]);

t.test("the cookie: the icc feature and the network's tag, inside ovsnet's scope", async (t) => {
  t.equal(iccCookie(7), cookieOf(FEATURE.icc, 7));
  t.ok(inScope(iccCookie(4094), OWN));
  for (const f of iccFlows(plan)) t.ok(f.startsWith(`${C},priority=`), f);
  t.ok(
    iccFlows(plan).every((f) => priorityOf(f) >= ICC_PRIORITY && priorityOf(f) < 500),
    'above QoS (300) and groups (400), below swarm VIPs (500)',
  );
});

t.test("IPv4: a member's frames go to the gateway port or nowhere; the gateway's reach each member directly", async (t) => {
  t.same(iccFlows(plan), [
    `${C},priority=453,in_port=1,icmp,icmp_type=5,actions=drop`,
    `${C},priority=453,in_port=1,icmp6,icmp_type=137,actions=drop`,
    `${C},priority=451,in_port=2,dl_dst=${GM},actions=output:1`,
    `${C},priority=451,in_port=2,arp,arp_tpa=10.9.0.1,actions=output:1`,
    `${C},priority=451,in_port=1,dl_dst=02:42:0a:09:00:02,actions=output:2`,
    `${C},priority=452,in_port=1,arp,arp_tpa=10.9.0.2,actions=output:2`,
    `${C},priority=450,in_port=2,actions=drop`,
    `${C},priority=451,in_port=3,dl_dst=${GM},actions=output:1`,
    `${C},priority=451,in_port=3,arp,arp_tpa=10.9.0.1,actions=output:1`,
    `${C},priority=451,in_port=1,dl_dst=02:42:0a:09:00:03,actions=output:3`,
    `${C},priority=452,in_port=1,arp,arp_tpa=10.9.0.3,actions=output:3`,
    `${C},priority=450,in_port=3,actions=drop`,
  ]);
  const fromMember = iccFlows(plan).filter((f) => f.includes('in_port=2,'));
  t.ok(
    fromMember.every((f) => f.endsWith('actions=output:1') || f.endsWith('actions=drop')),
    "nothing of a member's goes anywhere but the gateway's port: no NORMAL, no flood",
  );
  t.notOk(
    iccFlows(plan).some((f) => f.includes('NORMAL')),
    "the gateway's broadcasts and unknown unicast take the base flow's NORMAL",
  );
});

t.test(
  'IPv6: ND and RS for the gateway (its link-local addresses too) go to it; ND for a member from the gateway to that member',
  async (t) => {
    const flows = iccFlows({
      tag: 7,
      gateway: { ...gateway, addresses6: ['fd09::1'] },
      members: [{ ...m2, address6: 'fd09::2' }],
    });
    for (const f of [
      `${C},priority=451,in_port=2,icmp6,icmp_type=135,nd_target=fd09::1,actions=output:1`,
      `${C},priority=451,in_port=2,icmp6,icmp_type=135,nd_target=fe80::/10,actions=output:1`,
      `${C},priority=451,in_port=2,icmp6,icmp_type=133,actions=output:1`,
      `${C},priority=452,in_port=1,icmp6,icmp_type=135,nd_target=fd09::2,actions=output:2`,
    ])
      t.ok(flows.includes(f), f);
    t.notOk(
      iccFlows(plan).some((f) => /icmp_type=13[35],/.test(f)),
      'no ND or RS flows for a network without IPv6',
    );
  },
);

t.test("QoS rides along: the member's meter on all it sends the gateway, its DSCP mark on IPv4 and IPv6", async (t) => {
  const flows = iccFlows({ tag: 7, gateway, members: [{ ...m2, qos: { rateKbps: 1000, burstKbit: 100, dscp: 46 } }] });
  const meter = `meter:${meterId(2)}`;
  for (const f of [
    `${C},priority=452,in_port=2,ip,dl_dst=${GM},actions=${meter},set_field:46->ip_dscp,output:1`,
    `${C},priority=452,in_port=2,ipv6,dl_dst=${GM},actions=${meter},set_field:46->ip_dscp,output:1`,
    `${C},priority=451,in_port=2,dl_dst=${GM},actions=${meter},output:1`,
    `${C},priority=451,in_port=2,arp,arp_tpa=10.9.0.1,actions=${meter},output:1`,
  ])
    t.ok(flows.includes(f), f);
  const dscpOnly = iccFlows({ tag: 7, gateway, members: [{ ...m2, qos: { dscp: 10 } }] });
  t.ok(dscpOnly.includes(`${C},priority=452,in_port=2,ip,dl_dst=${GM},actions=set_field:10->ip_dscp,output:1`), 'no meter without a rate');
});

t.test('across hosts: everything of the network from the VNI tunnels or the uplink on its tag is dropped', async (t) => {
  t.ok(iccFlows({ ...plan, segment: { vni: 5001 } }).includes(`${C},priority=450,tun_id=5001,actions=drop`));
  t.ok(iccFlows({ ...plan, segment: { uplinkPort: 9, vlan: 7 } }).includes(`${C},priority=450,in_port=9,dl_vlan=7,actions=drop`));
  t.same(
    iccFlows({ tag: 7, members: [], segment: { vni: 5001 } }),
    [`${C},priority=450,tun_id=5001,actions=drop`],
    'before any member joins',
  );
});

t.test('--internal (no gateway), or a gateway out of reach: members reach nothing', async (t) => {
  t.same(iccFlows({ tag: 7, members: [m2, m3] }), [`${C},priority=450,in_port=2,actions=drop`, `${C},priority=450,in_port=3,actions=drop`]);
});
