/** How QosFlows calls ovs-ofctl and reads its answers (a scripted ovs-ofctl; the real one runs in test/e2e/driver-qos). */
import t from 'tap';
import { OWN, inScope } from '../../../src/driver/ovs/cookies.js';
import { parseMeters } from '../../../src/driver/ovs/flow-diff.js';
import { QosFlows, meterId, meterPort, meterSpec, qosCookie, qosFlows } from '../../../src/driver/ovs/qos-flows.js';
import { OpenFlow } from '../../../src/driver/ovs/openflow.js';

type Answer = { code: number; stdout: string; stderr: string };
const ok = (stdout = ''): Answer => ({ code: 0, stdout, stderr: '' });

function scripted(answer: (args: readonly string[]) => Answer) {
  const calls: string[] = [];
  const flows = new QosFlows(new OpenFlow(async (cmd, args) => (calls.push([cmd, ...args].join(' ')), answer(args))));
  return { flows, calls };
}

t.test("port numbers from dump-ports-desc (OVS's own text, LOCAL left out)", async (t) => {
  const { flows } = scripted(() =>
    ok(
      'OFPST_PORT_DESC reply (OF1.3) (xid=0x2):\n 1(ovgb8d2972469b8): addr:e2:74:6f:2d:92:d9\n     config:     0\n 12(ovhcf88426ee638): addr:ea:4a:ef:71:65:46\n LOCAL(ovsnet0): addr:9a:87:4a:57:64:49\n',
    ),
  );
  t.same(
    [...(await flows.ofports('ovsnet0'))],
    [
      ['ovgb8d2972469b8', 1],
      ['ovhcf88426ee638', 12],
    ],
  );
});

t.test("apply: add-meter, or mod-meter when the meter exists; the port's old flows replaced", async (t) => {
  const { flows, calls } = scripted((args) =>
    args.includes('add-meter') ? { code: 1, stdout: '', stderr: 'OFPT_ERROR (OF1.3): OFPMMFC_METER_EXISTS\n' } : ok(),
  );
  await flows.apply('br0', 5, { rateKbps: 20_000, burstKbit: 10_000, dscp: 46 });
  t.same(calls, [
    'ovs-ofctl -O OpenFlow13 add-meter br0 meter=257753093,kbps,burst,stats,bands=type=drop,rate=20000,burst_size=10000',
    'ovs-ofctl -O OpenFlow13 mod-meter br0 meter=257753093,kbps,burst,stats,bands=type=drop,rate=20000,burst_size=10000',
    'ovs-ofctl -O OpenFlow13 del-flows br0 cookie=0xf5d000000000005/-1',
    'ovs-ofctl -O OpenFlow13 add-flow br0 cookie=0xf5d000000000005,priority=300,in_port=5,ip,actions=meter:257753093,set_field:46->ip_dscp,NORMAL',
    'ovs-ofctl -O OpenFlow13 add-flow br0 cookie=0xf5d000000000005,priority=300,in_port=5,ipv6,actions=meter:257753093,set_field:46->ip_dscp,NORMAL',
    'ovs-ofctl -O OpenFlow13 add-flow br0 cookie=0xf5d000000000005,priority=299,in_port=5,actions=meter:257753093,NORMAL',
  ]);
});

t.test('a marking without a rate drops any meter the port had; remove takes flows and meter', async (t) => {
  const { flows, calls } = scripted(() => ok());
  await flows.apply('br0', 5, { dscp: 10 });
  t.equal(calls.at(-1), 'ovs-ofctl -O OpenFlow13 del-meter br0 meter=257753093');
  calls.length = 0;
  await flows.remove('br0', 5);
  t.same(calls, [
    'ovs-ofctl -O OpenFlow13 del-flows br0 cookie=0xf5d000000000005/-1',
    'ovs-ofctl -O OpenFlow13 del-meter br0 meter=257753093',
  ]);
});

t.test("ovsnet's QoS as the bridge's state sees it: flows in the QoS cookie of their port, meters in its range", async (t) => {
  const flows = qosFlows(4, { rateKbps: 20_000, burstKbit: 10_000 });
  t.ok(
    flows.every((f) => f.startsWith(`cookie=${qosCookie(4)},`)),
    "every flow carries its port's cookie",
  );
  t.equal(qosCookie(4), '0xf5d000000000004');
  t.ok(inScope(BigInt(qosCookie(4)), OWN), "in ovsnet's cookie space: synced with the rest of its flows");
  t.equal(
    meterSpec(4, { rateKbps: 20_000, burstKbit: 10_000 }),
    `meter=${meterId(4)},kbps,burst,stats,bands=type=drop,rate=20000,burst_size=10000`,
  );
  t.equal(meterSpec(4, { dscp: 10 }), undefined, 'a marking alone has no meter');
  const dump =
    'OFPST_METER_CONFIG reply (OF1.3) (xid=0x2):\nmeter=4 kbps burst stats bands=\ntype=drop rate=1 burst_size=1\nmeter=257753092 kbps burst stats bands=\ntype=drop rate=20000 burst_size=10000\n';
  t.same(
    [...parseMeters(dump).keys()].map(meterPort),
    [undefined, 4],
    "meter 257753092 (METER_BASE + 4) is port 4's; meter 4 is another controller's",
  );
});

t.test('a failure names the command, its error and what to check', async (t) => {
  const { flows } = scripted(() => ({ code: 1, stdout: '', stderr: 'ovs-ofctl: br0: failed to connect to socket (Connection refused)\n' }));
  await t.rejects(flows.apply('br0', 5, { rateKbps: 100 }), {
    code: 'OVS_FAILED',
    message:
      /^ovs-ofctl -O OpenFlow13 add-meter br0 meter=257753093,.* failed \(1\): ovs-ofctl: br0: failed to connect to socket \(Connection refused\); is ovs-vswitchd running, and does the bridge allow OpenFlow13/,
  });
});
