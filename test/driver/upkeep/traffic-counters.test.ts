/**
 * The counters the metrics export: monotonic per source across OVS starting its counts again
 * (ovs-vswitchd restarted, a port added again, a flow replaced), series only for live endpoints
 * and networks, one read for scrapes within the cache time, bounded in time, never rejecting.
 * A scripted ovs-ofctl answers in OVS's own format (traffic-stats.test.ts has the real text).
 */
import t from 'tap';
import { OpenFlow } from '../../../src/driver/ovs/openflow.js';
import type { NetworkRecord } from '../../../src/driver/model/records.js';
import { OWNER, endpointIds, gatewayIds } from '../../../src/driver/ovs/external-ids.js';
import type { OwnPort } from '../../../src/driver/ovs/ovsdb.js';
import { Monotonic, TrafficCounters, networkLabel } from '../../../src/driver/upkeep/traffic-counters.js';

const NET = 'a'.repeat(64);
const net = (networkId: string, tag: number, extra: Partial<NetworkRecord> = {}): NetworkRecord => ({
  networkId,
  bridge: 'ovsnet0',
  tag,
  mtu: 1500,
  internal: false,
  ipv4: [],
  ipv6: [],
  createdAt: '',
  ...extra,
});
/** An endpoint's port as OVSDB holds it: its name, its external_ids naming the endpoint and network. */
const ep = (endpointId: string, hostVeth: string, networkId = NET): OwnPort => ({
  name: hostVeth,
  uuid: `uuid-${hostVeth}`,
  tag: 5,
  externalIds: { ...OWNER, ...endpointIds(networkId, endpointId) },
});

/** A port's counters and when (on the test's clock) it was added. */
interface Port {
  rx: number;
  tx: number;
  since: number;
}

/** A bridge: its ports' counters and ages, its drop flows' packets; `down` plays ovs-vswitchd away. */
function bridge(clock: () => number) {
  const age = (since: number) => ((clock() - since) / 1000).toFixed(3);
  const b = {
    ports: new Map<string, Port>(),
    drops: new Map<string, { packets: number; since: number }>(),
    down: false,
    hang: false,
    reads: 0,
  };
  const ports = () =>
    `OFPST_PORT reply (OF1.3) (xid=0x2): ${b.ports.size} ports\n` +
    [...b.ports]
      .map(
        ([name, p]) =>
          `  port  ${name}: rx pkts=${p.rx}, bytes=${p.rx * 100}, drop=0, errs=0, frame=0, over=0, crc=0\n           tx pkts=${p.tx}, bytes=${p.tx * 100}, drop=0, errs=0, coll=0\n           duration=${age(p.since)}s\n`,
      )
      .join('');
  const flows = () =>
    [...b.drops]
      .map(
        ([match, f]) =>
          ` cookie=0xf60000000000005, duration=${age(f.since)}s, table=42, n_packets=${f.packets}, n_bytes=0, ${match} actions=drop\n`,
      )
      .join('');
  const of = new OpenFlow(async (_cmd, args) => {
    if (b.hang) return new Promise(() => undefined);
    if (b.down) return { code: 1, stdout: '', stderr: 'ovs-ofctl: ovsnet0 is not a bridge or a socket' };
    if (args.includes('dump-ports')) b.reads++;
    return { code: 0, stdout: args.includes('dump-ports') ? ports() : flows(), stderr: '' };
  }, 0);
  return { b, of };
}

function setup(opts: { networks?: NetworkRecord[]; endpoints?: OwnPort[] } = {}) {
  let clock = 1_000_000;
  const { b, of } = bridge(() => clock);
  const state = { networks: opts.networks ?? [net(NET, 5)], endpoints: opts.endpoints ?? [ep('e'.repeat(64), 'ovh1')] };
  const warned: string[] = [];
  const counters = new TrafficCounters({
    records: { localNetworks: async () => state.networks },
    ovs: { ownPorts: async () => state.endpoints },
    openflow: of,
    log: { warn: (_o: unknown, msg?: string) => warned.push(msg ?? ''), info: () => undefined },
    now: () => clock,
    timeoutMs: 200,
  });
  const later = (ms = 1500) => (clock += ms);
  return { b, state, counters, later, warned, now: () => clock };
}

