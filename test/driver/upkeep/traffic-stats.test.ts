/**
 * Reading the bridge's counters: ovs-ofctl's own text (taken from Open vSwitch 3.1 on the
 * userspace datapath: two veths as members of a parent on tag 5 and of its group 6, the parent's
 * gateway port, group-flows.ts's flows for them, pings refused between the groups; a drop flow of
 * 0x0f62 and 0x0f63 each, as enable_icc=false and egress rules would add), what counts as a
 * policy drop, and to whom each count goes.
 */
import t from 'tap';
import { OpenFlow } from '../../../src/driver/ovs/openflow.js';
import {
  attribute,
  isPolicyDrop,
  parseFlowStats,
  parsePortStats,
  readBridge,
  sourcesOf,
  tagOf,
} from '../../../src/driver/upkeep/traffic-stats.js';

/** `ovs-ofctl -O OpenFlow13 --names dump-ports cnt0`. */
const PORTS13 = `OFPST_PORT reply (OF1.3) (xid=0x2): 4 ports
  port  cntg: rx pkts=20, bytes=1804, drop=0, errs=0, frame=0, over=0, crc=0
           tx pkts=17, bytes=1426, drop=0, errs=0, coll=0
           duration=16.424s
  port LOCAL: rx pkts=0, bytes=0, drop=0, errs=0, frame=0, over=0, crc=0
           tx pkts=0, bytes=0, drop=31, errs=0, coll=0
           duration=341.613s
  port  cntv1: rx pkts=28, bytes=2168, drop=0, errs=0, frame=0, over=0, crc=0
           tx pkts=42, bytes=3180, drop=0, errs=0, coll=0
           duration=341.559s
  port  cntv2: rx pkts=28, bytes=2168, drop=0, errs=0, frame=0, over=0, crc=0
           tx pkts=42, bytes=3180, drop=0, errs=0, coll=0
           duration=341.513s
`;

/** `ovs-ofctl --names dump-ports cnt0` (OpenFlow 1.0: no duration); a port whose name reads as a number, quoted. */
const PORTS10 = `OFPST_PORT reply (xid=0x2): 4 ports
  port  cntg: rx pkts=20, bytes=1804, drop=0, errs=0, frame=0, over=0, crc=0
           tx pkts=17, bytes=1426, drop=0, errs=0, coll=0
  port LOCAL: rx pkts=0, bytes=0, drop=0, errs=0, frame=0, over=0, crc=0
           tx pkts=0, bytes=0, drop=31, errs=0, coll=0
  port  "123": rx pkts=0, bytes=0, drop=0, errs=0, frame=0, over=0, crc=0
           tx pkts=?, bytes=?, drop=0, errs=0, coll=0
`;

/** `ovs-ofctl -O OpenFlow13 --names dump-flows cnt0 cookie=0x0f60000000000000/0xfffc000000000000`, some lines; the VIP line made alike. */
const FLOWS = `OFPST_FLOW reply (OF1.3) (xid=0x6):
 cookie=0xf63000000000007, duration=235.374s, table=0, n_packets=0, n_bytes=0, idle_timeout=600, priority=450,ip,in_port=123 actions=drop
 cookie=0xf62000000000005, duration=235.344s, table=0, n_packets=5, n_bytes=490, priority=450,ip,in_port=cntv2,nw_dst=10.99.0.1 actions=drop
 cookie=0xf60000000000005, duration=13.494s, table=0, n_packets=3, n_bytes=378, priority=401,icmp,in_port=cntg,icmp_type=5 actions=drop
 cookie=0xf60000000000005, duration=13.493s, table=0, n_packets=0, n_bytes=0, priority=401,icmp6,in_port=cntg,icmp_type=137 actions=drop
 cookie=0xf60000000000005, duration=13.493s, table=0, n_packets=1, n_bytes=42, priority=400,arp,in_port=cntv1,dl_dst=02:00:00:00:00:01 actions=output:cntg
 cookie=0xf60000000000005, duration=13.493s, table=0, n_packets=5, n_bytes=490, priority=400,ip,in_port=cntv1,dl_dst=02:00:00:00:00:01 actions=load:0x6->NXM_NX_REG6[],load:0x5->NXM_NX_REG7[],ct(table=43,zone=5)
 cookie=0xf60000000000005, duration=13.492s, table=42, n_packets=3, n_bytes=294, priority=1,reg7=0x5 actions=drop
 cookie=0xf60000000000005, duration=13.493s, table=43, n_packets=0, n_bytes=0, priority=1,reg7=0x5 actions=drop
 cookie=0xf61000000000005, duration=13.493s, table=51, n_packets=9, n_bytes=900, priority=1,reg7=0x5 actions=drop
`;

