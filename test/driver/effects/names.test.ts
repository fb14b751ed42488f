/**
 * Interface names never shared by two live endpoints or networks, though Docker IDs may share
 * their first 12 characters (all a 15-character interface name holds); every step after the
 * choice uses the record's names, and a delete never removes another endpoint's link by a
 * derived name.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { NetworkDriver } from '../../../src/driver/network-driver.js';
import { names } from '../../../src/driver/model/records.js';
import { createLogger } from '../../../src/lib/log.js';
import { keys } from '../../../src/store/keys.js';
import { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import { fakeSideEffects } from '../../helpers/driver-fakes.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-names-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
let n = 0;

function setup(t: Test) {
  const store = new SqliteStore({ file: path.join(dir, `n${n++}.db`) });
  t.teardown(() => store.close());
  const fx = fakeSideEffects();
  const driver = new NetworkDriver({ store, log: createLogger('silent'), ...fx, host: 'h1', bridge: 'br0', datapath: () => 'netdev' });
  return { store, driver, ...fx };
}

const PREFIX = '0123456789ab';
const NET_A = `${PREFIX}${'a'.repeat(52)}`;
const NET_B = `${PREFIX}${'b'.repeat(52)}`;
const EP_A = `${PREFIX}${'c'.repeat(52)}`;
const EP_B = `${PREFIX}${'d'.repeat(52)}`;
const net = (id: string, subnet: string) => ({
  networkId: id,
  options: {},
  ipv4: [{ pool: `${subnet}.0/24`, gateway: `${subnet}.1/24` }],
  ipv6: [],
});
const ep = (id: string, address: string) => ({ networkId: NET_A, endpointId: id, address, addressV6: '', mac: '', portmap: [] });

t.test('two networks whose IDs share 12 characters get two gateway ports', async (t) => {
  const { driver, ovs, nat } = setup(t);
  await driver.createNetwork(net(NET_A, '10.1.0'));
  await driver.createNetwork(net(NET_B, '10.2.0'));
  const [a, b] = await driver.localNetworks().then((l) => [NET_A, NET_B].map((id) => l.find((r) => r.networkId === id)?.gatewayPort));
  t.equal(a, `ovg${PREFIX}`, 'the first keeps the usual name');
  t.not(b, a, 'the second gets another');
  t.equal(b, names.gateway(NET_B, 1));
  t.match(ovs.ports.get(b ?? ''), { externalIds: { 'ovsnet-network': NET_B } });
  t.equal(nat.networks.get(NET_B), `10.2.0.0/24 via ${b ?? ''}`, 'its rules name its own port, so isolation holds');
  await driver.deleteNetwork(NET_B);
  t.ok(ovs.ports.has(a ?? ''), "removing the second leaves the first's gateway");
});

t.test('two endpoints whose IDs share 12 characters: two veths, neither replaced nor deleted by the other', async (t) => {
  const { driver, links, ovs, store } = setup(t);
  await driver.createNetwork(net(NET_A, '10.1.0'));
  await driver.createEndpoint(ep(EP_A, '10.1.0.5/24'));
  await driver.createEndpoint(ep(EP_B, '10.1.0.6/24'));
  const a = await driver.join(NET_A, EP_A);
  const b = await driver.join(NET_A, EP_B);
  t.equal(a.srcName, `ovc${PREFIX}`);
  t.not(b.srcName, a.srcName, 'the second endpoint gets its own container end');
  t.equal(b.srcName, names.containerVeth(EP_B, 1));
  t.ok(links.names.has(`ovh${PREFIX}`) && links.names.has(names.hostVeth(EP_B, 1)), 'both host ends exist');
  t.equal(links.aliases.get(`ovh${PREFIX}`), `ovsnet:${EP_A}`, 'the first is still the first endpoint’s');
  t.match(ovs.ports.get(names.hostVeth(EP_B, 1)), { externalIds: { 'ovsnet-endpoint': EP_B } });
  const record = JSON.parse((await store.get(keys.endpoint(NET_A, EP_B)))?.value ?? '{}') as Record<string, unknown>;
  t.match(record, { hostVeth: names.hostVeth(EP_B, 1), containerVeth: names.containerVeth(EP_B, 1), host: 'h1' }, 'kept in its record');
  t.match(await driver.endpointInfo(NET_A, EP_B), { port: names.hostVeth(EP_B, 1) });

  await driver.join(NET_A, EP_B); // Docker does not repeat Join, but a repeat keeps the names
  t.equal(links.aliases.get(`ovh${PREFIX}`), `ovsnet:${EP_A}`);

  // An endpoint with no record (deleted already, or never this host's) sharing the prefix:
  // its DeleteEndpoint must not take the first endpoint's veth by the derived name.
  await driver.deleteEndpoint(NET_A, `${PREFIX}${'e'.repeat(52)}`);
  await driver.deleteEndpoint(NET_A, EP_B);
  await driver.settled();
  t.ok(links.names.has(`ovh${PREFIX}`) && ovs.ports.has(`ovh${PREFIX}`), "the first endpoint's veth and port stay");
  t.notOk(links.names.has(names.hostVeth(EP_B, 1)) || ovs.ports.has(names.hostVeth(EP_B, 1)), "the second's went");
});

t.test('a Join whose names are free looks no link up; one whose names are held looks up only then', async (t) => {
  const { driver, links } = setup(t);
  await driver.createNetwork(net(NET_A, '10.1.0'));
  await driver.createEndpoint(ep(EP_A, '10.1.0.5/24'));
  const before = links.lookups;
  t.equal((await driver.join(NET_A, EP_A)).srcName, `ovc${PREFIX}`);
  t.equal(links.lookups, before, 'the free names were created as they are');
  await driver.createEndpoint(ep(EP_B, '10.1.0.6/24'));
  t.equal((await driver.join(NET_A, EP_B)).srcName, names.containerVeth(EP_B, 1));
  t.ok(links.lookups > before, 'the held name was looked up to choose the next');
});

t.test("a Join repeated after a crash replaces the endpoint's own leftover, and only its own", async (t) => {
  const { driver, links, ovs } = setup(t);
  await driver.createNetwork(net(NET_A, '10.1.0'));
  await driver.createEndpoint(ep(EP_A, '10.1.0.5/24'));
  await driver.join(NET_A, EP_A);
  ovs.ports.delete(`ovh${PREFIX}`); // as if ovsnet died between the veth and the port
  t.equal((await driver.join(NET_A, EP_A)).srcName, `ovc${PREFIX}`, 'the same names: the leftover was its own');
  t.ok(ovs.ports.has(`ovh${PREFIX}`) && links.peers.get(`ovh${PREFIX}`) === `ovc${PREFIX}`);
});

t.test("a host link that is not ovsnet's holds the usual name: the endpoint takes the next", async (t) => {
  const { driver, links } = setup(t);
  await driver.createNetwork(net(NET_A, '10.1.0'));
  await links.createVeth({ host: `ovh${PREFIX}`, container: 'someone0', mtu: 1500 });
  await driver.createEndpoint(ep(EP_A, '10.1.0.5/24'));
  const joined = await driver.join(NET_A, EP_A);
  t.equal(joined.srcName, names.containerVeth(EP_A, 1));
  t.ok(links.names.has(`ovh${PREFIX}`) && links.names.has('someone0'), "the host's link is left alone");
});