t.test('Monotonic: new sources count whole, then what moved; lower values start again from 0; never below 0', async (t) => {
  const m = new Monotonic();
  t.same([...m.deltas([{ key: 'p', values: [10, 1000] }])], [['p', [10, 1000]]], 'new: all of it');
  t.same([...m.deltas([{ key: 'p', values: [15, 1500] }])], [['p', [5, 500]]], 'then what moved');
  t.same([...m.deltas([{ key: 'p', values: [15, 1500] }])], [['p', [0, 0]]], 'nothing moved');
  t.same([...m.deltas([{ key: 'p', values: [3, 300] }])], [['p', [3, 300]]], 'lower: started again, all it shows moved');
  t.same([...m.deltas([{ key: 'p', values: [3, 200] }])], [['p', [3, 200]]], 'one value lower is enough');
  t.same([...m.deltas([{ key: 'q', values: [1] }])], [['q', [1]]]);
  t.equal(m.size, 1, 'p, not read this time, forgotten');
  t.same([...m.deltas([{ key: 'p', values: [7, 700] }])], [['p', [7, 700]]], 'p back: new again');
  for (let i = 0; i < 50; i++) {
    const values = [Math.floor(Math.random() * 100), Math.floor(Math.random() * 100)];
    t.ok(
      (m.deltas([{ key: 'r', values }]).get('r') ?? []).every((d) => d >= 0),
      `never below 0 (${values.join(',')})`,
    );
  }
});

t.test('series: from the first read, monotonic across an ovs-vswitchd restart, labels shortened', async (t) => {
  const { b, counters, later, now } = setup();
  b.ports.set('ovh1', { rx: 10, tx: 20, since: 0 });
  b.drops.set('priority=1,reg7=0x5', { packets: 4, since: 0 });
  t.same(await counters.read(), {
    endpoints: [
      {
        network: NET.slice(0, 12),
        endpoint: 'e'.repeat(12),
        ...{ sentPackets: 10, sentBytes: 1000, receivedPackets: 20, receivedBytes: 2000, policyDrops: 0 },
      },
    ],
    networks: [{ network: NET.slice(0, 12), policyDrops: 4 }],
  });
  later();
  b.ports.set('ovh1', { rx: 15, tx: 22, since: 0 });
  b.drops.set('priority=1,reg7=0x5', { packets: 6, since: 0 });
  t.match(await counters.read(), { endpoints: [{ sentPackets: 15, receivedPackets: 22 }], networks: [{ policyDrops: 6 }] });
  // ovs-vswitchd restarts: the port and the flow are added again, counted from 0.
  later();
  b.ports.set('ovh1', { rx: 2, tx: 1, since: now() });
  b.drops.set('priority=1,reg7=0x5', { packets: 1, since: now() });
  t.match(await counters.read(), { endpoints: [{ sentPackets: 17, receivedPackets: 23 }], networks: [{ policyDrops: 7 }] }, 'never down');
  // A port added again with the kernel's counts so far (a younger age, counts kept): nothing counted twice.
  later();
  b.ports.set('ovh1', { rx: 3, tx: 1, since: now() });
  t.match(await counters.read(), { endpoints: [{ sentPackets: 18, receivedPackets: 23 }] });
});

