/** The OpenFlow rules guarding a logical network's gateway, and how ovs-ofctl is called. */
import t from 'tap';
import { Flows, guardFlows } from '../../../src/driver/ovs/flows.js';
import { OpenFlow } from '../../../src/driver/ovs/openflow.js';

t.test("ARP for IPv4 gateways, neighbour discovery for IPv6 ones, from the VNI's tunnels only", async (t) => {
  t.same(guardFlows({ vni: 7 }, ['10.1.0.1', 'fd00:1::1']), [
    'cookie=0xf5e000000000007,priority=100,tun_id=7,arp,arp_tpa=10.1.0.1,actions=drop',
    'cookie=0xf5e000000000007,priority=100,tun_id=7,arp,arp_spa=10.1.0.1,actions=drop',
    'cookie=0xf5e000000000007,priority=100,tun_id=7,icmp6,icmp_type=135,nd_target=fd00:1::1,actions=drop',
    'cookie=0xf5e000000000007,priority=100,tun_id=7,icmp6,icmp_type=136,nd_target=fd00:1::1,actions=drop',
  ]);
  t.not(guardFlows({ vni: 7 }, ['10.1.0.1'])[0]?.split(',')[0], guardFlows({ vni: 8 }, ['10.1.0.1'])[0]?.split(',')[0], 'a cookie per VNI');
});

t.test('a VLAN network on the uplink: frames arriving on the uplink with its tag, a cookie of their own', async (t) => {
  t.same(guardFlows({ vlan: 7, uplink: 'eth1' }, ['10.1.0.1']), [
    'cookie=0xf5f000000000007,priority=100,in_port=eth1,dl_vlan=7,arp,arp_tpa=10.1.0.1,actions=drop',
    'cookie=0xf5f000000000007,priority=100,in_port=eth1,dl_vlan=7,arp,arp_spa=10.1.0.1,actions=drop',
  ]);
});

t.test('add-flow per rule, del-flows by cookie; a failure names the command and the fix', async (t) => {
  const calls: string[][] = [];
  const ok = new Flows(new OpenFlow(async (cmd, args) => (calls.push([cmd, ...args]), { code: 0, stdout: '', stderr: '' })));
  await ok.guardGateway('br0', { vni: 7 }, ['10.1.0.1']);
  await ok.unguardGateway('br0', { vni: 7 });
  t.same(
    calls.map((c) => c.slice(0, 3)),
    [
      ['ovs-ofctl', 'add-flow', 'br0'],
      ['ovs-ofctl', 'add-flow', 'br0'],
      ['ovs-ofctl', 'del-flows', 'br0'],
    ],
  );
  t.equal(calls[2]?.[3], 'cookie=0xf5e000000000007/-1');
  const bad = new Flows(new OpenFlow(async () => ({ code: 1, stdout: '', stderr: 'ovs-ofctl: br0 is not a bridge or a socket\n' })));
  await t.rejects(bad.guardGateway('br0', { vni: 7 }, ['10.1.0.1']), {
    code: 'OVS_FAILED',
    message: /ovs-ofctl add-flow br0 .* failed \(1\): ovs-ofctl: br0 is not a bridge or a socket; is ovs-vswitchd running/,
  });
});
