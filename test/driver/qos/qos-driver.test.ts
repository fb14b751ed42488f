/**
 * The driver's QoS steps against in-memory OVS and OpenFlow: applied at Join with what applies
 * to the endpoint, removed at DeleteEndpoint, undone when Join fails, put back with the bridge's
 * flows by reconcile and the periodic sync, refused where no QoS can be enforced.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { NetworkDriver } from '../../../src/driver/network-driver.js';
import type { QosApi } from '../../../src/driver/effects/deps.js';
import type { Qos } from '../../../src/driver/model/qos-options.js';
import { meterId, meterSpec, qosCookie, qosFlows } from '../../../src/driver/ovs/qos-flows.js';
import { createLogger } from '../../../src/lib/log.js';
import { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import { fakeOpenFlow, fakeSideEffects } from '../../helpers/driver-fakes.js';
import { EP, NET, ep, net } from '../../helpers/driver-setup.js';

/** OpenFlow as ovs-vswitchd keeps it: ports numbered as OVS adds them, meters and flows by port. */
class FakeQos implements QosApi {
  readonly applied = new Map<number, Qos>();
  failApply = false;
  constructor(private readonly ports: () => string[]) {}
  async ofports(): Promise<Map<string, number>> {
    return new Map(this.ports().map((p, i) => [p, i + 1]));
  }
  async apply(_bridge: string, ofport: number, qos: Qos): Promise<void> {
    if (this.failApply) throw new Error('ovs-ofctl add-meter failed');
    this.applied.set(ofport, qos);
  }
  async remove(_bridge: string, ofport: number): Promise<void> {
    this.applied.delete(ofport);
  }
}

function setup(t: Test, withQos = true) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-qos-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const store = new SqliteStore({ file: path.join(dir, 'state.db') });
  t.teardown(() => store.close());
  const fx = fakeSideEffects();
  const qos = new FakeQos(() => [...fx.ovs.ports.keys()]);
  const openflow = fakeOpenFlow(fx.ovs);
  const driver = new NetworkDriver({
    store,
    log: createLogger('silent'),
    ...fx,
    ...(withQos ? { qos } : {}),
    openflow,
    host: 'h1',
    bridge: 'br0',
    datapath: () => 'netdev',
  });
  return { driver, qos, openflow, ...fx };
}

const generic = (o: Record<string, string>) => ({ 'com.docker.network.generic': o });

t.test("Join applies the network's QoS under the endpoint's own values; DeleteEndpoint removes it", async (t) => {
  const { driver, qos, ovs } = setup(t);
  await driver.createNetwork(net(NET, generic({ 'ovsnet.bandwidth': '50mbit', 'ovsnet.dscp': '10' })));
  await driver.createEndpoint({ ...ep(), options: { 'ovsnet.dscp': '46', 'com.docker.network.portmap': [] } });
  const { srcName } = await driver.join(NET, EP);
  t.ok(srcName);
  const ofport = [...ovs.ports.keys()].indexOf(`ovh${EP.slice(0, 12)}`) + 1;
  t.same(qos.applied.get(ofport), { rateKbps: 50_000, burstKbit: 25_000, dscp: 46 });
  await driver.deleteEndpoint(NET, EP);
  t.equal(qos.applied.size, 0, 'meter and flows gone with the endpoint');
});

t.test('a network without QoS and an endpoint without options: nothing applied', async (t) => {
  const { driver, qos } = setup(t);
  await driver.createNetwork(net(NET));
  await driver.createEndpoint(ep());
  await driver.join(NET, EP);
  t.equal(qos.applied.size, 0);
});

t.test('a Join whose QoS fails leaves no port, veth or meter', async (t) => {
  const { driver, qos, ovs, links } = setup(t);
  await driver.createNetwork(net(NET));
  await driver.createEndpoint({ ...ep(), options: { 'ovsnet.bandwidth': '20mbit' } });
  qos.failApply = true;
  await t.rejects(driver.join(NET, EP), /add-meter failed/);
  t.notOk(ovs.ports.has(`ovh${EP.slice(0, 12)}`), 'no port');
  t.notOk(await links.exists(`ovh${EP.slice(0, 12)}`), 'no veth');
  t.equal(qos.applied.size, 0);
});