t.test(
  "bounded: a removed endpoint's port or network takes its series (and its totals) with it; one not on the bridge yet has none",
  async (t) => {
    const other = 'b'.repeat(64);
    const { b, state, counters, later, now } = setup({
      networks: [net(NET, 5), net(other, 6)],
      endpoints: [ep('e'.repeat(64), 'ovh1'), ep('f'.repeat(64), 'ovh2', other), ep('d'.repeat(64), 'ovh3')],
    });
    b.ports.set('ovh1', { rx: 1, tx: 1, since: 0 });
    b.ports.set('ovh2', { rx: 5, tx: 5, since: 0 });
    const first = await counters.read();
    t.same(
      first?.endpoints.map((e) => e.endpoint),
      ['e'.repeat(12), 'f'.repeat(12)],
      'ovh3 has no port yet: no series',
    );
    t.same(
      first?.networks.map((n) => n.network),
      [NET.slice(0, 12), other.slice(0, 12)],
    );
    state.endpoints = [ep('e'.repeat(64), 'ovh1')];
    state.networks = [net(NET, 5)];
    b.ports.delete('ovh2');
    later();
    const second = await counters.read();
    t.same(
      second?.endpoints.map((e) => e.endpoint),
      ['e'.repeat(12)],
      'f gone with its endpoint',
    );
    t.same(
      second?.networks.map((n) => n.network),
      [NET.slice(0, 12)],
    );
    // The same endpoint ID back (a new endpoint of that ID): it starts from its port's counts, not f's old total.
    state.endpoints.push(ep('f'.repeat(64), 'ovh2'));
    b.ports.set('ovh2', { rx: 1, tx: 0, since: now() });
    later();
    t.match(
      (await counters.read())?.endpoints.find((e) => e.endpoint === 'f'.repeat(12)),
      { sentPackets: 1 },
    );
    // An endpoint whose port is away for a read keeps its series at its total.
    b.ports.delete('ovh1');
    later();
    t.match(
      (await counters.read())?.endpoints.find((e) => e.endpoint === 'e'.repeat(12)),
      { sentPackets: 1 },
    );
  },
);

t.test(
  "an endpoint is found by its port's external_ids: a gateway's port, an unmarked port and another network's endpoint have no series",
  async (t) => {
    const gone = 'c'.repeat(64);
    const { b, counters } = setup({
      endpoints: [
        ep('e'.repeat(64), 'ovh1'),
        { name: 'ovg1', uuid: 'uuid-ovg1', tag: 5, externalIds: { ...OWNER, ...gatewayIds(NET) } },
        { name: 'stray', uuid: 'uuid-stray', tag: 5, externalIds: { ...OWNER } },
        ep('d'.repeat(64), 'ovh4', gone),
      ],
    });
    for (const port of ['ovh1', 'ovg1', 'stray', 'ovh4']) b.ports.set(port, { rx: 3, tx: 2, since: 0 });
    const read = await counters.read();
    t.same(
      read?.endpoints.map((e) => [e.endpoint, e.network, e.sentPackets, e.receivedPackets]),
      [['e'.repeat(12), NET.slice(0, 12), 3, 2]],
      "only ovh1: ovg1 is a gateway's, stray names no endpoint, ovh4's network is not among this host's",
    );
  },
);

t.test('one read for scrapes within the cache time; OVS away or hanging: undefined, within the timeout, said once', async (t) => {
  const { b, counters, later, warned } = setup();
  b.ports.set('ovh1', { rx: 1, tx: 1, since: 0 });
  const [a, c] = await Promise.all([counters.read(), counters.read()]);
  t.equal(a, c, 'concurrent scrapes: one answer');
  t.equal(b.reads, 1, 'one dump-ports');
  later(500);
  await counters.read();
  t.equal(b.reads, 1, 'within a second: the same');
  later(1000);
  await counters.read();
  t.equal(b.reads, 2, 'past it: read again');
  b.down = true;
  later();
  t.equal(await counters.read(), undefined, 'OVS away: no series');
  later();
  t.equal(await counters.read(), undefined);
  t.equal(warned.length, 1, 'said once');
  t.match(warned[0], /cannot read the endpoints' counters from the bridge: .*not a bridge/);
  b.down = false;
  b.hang = true;
  later();
  const started = Date.now();
  t.equal(await counters.read(), undefined, 'a hanging read: no series');
  t.ok(Date.now() - started < 1000, `answered within the timeout (${Date.now() - started} ms)`);
  b.hang = false;
});

t.test("labels: a logical network by its name (the same on every host), else the network's 12-character ID", async (t) => {
  t.equal(networkLabel({ networkId: NET }), NET.slice(0, 12));
  t.equal(networkLabel({ networkId: NET, logical: 'blue' }), 'blue');
  t.equal(networkLabel({ networkId: 'x1y2z3a4b5c6d7e8f9g0h1i2j', logical: 'swarm-x1y2z3a4b5c6d7e8f9g0h1i2j' }), 'x1y2z3a4b5c6');
});
