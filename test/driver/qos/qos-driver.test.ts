/**
 * The driver's QoS steps against in-memory OVS and OpenFlow: applied at Join with what applies
 * to the endpoint, removed at DeleteEndpoint, undone when Join fails, put back by reconcile and
 * the periodic check, refused where no QoS can be enforced.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { NetworkDriver } from '../../../src/driver/network-driver.js';
import type { QosApi } from '../../../src/driver/effects/deps.js';
import type { Qos } from '../../../src/driver/model/qos-options.js';
import type { QosState } from '../../../src/driver/ovs/qos-flows.js';
import { qosFlows } from '../../../src/driver/ovs/qos-flows.js';
import { createLogger } from '../../../src/lib/log.js';
import { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import { fakeSideEffects } from '../../helpers/driver-fakes.js';
import { EP, NET, ep, net } from '../../helpers/driver-setup.js';

/** OpenFlow as ovs-vswitchd keeps it: ports numbered as OVS adds them, meters and flows by port. */
class FakeQos implements QosApi {
  readonly applied = new Map<number, Qos>();
  failApply = false;
  failState = false;
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
  async state(): Promise<QosState> {
    if (this.failState) throw new Error('ovs-ofctl dump-meters failed');
    const flows = new Map([...this.applied].map(([p, q]) => [p, qosFlows(p, q).length]));
    return { flows, meters: new Set([...this.applied].filter(([, q]) => q.rateKbps !== undefined).map(([p]) => p)) };
  }
}

function setup(t: Test, withQos = true) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-qos-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const store = new SqliteStore({ file: path.join(dir, 'state.db') });
  t.teardown(() => store.close());
  const fx = fakeSideEffects();
  const qos = new FakeQos(() => [...fx.ovs.ports.keys()]);
  const driver = new NetworkDriver({
    store,
    log: createLogger('silent'),
    ...fx,
    ...(withQos ? { qos } : {}),
    host: 'h1',
    bridge: 'br0',
    datapath: () => 'netdev',
  });
  return { driver, qos, ...fx };
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

t.test('reconcile and the periodic check put lost QoS back, and remove QoS of no endpoint', async (t) => {
  const { driver, qos, ovs } = setup(t);
  await driver.createNetwork(net(NET));
  await driver.createEndpoint({ ...ep(), options: { 'ovsnet.bandwidth': '20mbit' } });
  await driver.join(NET, EP);
  const ofport = [...ovs.ports.keys()].indexOf(`ovh${EP.slice(0, 12)}`) + 1;
  qos.applied.clear(); // ovs-vswitchd restarted
  t.same(await driver.checkGuards(), [`QoS of ovh${EP.slice(0, 12)}`]);
  t.same(qos.applied.get(ofport), { rateKbps: 20_000, burstKbit: 10_000 });
  t.same(await driver.checkGuards(), [], 'nothing to do when all is there');
  qos.applied.set(99, { dscp: 1 }); // a leftover of an endpoint gone while ovsnet was down
  qos.applied.delete(ofport);
  const { repaired } = await driver.reconcile();
  t.ok(repaired.includes('QoS of OpenFlow port 99 (no endpoint)'));
  t.ok(repaired.includes(`QoS of ovh${EP.slice(0, 12)}`));
  t.same([...qos.applied.keys()], [ofport]);
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

t.test('reconcile goes on when QoS cannot be read (ovs-ofctl missing, OpenFlow13 not allowed)', async (t) => {
  const { driver, qos } = setup(t);
  await driver.createNetwork(net(NET));
  qos.failState = true;
  const { repaired } = await driver.reconcile();
  t.same(repaired, [], 'the rest of reconcile ran and answered');
});