t.test('reconcile and the periodic sync put lost QoS back, and remove QoS of no endpoint', async (t) => {
  const { driver, openflow, ovs } = setup(t);
  await driver.createNetwork(net(NET));
  await driver.createEndpoint({ ...ep(), options: { 'ovsnet.bandwidth': '20mbit' } });
  await driver.join(NET, EP);
  const ofport = [...ovs.ports.keys()].indexOf(`ovh${EP.slice(0, 12)}`) + 1;
  const qos = { rateKbps: 20_000, burstKbit: 10_000 };
  const own = { value: BigInt(qosCookie(0)), mask: 0xffffn << 48n };
  await driver.upkeep.syncFlows();
  t.same(openflow.flowsOf('br0', own), qosFlows(ofport, qos), "the endpoint's QoS flows");
  t.same([...openflow.metersOf('br0')], [[meterId(ofport), meterSpec(ofport, qos)]], 'and its meter');
  openflow.restart(); // ovs-vswitchd restarted
  const synced = await driver.upkeep.syncFlows();
  t.match(synced, { flows: 1 + qosFlows(ofport, qos).length, meters: 1 }, 'the base flow, the QoS flows and the meter wanted');
  t.equal(synced.modifications, 1 + qosFlows(ofport, qos).length + 1, 'all of them put back');
  t.same(openflow.flowsOf('br0', own), qosFlows(ofport, qos));
  t.same([...openflow.metersOf('br0').keys()], [meterId(ofport)]);
  t.equal((await driver.upkeep.syncFlows()).modifications, 0, 'nothing to do when all is there');
  // Leftovers of an endpoint gone while ovsnet was down, and a meter of another controller.
  openflow.add('br0', ...qosFlows(99, { dscp: 1 }));
  openflow.meters.get('br0')?.set(meterId(99), meterSpec(99, qos) ?? '');
  openflow.meters.get('br0')?.set(7, 'meter=7,kbps,bands=type=drop,rate=1');
  openflow.meters.get('br0')?.delete(meterId(ofport));
  const { repaired } = await driver.reconcile();
  t.ok(repaired.includes('4 OpenFlow changes'), `the leftover flows (2) and meter, and the lost meter: ${repaired.join(', ')}`);
  t.same(openflow.flowsOf('br0', own), qosFlows(ofport, qos), "only the live endpoint's QoS flows");
  t.same(
    [...openflow.metersOf('br0').keys()].sort((a, b) => a - b),
    [7, meterId(ofport)],
    "its meter back, another controller's kept",
  );
});

t.test('bad endpoint options and QoS without OpenFlow access are refused, recording nothing', async (t) => {
  const { driver } = setup(t);
  await driver.createNetwork(net(NET));
  await t.rejects(driver.createEndpoint({ ...ep(), options: { 'ovsnet.dscp': '99' } }), {
    code: 'NETWORK_OPTION_INVALID',
    message: /^--driver-opt ovsnet\.dscp=99 is not valid: expected the DSCP value \(0-63\)/,
  });
  await t.rejects(driver.join(NET, EP), { code: 'ENDPOINT_NOT_FOUND' });
  const bare = setup(t, false);
  await t.rejects(bare.driver.createNetwork(net(NET, generic({ 'ovsnet.dscp': '46' }))), {
    code: 'NETWORK_OPTION_INVALID',
    message: /without QoS/,
  });
});

t.test('reconcile repairs OVS and the kernel even when the OpenFlow sync fails (ovs-ofctl missing, OpenFlow14 not allowed)', async (t) => {
  const { driver, openflow, links } = setup(t);
  await driver.createNetwork(net(NET));
  const gateway = [...links.names].find((l) => l.startsWith('ovg')) ?? '';
  await links.deleteLink(gateway);
  openflow.failNext('sync');
  const res = await driver.reconcile();
  t.ok(await links.exists(gateway), 'the rest of reconcile ran: the gateway is back');
  t.ok(
    res.repaired.some((r) => r.startsWith('gateway')),
    'and says so',
  );
  t.notOk(
    res.repaired.some((r) => r.endsWith('OpenFlow changes')),
    'the sync failed: logged, nothing claimed',
  );
  t.equal((await driver.upkeep.syncFlows()).modifications, 0, 'the next sync (the periodic check) finds all in place');
});
