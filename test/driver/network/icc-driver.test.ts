/**
 * enable_icc=false in the driver, against in-memory OVS, NAT and OpenFlow: the record keeps it,
 * the network's flows (src/driver/network/icc-flows.ts) are on the bridge before each Join returns,
 * follow DeleteEndpoint, come back with the periodic sync and go with the network; the gateway
 * refuses routing between the containers (NAT's inbound rules); the refused combinations; a
 * logical network's hosts agree on it and drop what comes from the tunnels. By effect on
 * traffic: test/e2e/icc-datapath.test.ts, test/e2e/everyday.test.ts, test/e2e/cluster.test.ts.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { NetworkDriver } from '../../../src/driver/network-driver.js';
import type { GroupsApi, QosApi } from '../../../src/driver/effects/deps.js';
import { only } from '../../../src/driver/ovs/cookies.js';
import { iccCookie, iccFlows } from '../../../src/driver/network/icc-flows.js';
import { allocateSwarmNetwork } from '../../../src/driver/vxlan/swarm.js';
import type { HostRecord } from '../../../src/cluster/hosts.js';
import { createLogger } from '../../../src/lib/log.js';
import { keys } from '../../../src/store/keys.js';
import { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import { fakeOpenFlow, fakeSideEffects, type FakeOvs } from '../../helpers/driver-fakes.js';
import { NET, NET2, net } from '../../helpers/driver-setup.js';
import { cluster, create, id } from '../../helpers/logical-hosts.js';

const GW_MAC = '02:00:00:00:00:01';
const NO_ICC = { 'com.docker.network.bridge.enable_icc': 'false' };
const generic = (o: Record<string, string>) => ({ 'com.docker.network.generic': o });

/** OpenFlow numbers as ovs-vswitchd gives them: one per port, never reused while the test runs. */
function portNumbers(ovs: FakeOvs): QosApi {
  const numbers = new Map<string, number>();
  return {
    ofports: async () => {
      for (const p of ovs.ports.keys()) if (!numbers.has(p)) numbers.set(p, numbers.size + 1);
      return new Map([...numbers].filter(([p]) => ovs.ports.has(p)));
    },
    apply: async () => undefined,
    remove: async () => undefined,
  };
}

const macs: GroupsApi = {
  apply: async () => undefined,
  remove: async () => undefined,
  mac: async (link) => (link.startsWith('ovg') ? GW_MAC : 'none'),
};

function setup(t: Test) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-icc-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const store = new SqliteStore({ file: path.join(dir, 'state.db') });
  t.teardown(() => store.close());
  const fx = fakeSideEffects();
  const qos = portNumbers(fx.ovs);
  const openflow = fakeOpenFlow(fx.ovs);
  const driver = new NetworkDriver({
    store,
    log: createLogger('silent'),
    ...fx,
    qos,
    groups: macs,
    openflow,
    host: 'h1',
    bridge: 'br0',
    datapath: () => 'netdev',
  });
  const iccOf = (tag: number) => openflow.flowsOf('br0', only(iccCookie(tag)));
  return { driver, openflow, store, qos, iccOf, ...fx };
}

const endpoint = (networkId: string, c: string, address: string, extra: Record<string, unknown> = {}) => ({
  networkId,
  endpointId: c.repeat(64),
  address: `${address}/24`,
  addressV6: '',
  mac: '',
  portmap: [],
  ...extra,
});

