/**
 * The reconciler against in-memory OVS, links, NAT and flows, with records written straight to
 * a real embedded store: what it puts back from the records, what it removes, what it keeps;
 * and, through the driver's upkeep, the bridge's OpenFlow state that comes with it.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { Gateways } from '../../src/driver/network/gateway.js';
import { Reconciler } from '../../src/driver/upkeep/reconcile.js';
import { NetworkDriver } from '../../src/driver/network-driver.js';
import { BASE_FLOWS } from '../../src/driver/effects/bridge.js';
import { guardFlows } from '../../src/driver/ovs/flows.js';
import { DriverRecords } from '../../src/driver/records/driver-records.js';
import type { EndpointRecord, NetworkRecord } from '../../src/driver/model/records.js';
import { claimTag } from '../../src/driver/records/tags.js';
import { createLogger } from '../../src/lib/log.js';
import { keys } from '../../src/store/keys.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';
import { fakeOpenFlow, fakeSideEffects } from '../helpers/driver-fakes.js';
import { readLogical } from '../../src/driver/records/logical-records.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-reconcile-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
let n = 0;

const NET = 'a'.repeat(64);
const GONE_NET = 'b'.repeat(64);
const EP = 'c'.repeat(64);
const GONE_EP = 'd'.repeat(64);
const GW = 'ovgaaaaaaaaaaaa';

const network = (extra: Partial<NetworkRecord> = {}): NetworkRecord => ({
  networkId: NET,
  host: 'h1',
  bridge: 'br0',
  tag: 1,
  mtu: 1450,
  internal: false,
  ipv4: [{ pool: '10.1.0.0/24', gateway: '10.1.0.1/24' }],
  ipv6: [],
  gatewayPort: GW,
  createdAt: '2026-01-01T00:00:00.000Z',
  ...extra,
});
/** An --internal network: no gateway port. */
const internalNetwork = (): NetworkRecord => {
  const { gatewayPort: _, ...rest } = network({ internal: true });
  return rest;
};
const endpoint = (id: string): EndpointRecord => ({
  networkId: NET,
  endpointId: id,
  address: '10.1.0.5/24',
  mac: '02:42:0a:01:00:05',
  hostVeth: `ovh${id.slice(0, 12)}`,
  containerVeth: `ovc${id.slice(0, 12)}`,
  portmap: [],
  createdAt: '2026-01-01T00:00:00.000Z',
});

function setup(t: Test) {
  const store = new SqliteStore({ file: path.join(dir, `r${n++}.db`) });
  t.teardown(() => store.close());
  const fx = fakeSideEffects();
  const deps = { store, log: createLogger('silent'), ...fx, host: 'h1', bridge: 'br0', datapath: () => 'system' as const };
  const records = new DriverRecords(store, 'h1');
  const reconciler = new Reconciler(deps, new Gateways(deps), records, () => new Date('2026-02-01T00:00:00.000Z'));
  return { store, ...fx, deps, records, reconciler };
}

t.test('from the records alone: the bridge, the gateway port with its tag, MTU and address, masquerading', async (t) => {
  const { ovs, links, nat, records, reconciler } = setup(t);
  await records.createNetwork(network());
  const res = await reconciler.reconcile();
  t.same(res, { repaired: ['bridge br0', `gateway ${GW}`], removed: [] });
  t.equal(ovs.bridges.get('br0'), 'system', 'the bridge, with the datapath asked for');
  t.equal(ovs.failModes.get('br0'), 'standalone', 'standalone: no OpenFlow access, OVS switches by itself');
  t.match(ovs.ports.get(GW), {
    bridge: 'br0',
    tag: 1,
    type: 'internal',
    externalIds: { 'ovsnet-owner': 'ovsnet', 'ovsnet-network': NET, 'ovsnet-role': 'gateway' },
  });
  t.equal(ovs.mtus.get(GW), 1450, "the gateway's MTU pinned to the network's");
  t.same(links.addresses.get(GW), ['10.1.0.1/24'], 'the gateway address');
  t.equal(nat.networks.get(NET), `10.1.0.0/24 via ${GW}`, 'masquerading');
  t.same(await reconciler.reconcile(), { repaired: [], removed: [] }, 'a second run finds nothing to do');
});

t.test('a gateway port that stayed: its MTU set again, its address and NAT rule put back, nothing reported', async (t) => {
  const { ovs, links, nat, records, reconciler } = setup(t);
  await records.createNetwork(network());
  await reconciler.reconcile();
  ovs.mtus.set(GW, 1500);
  links.addresses.delete(GW);
  nat.networks.clear();
  t.same(await reconciler.reconcile(), { repaired: [], removed: [] });
  t.equal(ovs.mtus.get(GW), 1450);
  t.same(links.addresses.get(GW), ['10.1.0.1/24']);
  t.equal(nat.networks.get(NET), `10.1.0.0/24 via ${GW}`);
});