t.test('dump-ports: rx and tx by port name (quoted or not), OpenFlow 1.0 or 1.3, LOCAL left out', async (t) => {
  t.same(
    [...parsePortStats(PORTS13)],
    [
      ['cntg', { rxPackets: 20, rxBytes: 1804, txPackets: 17, txBytes: 1426 }],
      ['cntv1', { rxPackets: 28, rxBytes: 2168, txPackets: 42, txBytes: 3180 }],
      ['cntv2', { rxPackets: 28, rxBytes: 2168, txPackets: 42, txBytes: 3180 }],
    ],
  );
  t.same(
    [...parsePortStats(PORTS10)],
    [
      ['cntg', { rxPackets: 20, rxBytes: 1804, txPackets: 17, txBytes: 1426 }],
      ['123', { rxPackets: 0, rxBytes: 0, txPackets: 0, txBytes: 0 }],
    ],
    'a counter OVS does not have (?) reads 0',
  );
  t.same([...parsePortStats('')], [], 'nothing from nothing');
  t.same([...parsePortStats('ovs-ofctl: cnt0 is not a bridge or a socket\n')], []);
});

t.test('dump-flows: the flow without its statistics as its key, packets, in_port by name, drop or not', async (t) => {
  const flows = parseFlowStats(FLOWS);
  t.equal(flows.length, 9, 'the header line is none');
  t.same(flows[0], {
    cookie: 0xf63000000000007n,
    key: 'cookie=0xf63000000000007,table=0,idle_timeout=600,priority=450,ip,in_port=123',
    packets: 0,
    inPort: '123',
    drop: true,
  });
  t.same(flows[1], {
    cookie: 0xf62000000000005n,
    key: 'cookie=0xf62000000000005,table=0,priority=450,ip,in_port=cntv2,nw_dst=10.99.0.1',
    packets: 5,
    inPort: 'cntv2',
    drop: true,
  });
  t.same(flows[6], {
    cookie: 0xf60000000000005n,
    key: 'cookie=0xf60000000000005,table=42,priority=1,reg7=0x5',
    packets: 3,
    drop: true,
  });
  t.notOk(flows[4]?.drop, 'an output is no drop');
  t.equal(
    parseFlowStats(FLOWS.replace(/duration=[\d.]+s, /g, 'duration=999.1s, ').replace(/n_packets=\d+/g, 'n_packets=77'))[6]?.key,
    flows[6]?.key,
    'the same flow later has the same key',
  );
  t.same(
    parseFlowStats(' cookie=0x0, duration=1.000s, table=0, n_packets=0, n_bytes=0, priority=1,in_port="my port" actions=drop')[0]?.inPort,
    'my port',
  );
  t.equal(tagOf(0xf60000100000007n), 7, "bit 32 (0.x's generation) aside, the low bits are the tag");
});

t.test('policy drops: the drop flows of groups, enable_icc and egress/ingress rules; no redirect, no VIP, no output', async (t) => {
  const drops = parseFlowStats(FLOWS).filter(isPolicyDrop);
  t.same(
    drops.map((f) => f.key),
    [
      'cookie=0xf63000000000007,table=0,idle_timeout=600,priority=450,ip,in_port=123',
      'cookie=0xf62000000000005,table=0,priority=450,ip,in_port=cntv2,nw_dst=10.99.0.1',
      'cookie=0xf60000000000005,table=42,priority=1,reg7=0x5',
      'cookie=0xf60000000000005,table=43,priority=1,reg7=0x5',
    ],
  );
});