t.test(
  'enable_icc=false: kept in the record; each Join isolated before it returns; DeleteEndpoint, the periodic sync and removal follow',
  async (t) => {
    const { driver, openflow, store, nat, qos, iccOf, ovs } = setup(t);
    await driver.createNetwork(net(NET, generic(NO_ICC)));
    const record = JSON.parse((await store.get(keys.network(NET)))?.value ?? '{}') as { icc?: boolean; tag: number; gatewayPort: string };
    t.equal(record.icc, false, 'the record keeps it');
    t.ok(nat.noIcc.has('10.1.0.0/24'), 'the gateway routes nothing between its containers (iptables)');
    t.match(
      iccOf(record.tag),
      [/,in_port=\d+,icmp,icmp_type=5,actions=drop$/, /,in_port=\d+,icmp6,icmp_type=137,actions=drop$/],
      "a network of one host without containers: the gateway's redirects kept on the bridge, nothing else",
    );

    await driver.createEndpoint(endpoint(NET, '1', '10.1.0.5'));
    await driver.join(NET, '1'.repeat(64));
    const ports = await qos.ofports('br0');
    const gw = ports.get(record.gatewayPort) ?? NaN;
    const first = [...ovs.ports].find(([, p]) => p.externalIds['ovsnet-endpoint'] === '1'.repeat(64))?.[0] ?? '';
    const m1 = { ofport: ports.get(first) ?? NaN, mac: '02:42:0a:01:00:05', address: '10.1.0.5' };
    const gateway = { ofport: gw, mac: GW_MAC, addresses: ['10.1.0.1'], addresses6: [] };
    t.same(iccOf(record.tag), iccFlows({ tag: record.tag, gateway, members: [m1] }), 'on the bridge when Join returns');

    await driver.createEndpoint(endpoint(NET, '2', '10.1.0.6', { options: { 'ovsnet.dscp': '10' } }));
    await driver.join(NET, '2'.repeat(64));
    const second = [...ovs.ports].find(([, p]) => p.externalIds['ovsnet-endpoint'] === '2'.repeat(64))?.[0] ?? '';
    const m2 = { ofport: (await qos.ofports('br0')).get(second) ?? NaN, mac: '02:42:0a:01:00:06', address: '10.1.0.6', qos: { dscp: 10 } };
    t.same(iccOf(record.tag), iccFlows({ tag: record.tag, gateway, members: [m1, m2] }), 'both members, the QoS of the second carried');

    await driver.deleteEndpoint(NET, '1'.repeat(64));
    t.same(iccOf(record.tag), iccFlows({ tag: record.tag, gateway, members: [m2] }), 'DeleteEndpoint: its flows gone');

    openflow.restart();
    await driver.upkeep.syncFlows();
    t.same(iccOf(record.tag), iccFlows({ tag: record.tag, gateway, members: [m2] }), 'back after ovs-vswitchd lost them');
    t.equal((await driver.upkeep.syncFlows()).modifications, 0, 'a sync with nothing to change changes nothing');

    await driver.deleteEndpoint(NET, '2'.repeat(64));
    await driver.deleteNetwork(NET);
    t.same(iccOf(record.tag), [], 'none left with the network');
    t.notOk(nat.noIcc.has('10.1.0.0/24'));
  },
);

t.test('enable_icc=true (or unset) programs nothing; --internal with false: members reach nothing', async (t) => {
  const { driver, store, iccOf, nat } = setup(t);
  await driver.createNetwork(net(NET, generic({ 'com.docker.network.bridge.enable_icc': 'true' })));
  const tag = (JSON.parse((await store.get(keys.network(NET)))?.value ?? '{}') as { tag: number; icc?: boolean }).tag;
  t.notOk(nat.noIcc.has('10.1.0.0/24'));
  await driver.createEndpoint(endpoint(NET, '1', '10.1.0.5'));
  await driver.join(NET, '1'.repeat(64));
  t.same(iccOf(tag), []);

  await driver.createNetwork({ ...net(NET2, { ...generic(NO_ICC), 'com.docker.network.internal': true }, '10.2.0.0/24') });
  const tag2 = (JSON.parse((await store.get(keys.network(NET2)))?.value ?? '{}') as { tag: number }).tag;
  await driver.createEndpoint(endpoint(NET2, '2', '10.2.0.5'));
  await driver.join(NET2, '2'.repeat(64));
  t.match(iccOf(tag2), [/priority=450,in_port=\d+,actions=drop$/], 'one flow: everything the member sends is dropped');
});