t.test('ports and veths of endpoints that no longer exist go; those of existing endpoints stay', async (t) => {
  const { ovs, links, records, reconciler } = setup(t);
  await records.createNetwork(internalNetwork());
  await records.createEndpoint(endpoint(EP));
  await ovs.ensureBridge('br0', 'system', 'standalone');
  for (const id of [EP, GONE_EP]) {
    await links.createVeth({ host: `ovh${id.slice(0, 12)}`, container: `ovc${id.slice(0, 12)}`, mtu: 1450, alias: `ovsnet:${id}` });
    await ovs.addPort('br0', `ovh${id.slice(0, 12)}`, { tag: 1, externalIds: { 'ovsnet-network': NET, 'ovsnet-endpoint': id } });
  }
  // A veth left over with no port at all (ovsnet stopped while deleting it in the background).
  await links.createVeth({ host: 'ovheeeeeeeeeeee', container: 'ovceeeeeeeeeeee', mtu: 1450, alias: `ovsnet:${'e'.repeat(64)}` });
  // A gateway port of a network the store no longer has.
  await ovs.addPort('br0', 'ovgbbbbbbbbbbbb', {
    tag: 2,
    type: 'internal',
    externalIds: { 'ovsnet-network': GONE_NET, 'ovsnet-role': 'gateway' },
  });
  // Not ovsnet's: a port without its external_ids, and a link outside its names.
  await ovs.addPort('br0', 'uplink0', { tag: 0, externalIds: {} });
  await links.createVeth({ host: 'eth9', container: 'eth10', mtu: 1500 });
  // Named like ovsnet's veths, but not made by ovsnet (no alias): never deleted by its name alone.
  await links.createVeth({ host: 'ovh123', container: 'ovc123', mtu: 1500 });
  const res = await reconciler.reconcile();
  await ovs.waitApplied(); // ovs-vswitchd then removes the device of the gateway port deleted
  t.same(res, { repaired: [], removed: ['ovhdddddddddddd', 'ovgbbbbbbbbbbbb', 'ovheeeeeeeeeeee'] });
  t.same([...ovs.ports.keys()].sort(), ['ovhcccccccccccc', 'uplink0'], "the existing endpoint's port stays, and what is not ovsnet's");
  t.same(
    [...links.names].sort(),
    ['eth10', 'eth9', 'ovc123', 'ovccccccccccccc', 'ovh123', 'ovhcccccccccccc'],
    "the existing endpoint's veth stays, and the host's own ovh123",
  );
  t.ok(await records.endpoint(NET, EP), 'its record too');
});

t.test('an endpoint whose port stayed but whose veth is gone loses its port and its record', async (t) => {
  const { ovs, records, reconciler, store } = setup(t);
  await records.createNetwork(internalNetwork());
  await records.createEndpoint(endpoint(EP));
  await ovs.ensureBridge('br0', 'system', 'standalone');
  await ovs.addPort('br0', 'ovhcccccccccccc', { tag: 1, externalIds: { 'ovsnet-network': NET, 'ovsnet-endpoint': EP } });
  t.same((await reconciler.reconcile()).removed, ['ovhcccccccccccc (stale endpoint cccccccccccc)']);
  t.equal(ovs.ports.size, 0);
  t.equal(await store.get(keys.endpoint(NET, EP)), undefined);
});

t.test("orphan VLAN tags are freed: this host's held by no network; held ones and other hosts' stay", async (t) => {
  const { records, reconciler, store } = setup(t);
  await records.createNetwork(internalNetwork());
  t.equal(await claimTag(store, 'h1', NET, 1), 1);
  t.equal(await claimTag(store, 'h1', GONE_NET, 5), 5);
  t.equal(await claimTag(store, 'h2', GONE_NET, 6), 6);
  t.same((await reconciler.reconcile()).removed, ['VLAN tag 5 of no network']);
  t.equal((await store.get(keys.vlanTag('h1', 1)))?.value, NET, "the network's tag stays");
  t.equal(await store.get(keys.vlanTag('h1', 5)), undefined, 'the orphan is free');
  t.equal((await store.get(keys.vlanTag('h2', 6)))?.value, GONE_NET, "another host's tag is that host's business");
});

