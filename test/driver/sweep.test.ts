/**
 * What a crash leaves of a network, swept by DeleteNetwork (Reconciler.sweepNetwork) and by a
 * DeleteEndpoint without a record: only what ovsnet marked as the network's or as an endpoint's
 * without a record; another network's and what ovsnet never marked stay. And an unmarked pair a
 * record names (a Join killed before marking it), removed before that record goes.
 */
import t from 'tap';
import { endpointIds } from '../../src/driver/ovs/external-ids.js';
import { NetworkDriver } from '../../src/driver/network-driver.js';
import { createLogger } from '../../src/lib/log.js';
import { keys } from '../../src/store/keys.js';
import type { Store, TxnRequest } from '../../src/store/types.js';
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

/**
 * `o` in a process that dies once `dead()` says so: from then on none of its calls answers.
 * `own` replaces some of its methods.
 */
function until<T extends object>(o: T, dead: () => boolean, own: Partial<T> = {}): T {
  return new Proxy(o, {
    get: (target, prop) => {
      const v: unknown = prop in own ? own[prop as keyof T] : Reflect.get(target, prop, target);
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => (dead() ? new Promise(() => undefined) : (v as (...a: unknown[]) => unknown).apply(target, args));
    },
  });
}

t.test(
  'a Join killed before marking its pair, then its DeleteEndpoint killed once the record is gone: nothing of it is left, without a lookup more when plugged',
  async (t) => {
    const { store, ovs, links, nat, flows, hostPorts, driver } = setup(t);
    await driver.createNetwork(net(NET));
    await driver.createEndpoint(ep());
    // The first ovsnet is killed in Join between creating the pair and marking it (the kernel
    // ignores an alias in the create message, so for a moment the pair carries none).
    await links.createVeth({ host: `ovh${short(EP)}`, container: `ovc${short(EP)}`, mtu: 1500 });
    await links.createVeth({ host: 'ovh123456789ab', container: 'ovc123456789ab', mtu: 1500 }); // not ovsnet's

    // The second gets Docker's DeleteEndpoint (its rollback of the failed Join) and is killed as
    // the transaction deleting the record commits: nothing it started after that happens.
    let dead = false;
    const record = keys.endpoint(NET, EP);
    const txn = async (req: TxnRequest) => {
      const res = await store.txn(req);
      if (res.succeeded && req.success.some((op) => op.type === 'delete' && op.key === record)) dead = true;
      return res;
    };
    const alive = <T extends object>(o: T, own: Partial<T> = {}) => until(o, () => dead, own);
    const killed = new NetworkDriver({
      store: alive<Store>(store, { txn }),
      ...{ ovs: alive(ovs), links: alive(links), nat: alive(nat), flows: alive(flows), hostPorts: alive(hostPorts) },
      ...{ log: createLogger('silent'), host: 'h1', bridge: 'br0', datapath: () => 'netdev' as const },
    });
    void killed.deleteEndpoint(NET, EP);
    for (let i = 0; i < 100 && !dead; i++) await new Promise((r) => setTimeout(r, 5));
    t.ok(dead, 'the record was deleted, and that ovsnet died');

    // Docker's retry of the broken call has no body and is refused: it forgets the endpoint.
    // The third ovsnet removes the network, and reconciles.
    const third = new NetworkDriver({
      store,
      ovs,
      links,
      nat,
      flows,
      hostPorts,
      log: createLogger('silent'),
      host: 'h1',
      bridge: 'br0',
      datapath: () => 'netdev',
    });
    await third.deleteNetwork(NET);
    await third.reconcile();
    t.notOk(links.names.has(`ovh${short(EP)}`), 'the unmarked pair the record named is gone');
    t.notOk(links.names.has(`ovc${short(EP)}`), 'both ends');
    t.ok(links.names.has('ovh123456789ab'), 'an unmarked pair no record named stays');

    // A plugged endpoint's DeleteEndpoint looks no link up: its veth carries the alias.
    await third.createNetwork(net(NET));
    await third.createEndpoint(ep());
    await third.join(NET, EP);
    const lookups = links.lookups;
    await third.deleteEndpoint(NET, EP);
    await third.settled();
    t.equal(links.lookups, lookups, 'no link lookup in the DeleteEndpoint of a plugged endpoint');
    t.notOk(links.names.has(`ovh${short(EP)}`), 'and its veth is gone');
  },
);

t.test(
  "DeleteEndpoint removes its port only when OVS marks it as the endpoint's: another's port of that name, and its veth, stay",
  async (t) => {
    const { store, ovs, links, driver } = setup(t);
    await driver.createNetwork(net(NET));
    await driver.createEndpoint(ep()); // recorded with host veth ovhcccccccccccc, never joined
    // That name held by another endpoint (a name derived from an ID's first digits can repeat).
    await links.createVeth({ host: 'ovhcccccccccccc', container: 'ovcother', mtu: 1500, alias: `ovsnet:${OTHER}` });
    await ovs.addPort('br0', 'ovhcccccccccccc', { tag: 1, externalIds: endpointIds(NET, OTHER) });
    await driver.deleteEndpoint(NET, EP);
    await driver.settled();
    t.match(ovs.ports.get('ovhcccccccccccc'), { externalIds: { 'ovsnet-endpoint': OTHER } }, "the other endpoint's port stays");
    t.ok(links.names.has('ovhcccccccccccc'), 'and its veth (neither deleted nor parked as a spare)');
    t.equal(await store.get(keys.endpoint(NET, EP)), undefined, "the endpoint's record is gone");
    // Its own port, marked as its own, goes as before.
    await driver.createEndpoint({ ...ep(), endpointId: NO_RECORD, address: '10.1.0.6/24' });
    await driver.join(NET, NO_RECORD);
    t.ok(ovs.ports.has(`ovh${short(NO_RECORD)}`));
    await driver.deleteEndpoint(NET, NO_RECORD);
    t.notOk(ovs.ports.has(`ovh${short(NO_RECORD)}`), 'its own marked port goes');
  },
);