t.test(
  'attribute: ports to their endpoints (rx is what the container sent), drops to the network by tag and to the endpoint by in_port',
  async (t) => {
    const stats = { bridge: 'cnt0', ports: parsePortStats(PORTS13), flows: parseFlowStats(FLOWS).filter(isPolicyDrop) };
    const found = attribute(
      [stats],
      [
        { endpointId: 'e1', networkId: 'group6', bridge: 'cnt0', port: 'cntv1' },
        { endpointId: 'e2', networkId: 'parent5', bridge: 'cnt0', port: 'cntv2' },
        { endpointId: 'e3', networkId: 'parent5', bridge: 'cnt0', port: 'not-there-yet' },
        { endpointId: 'e4', networkId: 'parent5', bridge: 'other', port: 'cntv1' },
      ],
      [
        { networkId: 'parent5', bridge: 'cnt0', tag: 5 },
        { networkId: 'group6', bridge: 'cnt0', tag: 6 },
        { networkId: 'net7', bridge: 'cnt0', tag: 7 },
        { networkId: 'elsewhere5', bridge: 'other', tag: 5 },
      ],
    );
    t.same([...found.endpoints.keys()], ['e1', 'e2'], 'only endpoints whose port is on the bridge read');
    t.same(found.endpoints.get('e1'), { sentPackets: 28, sentBytes: 2168, receivedPackets: 42, receivedBytes: 3180, policyDrops: 0 });
    t.same(found.endpoints.get('e2')?.policyDrops, 5, "the drop flow matching e2's in_port: e2's");
    t.same(
      [...found.networks],
      [
        ['net7', 0],
        ['parent5', 5 + 3 + 0],
      ],
      "tag 5's drops: enable_icc's and the groups' conntrack tables' (not the gateway's redirects); tag 7's egress rule",
    );
    const moved = attribute([stats], [{ endpointId: 'e1', networkId: 'group6', bridge: 'cnt0', port: 'cntv1' }], [], (key) =>
      key.endsWith('port cntv1') ? [1, 2, 3, 4] : [0],
    );
    t.same(
      moved.endpoints.get('e1'),
      { sentPackets: 1, sentBytes: 2, receivedPackets: 3, receivedBytes: 4, policyDrops: 0 },
      'valueOf says what counts',
    );
  },
);

t.test('sources: a port counts four values, a flow one', async (t) => {
  const s = sourcesOf({ bridge: 'br', ports: parsePortStats(PORTS13), flows: parseFlowStats(FLOWS).filter(isPolicyDrop).slice(0, 1) });
  t.same(s[0], { key: 'br port cntg', values: [20, 1804, 17, 1426] });
  t.same(s.at(-1), {
    key: 'br flow cookie=0xf63000000000007,table=0,idle_timeout=600,priority=450,ip,in_port=123',
    values: [0],
  });
});

t.test('readBridge: one dump-ports and one dump-flows of the drop features, by name, bounded, never repeated', async (t) => {
  const calls: { args: readonly string[]; timeoutMs: number | undefined }[] = [];
  const of = new OpenFlow(async (_cmd, args, _input, timeoutMs) => {
    calls.push({ args, timeoutMs });
    return { code: 0, stdout: args.includes('dump-ports') ? PORTS13 : FLOWS, stderr: '' };
  });
  const r = await readBridge(of, 'cnt0', 1500);
  t.same(
    calls.map((c) => [c.args.join(' '), c.timeoutMs]),
    [
      ['-O OpenFlow13 --names dump-ports cnt0', 1500],
      ['-O OpenFlow13 --names dump-flows cnt0 cookie=0xf60000000000000/0xfffc000000000000', 1500],
    ],
  );
  t.equal(r.ports.size, 3);
  t.equal(r.flows.length, 4, 'the policy drops only');
  const down = new OpenFlow(async () => ({ code: 1, stdout: '', stderr: 'ovs-ofctl: cnt0 is not a bridge or a socket' }), 0);
  await t.rejects(readBridge(down, 'cnt0', 1500), /is ovs-vswitchd running/);
});