t.test(
  "a logical network: membership taken again, guard flows put back with the bridge's flows; a sync repairs only what is lost",
  async (t) => {
    const { ovs, flows, deps, records, store } = setup(t);
    const openflow = fakeOpenFlow(ovs);
    const driver = new NetworkDriver({ ...deps, openflow });
    await records.createNetwork(network({ logical: 'blue', vni: 42 }));
    const res = await driver.reconcile();
    t.same(res.repaired, ['bridge br0', 'member of logical network blue', `gateway ${GW}`, '2 OpenFlow changes']);
    t.match((await readLogical(store, 'blue'))?.record, { vni: 42, subnets: ['10.1.0.0/24'], members: { h1: { networkId: NET } } });
    t.equal(ovs.failModes.get('br0'), 'secure', 'with OpenFlow access the bridge is made secure');
    const guard = guardFlows({ vni: 42 }, ['10.1.0.1']);
    t.same(openflow.flowsOf('br0').sort(), [...BASE_FLOWS, ...guard].sort(), 'the base flow, and the gateway guard');
    t.equal(flows.guards.size, 0, 'by the sync, not flow by flow');
    t.equal((await driver.upkeep.syncFlows()).modifications, 0, 'all there: nothing to repair');
    openflow.restart(); // ovs-vswitchd restarted
    const synced = await driver.upkeep.syncFlows();
    t.match(synced, { modifications: 3, flows: 3, meters: 0 }, 'the base flow and both guard flows put back');
    t.same(openflow.flowsOf('br0').sort(), [...BASE_FLOWS, ...guard].sort());
    openflow
      .flowsOf('br0')
      .filter((f) => f.includes('arp_spa'))
      .forEach((f) => openflow.flows.get('br0')?.delete(f));
    t.equal((await driver.upkeep.syncFlows()).modifications, 1, 'one guard flow deleted by hand: that one only');
    t.notOk((await driver.reconcile()).repaired.includes('member of logical network blue'), 'a member already is not joined again');
  },
);

t.test("an earlier ovsnet's standalone bridge is made secure at reconcile, its flows in straight after", async (t) => {
  const { ovs, deps, records } = setup(t);
  const openflow = fakeOpenFlow(ovs);
  const driver = new NetworkDriver({ ...deps, openflow });
  await records.createNetwork(network({ logical: 'blue', vni: 42 }));
  await ovs.ensureBridge('br0', 'system', 'standalone');
  openflow.add('br0', 'priority=5,ip,nw_dst=1.2.3.4,actions=drop'); // another controller's
  const res = await driver.reconcile();
  t.ok(res.repaired.includes('fail_mode=secure on br0'));
  t.equal(ovs.failModes.get('br0'), 'secure');
  t.same(
    openflow.flowsOf('br0').sort(),
    [...BASE_FLOWS, ...guardFlows({ vni: 42 }, ['10.1.0.1'])].sort(),
    "ovsnet's flows back after the fail-mode change flushed the bridge",
  );
  t.notOk(
    res.repaired.some((r) => r.endsWith('OpenFlow changes')),
    'the sync after it found nothing to change',
  );
  t.same((await driver.reconcile()).repaired, [], 'a secure bridge is left as it is');
});

t.test('a standalone bridge with endpoints stays so until ovs-vswitchd is away: no flush under running containers', async (t) => {
  const { ovs, deps, records } = setup(t);
  const openflow = fakeOpenFlow(ovs);
  const driver = new NetworkDriver({ ...deps, openflow });
  await records.createNetwork(network());
  await records.createEndpoint(endpoint(EP));
  await ovs.ensureBridge('br0', 'system', 'standalone');
  const res = await driver.reconcile();
  t.notOk(res.repaired.includes('fail_mode=secure on br0'), 'not switched under a running endpoint');
  t.equal(ovs.failModes.get('br0'), 'standalone');
  t.ok(openflow.flowsOf('br0').includes(BASE_FLOWS[0] ?? ''), "ovsnet's flows are in all the same");
  t.equal(await driver.upkeep.onVswitchdAway(), true, 'made secure while ovs-vswitchd is away');
  t.equal(ovs.failModes.get('br0'), 'secure');
  t.equal(await driver.upkeep.onVswitchdAway(), false, 'once');
});

t.test('after ovs-vswitchd restarted: the flows first, in one sync, then reconcile puts the gateway address back', async (t) => {
  const { ovs, links, deps, records } = setup(t);
  const openflow = fakeOpenFlow(ovs);
  const driver = new NetworkDriver({ ...deps, openflow });
  await records.createNetwork(network({ logical: 'blue', vni: 42 }));
  await driver.reconcile();
  openflow.restart(); // no flows or meters kept
  links.addresses.delete(GW); // the userspace datapath makes its internal ports anew, without their addresses
  const flowsWhenAddressed: number[] = [];
  const configure = links.configureAddress.bind(links);
  links.configureAddress = (...args) => (flowsWhenAddressed.push(openflow.flowsOf('br0').length), configure(...args));
  const writes = openflow.writes;
  const r = await driver.upkeep.afterOvsRestart();
  t.match(r.synced, { modifications: 3, flows: 3, meters: 0 });
  t.ok(r.flowsSeconds >= 0);
  t.equal(openflow.writes, writes + 1, 'one write');
  t.same(links.addresses.get(GW), ['10.1.0.1/24'], 'the gateway address back');
  t.same(flowsWhenAddressed, [3], 'the flows were in before reconcile ran');
});
