/**
 * What a crash leaves of a network, swept by DeleteNetwork (Reconciler.sweepNetwork) and by a
 * DeleteEndpoint without a record: only what ovsnet marked as the network's or as an endpoint's
 * without a record; another network's and what ovsnet never marked stay.
 */
import t from 'tap';
import { endpointIds } from '../../src/driver/ovs/external-ids.js';
import { keys } from '../../src/store/keys.js';
import { EP, NET, NET2, ep, net, setup } from '../helpers/driver-setup.js';

const FORGOTTEN = EP; // Docker's DeleteEndpoint lost to a restart: the record, port and veth stayed
const NO_RECORD = 'd'.repeat(64); // a port and veth marked as NET's, the record gone already
const NO_PORT = 'e'.repeat(64); // a veth of a Join cut short before its port, no record
const OTHER = 'f'.repeat(64); // a live endpoint of NET2
const short = (id: string) => id.slice(0, 12);

t.test("DeleteNetwork removes the network's leftover ports, veths and published ports; nothing of others", async (t) => {
  const { store, ovs, links, nat, hostPorts, driver } = setup(t);
  await driver.createNetwork(net(NET));
  await driver.createNetwork(net(NET2, {}, '10.2.0.0/24'));
  const portmap = [{ proto: 'tcp' as const, containerPort: 80, hostIp: '', hostPort: 8080, hostPortEnd: 8080 }];
  await driver.createEndpoint({ ...ep(), portmap });
  await driver.join(NET, FORGOTTEN);
  await driver.programExternalConnectivity(NET, FORGOTTEN, portmap);
  await driver.createEndpoint({ ...ep(), networkId: NET2, endpointId: OTHER, address: '10.2.0.5/24' });
  await driver.join(NET2, OTHER);
  await links.createVeth({ host: `ovh${short(NO_RECORD)}`, container: `ovc${short(NO_RECORD)}`, mtu: 1500, alias: `ovsnet:${NO_RECORD}` });
  await ovs.addPort('br0', `ovh${short(NO_RECORD)}`, { tag: 1, externalIds: endpointIds(NET, NO_RECORD) });
  await links.createVeth({ host: `ovh${short(NO_PORT)}`, container: `ovc${short(NO_PORT)}`, mtu: 1500, alias: `ovsnet:${NO_PORT}` });
  // Not ovsnet's: a port without its marks, links without its alias (one named like its veths).
  await ovs.addPort('br0', 'uplink0', { tag: 0, externalIds: {} });
  await links.createVeth({ host: 'ovh123456789ab', container: 'ovc123456789ab', mtu: 1500 });

  await driver.deleteNetwork(NET);
  t.same(
    [...ovs.ports.keys()].sort(),
    ['ovgbbbbbbbbbbbb', `ovh${short(OTHER)}`, 'uplink0'],
    "NET's gateway and endpoint ports are gone; NET2's and the unmarked port stay",
  );
  t.same(
    [...links.names].sort(),
    ['ovc123456789ab', `ovc${short(OTHER)}`, 'ovgbbbbbbbbbbbb', 'ovh123456789ab', `ovh${short(OTHER)}`],
    "NET's veths are gone (with a port, without one, with a record, without); NET2's and the unaliased one stay",
  );
  t.notOk(nat.ports.has(FORGOTTEN), "the forgotten endpoint's port rules are gone");
  t.notOk(hostPorts.held.has(FORGOTTEN), 'and its host port is free');
  t.same((await store.list(keys.endpoints(NET))).kvs, [], 'no endpoint record of NET');
  t.ok(await store.get(keys.endpoint(NET2, OTHER)), "NET2's endpoint record stays");

  await driver.deleteNetwork(NET);
  t.equal(ovs.ports.size, 3, 'DeleteNetwork again: nothing more to do, no error');
});

t.test('DeleteNetwork sweeps even when a port cannot be removed: logged, the Docker call succeeds', async (t) => {
  const { ovs, links, driver } = setup(t);
  await driver.createNetwork(net(NET));
  await links.createVeth({ host: `ovh${short(NO_RECORD)}`, container: `ovc${short(NO_RECORD)}`, mtu: 1500, alias: `ovsnet:${NO_RECORD}` });
  await ovs.addPort('br0', `ovh${short(NO_RECORD)}`, { tag: 1, externalIds: endpointIds(NET, NO_RECORD) });
  ovs.failNext('deletePort'); // the gateway's removal fails (best effort), the sweep still runs
  await driver.deleteNetwork(NET);
  t.notOk(ovs.ports.has(`ovh${short(NO_RECORD)}`), 'the leftover port is gone');
  t.notOk(links.names.has(`ovh${short(NO_RECORD)}`), 'and its veth');
});

t.test('DeleteEndpoint without a record removes the veth carrying its alias, and its marked port', async (t) => {
  const { ovs, links, driver } = setup(t);
  await driver.createNetwork(net(NET));
  await links.createVeth({ host: `ovh${short(NO_PORT)}`, container: `ovc${short(NO_PORT)}`, mtu: 1500, alias: `ovsnet:${NO_PORT}` });
  await links.createVeth({ host: `ovh${short(NO_RECORD)}`, container: `ovc${short(NO_RECORD)}`, mtu: 1500, alias: `ovsnet:${NO_RECORD}` });
  await driver.deleteEndpoint(NET, NO_PORT);
  t.notOk(links.names.has(`ovh${short(NO_PORT)}`), "the veth of a Join cut short before its port goes with Docker's DeleteEndpoint");
  t.ok(links.names.has(`ovh${short(NO_RECORD)}`), "another endpoint's veth stays");
  t.ok(ovs.ports.has('ovgaaaaaaaaaaaa'), 'and the gateway');
});

t.test(
  "DeleteNetwork removes a forgotten endpoint's veth left unmarked by a Join cut short; a link of that name marked as another's stays",
  async (t) => {
    const { links, driver } = setup(t);
    await driver.createNetwork(net(NET));
    await driver.createEndpoint(ep());
    // A Join killed between creating the pair and marking it: the kernel ignores an alias in the
    // create message, so for a moment the pair carries none.
    await links.createVeth({ host: `ovh${short(FORGOTTEN)}`, container: `ovc${short(FORGOTTEN)}`, mtu: 1500 });
    await driver.createNetwork(net(NET2, {}, '10.2.0.0/24'));
    await driver.createEndpoint({ ...ep(), networkId: NET2, endpointId: OTHER, address: '10.2.0.5/24' }); // live, another network
    await driver.createEndpoint({ ...ep(), endpointId: NO_RECORD, address: '10.1.0.9/24' });
    await links.createVeth({ host: `ovh${short(NO_RECORD)}`, container: `ovc${short(NO_RECORD)}`, mtu: 1500, alias: `ovsnet:${OTHER}` });
    await driver.deleteNetwork(NET);
    t.notOk(links.names.has(`ovh${short(FORGOTTEN)}`), 'the unmarked pair its record names is gone');
    t.notOk(links.names.has(`ovc${short(FORGOTTEN)}`), 'both ends');
    t.ok(links.names.has(`ovh${short(NO_RECORD)}`), "a link of the recorded name carrying another endpoint's alias stays");
  },
);
