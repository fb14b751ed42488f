/**
 * The VIP flows (pure): which flows and groups a network's services make, hairpin for this host's
 * tasks, a refusal for a service without tasks, stable group IDs. Their effect on traffic is
 * test/e2e/vip-datapath.test.ts's and the swarm test's.
 */
import t from 'tap';
import { inScope, OWN } from '../../../src/driver/ovs/cookies.js';
import { GROUP_BASE, groupIds, isVipGroup, vipCookie, vipFlows } from '../../../src/driver/vip/flows.js';

const net = {
  tag: 5,
  services: [
    { vip: '10.90.0.6', tasks: ['10.90.0.8', '10.90.0.7', '10.90.0.7'] },
    { vip: '10.90.0.20', tasks: [] },
  ],
  local: [
    { ofport: 2, address: '10.90.0.7' },
    { ofport: 3, address: '10.90.0.9' },
  ],
};

t.test(
  'a service with tasks: ARP answered with the VIP MAC, a select group with one bucket per task, deduplicated and sorted',
  async (t) => {
    const { flows, groups } = vipFlows([net]);
    t.ok(flows.some((f) => /priority=510,arp,arp_op=1,arp_tpa=10\.90\.0\.6,.*set_field:02:42:0a:5a:00:06->eth_src/.test(f)));
    t.equal(groups.size, 1, 'no group for the service without tasks');
    const [id, spec] = [...groups][0] ?? [0, ''];
    t.ok(isVipGroup(id ?? 0));
    t.equal(
      spec,
      'type=select,bucket=bucket_id:0,actions=ct(commit,table=52,zone=4101,nat(dst=10.90.0.7)),bucket=bucket_id:1,actions=ct(commit,table=52,zone=4101,nat(dst=10.90.0.8))',
    );
    t.ok(flows.some((f) => f.includes(`actions=group:${id}`)));
    t.ok(
      flows.every((f) => inScope(BigInt(/cookie=(0x[0-9a-f]+)/.exec(f)?.[1] ?? '0'), OWN)),
      "every flow in ovsnet's cookie space",
    );
    t.ok(
      flows.every((f) => f.startsWith(`cookie=0x${vipCookie(5).toString(16)},`)),
      "under the network's VIP cookie",
    );
  },
);

t.test('replies pass zone Z by their source: one flow per task address of the network', async (t) => {
  const { flows } = vipFlows([net]);
  const replies = flows.filter((f) => f.includes('priority=500'));
  t.same(
    replies.map((f) => /nw_src=([\d.]+)/.exec(f)?.[1]),
    ['10.90.0.7', '10.90.0.8'],
  );
});

t.test("hairpin flows for this host's tasks of the service only", async (t) => {
  const { flows } = vipFlows([net]);
  const hairpin = flows.filter((f) => f.includes('table=52,priority=20'));
  t.equal(hairpin.length, 2, 'the original direction and the reply, for the local task 10.90.0.7');
  t.ok(hairpin.every((f) => f.includes('in_port=2') && f.includes('nw_dst=10.90.0.7')));
  t.notOk(
    flows.some((f) => f.includes('in_port=3')),
    '10.90.0.9 is no task: no hairpin flow',
  );
});

t.test('a service without tasks: its new connections go to the controller (refused with ICMP port unreachable)', async (t) => {
  const { flows } = vipFlows([net]);
  t.ok(flows.some((f) => /table=51,priority=20,reg9=5,reg10=0xa5a0014,ct_state=\+new\+trk,ip,actions=controller$/.test(f)));
});

t.test('a network without services makes nothing', async (t) => {
  t.same(vipFlows([{ tag: 7, services: [], local: [] }]), { flows: [], groups: new Map() });
});

t.test('group IDs: in range, distinct, the same whatever else comes and goes', async (t) => {
  const many = Array.from({ length: 2000 }, (_, i) => ({ tag: 1 + (i % 7), vip: `10.${i >> 8}.${i & 255}.1` }));
  const ids = groupIds(many);
  t.equal(new Set(ids.values()).size, 2000, 'distinct');
  t.ok([...ids.values()].every((id) => id > GROUP_BASE && isVipGroup(id)));
  const alone = groupIds([{ tag: 3, vip: '10.0.0.1' }]).get('3/10.0.0.1');
  const withOthers = groupIds([
    { tag: 3, vip: '10.0.0.1' },
    { tag: 4, vip: '10.0.0.2' },
  ]).get('3/10.0.0.1');
  t.equal(alone, withOthers, 'stable');
});