t.test('a Join whose flows cannot be applied fails, its port undone', async (t) => {
  const { driver, openflow, ovs } = setup(t);
  await driver.createNetwork(net(NET, generic(NO_ICC)));
  await driver.createEndpoint(endpoint(NET, '1', '10.1.0.5'));
  openflow.failNext('sync');
  await t.rejects(driver.join(NET, '1'.repeat(64)), { code: 'OVS_FAILED' });
  t.notOk(
    [...ovs.ports.values()].some((p) => p.externalIds['ovsnet-endpoint'] === '1'.repeat(64)),
    'its port is off the bridge again: never on it without the rules',
  );
});

t.test('refused: with an endpoint group, under a parent that has it, with an infra port, on a swarm network', async (t) => {
  const { driver, store } = setup(t);
  await t.rejects(driver.createNetwork(net(NET, generic({ ...NO_ICC, 'ovsnet.network': 'app', 'ovsnet.group': 'web' }))), {
    code: 'NETWORK_OPTION_INVALID',
    message: /enable_icc=false with -o ovsnet\.group=web: an endpoint group's traffic is ruled by -o ovsnet\.allow/,
  });
  await t.rejects(driver.createNetwork(net(NET, generic({ ...NO_ICC, 'ovsnet.infra': 'true' }))), {
    message: /enable_icc=false with -o ovsnet\.infra=true/,
  });
  await driver.createNetwork(net(NET, generic({ ...NO_ICC, 'ovsnet.network': 'app' })));
  await t.rejects(
    driver.createNetwork({ ...net(NET2, generic({ 'ovsnet.network': 'app', 'ovsnet.group': 'web' })), ipv4: [{ pool: '10.1.0.0/24' }] }),
    { code: 'NETWORK_OPTION_INVALID', message: /its parent app has -o com\.docker\.network\.bridge\.enable_icc=false/ },
  );
  await t.rejects(
    allocateSwarmNetwork(
      store,
      { networkId: 'a'.repeat(25), options: NO_ICC, subnets: ['10.3.0.0/24'], host: 'h1', now: new Date() },
      'global',
    ),
    { code: 'SWARM_UNSUPPORTED', message: /enable_icc=false on a swarm network/ },
  );
});

t.test("a logical network: every host says the same, and each drops what the network's tunnels bring", async (t) => {
  const alive = new Map<string, HostRecord>();
  const [h1, h2] = cluster(t, 2, alive, undefined, undefined, (h) => ({ qos: portNumbers(h.ovs), groups: macs }));
  if (h1 === undefined || h2 === undefined) throw new Error('two hosts');
  const logical = { 'ovsnet.network': 'blue', 'ovsnet.encap': 'vxlan' };
  await create(h1, id('a'), '10.80.0.0/24', { ...logical, ...NO_ICC });
  const rec = JSON.parse((await h1.store.get(keys.network(id('a'))))?.value ?? '{}') as { vni: number; tag: number };
  t.ok(
    h1.openflow
      .flowsOf('br0', only(iccCookie(rec.tag)))
      .includes(`cookie=0xf62${rec.tag.toString(16).padStart(12, '0')},priority=450,tun_id=${rec.vni},actions=drop`),
    'from its creation on, before any container joins',
  );
  t.match(JSON.parse((await h1.store.get(keys.logicalNetwork('blue')))?.value ?? '{}'), { icc: false }, 'the logical record says it');
  await t.rejects(create(h2, id('b'), '10.80.0.0/24', logical), {
    code: 'LOGICAL_NETWORK_MISMATCH',
    message:
      /logical network blue is vxlan VNI \d+ with subnet 10\.80\.0\.0\/24, enable_icc=false .*this request has enable_icc=true: pass -o com\.docker\.network\.bridge\.enable_icc=false/,
  });
  await create(h2, id('b'), '10.80.0.0/24', { ...logical, ...NO_ICC });
  await h2.driver.upkeep.syncFlows();
  t.ok(
    h2.openflow.flowsOf('br0').some((f) => f.endsWith(`priority=450,tun_id=${rec.vni},actions=drop`)),
    "the second host drops the tunnels' frames too",
  );
});
