/** Network driver logic against in-memory OVS, links and NAT, with a real embedded store. */
import t from 'tap';
import { keys } from '../../src/store/keys.js';
import { EP, NET, NET2, ep, net, setup } from '../helpers/driver-setup.js';

t.test('a network: a VLAN tag, a gateway port with its address, masquerading', async (t) => {
  const { store, ovs, links, nat, driver } = setup(t);
  await driver.createNetwork(net(NET));
  t.same(ovs.bridges.get('br0'), 'netdev', 'bridge created with the datapath');
  t.match(ovs.ports.get('ovgaaaaaaaaaaaa'), { tag: 1, type: 'internal', externalIds: { 'ovsnet-network': NET, 'ovsnet-role': 'gateway' } });
  t.same(links.addresses.get('ovgaaaaaaaaaaaa'), ['10.1.0.1/24']);
  t.equal(nat.networks.get(NET), '10.1.0.0/24 via ovgaaaaaaaaaaaa');
  t.equal((await store.get(keys.vlanTag('h1', 1)))?.value, NET);
  await driver.createNetwork(net(NET));
  t.equal(ovs.ports.size, 1, 'the same CreateNetwork again changes nothing');
  await driver.createNetwork(net(NET2, {}, '10.2.0.0/24'));
  t.match(ovs.ports.get('ovgbbbbbbbbbbbb'), { tag: 2 }, 'the next network gets the next tag');
});

t.test('options: ovsnet.tag, mtu, --internal, and refusals', async (t) => {
  const { ovs, driver, store } = setup(t);
  await driver.createNetwork(net(NET, { 'com.docker.network.generic': { 'ovsnet.tag': '42', 'com.docker.network.driver.mtu': '1400' } }));
  t.match(ovs.ports.get('ovgaaaaaaaaaaaa'), { tag: 42 });
  t.equal(ovs.mtus.get('ovgaaaaaaaaaaaa'), 1400, "the gateway port's MTU is pinned to the network's (mtu_request)");
  t.match(JSON.parse((await store.get(keys.network(NET)))?.value ?? '{}'), { mtu: 1400, tag: 42 });
  await t.rejects(driver.createNetwork(net(NET2, { 'com.docker.network.generic': { 'ovsnet.tag': '42' } }, '10.2.0.0/24')), {
    code: 'TAG_TAKEN',
    message: /VLAN tag 42 is used by network aaaaaaaaaaaa on this host: pick another from 1 to 4094, or omit -o ovsnet.tag/,
  });
  t.equal(await store.get(keys.network(NET2)), undefined, 'nothing recorded for the refused network');
  for (const [opts, message] of [
    [{ 'ovsnet.tag': '0' }, /-o ovsnet\.tag=0 is not valid: expected a VLAN tag from 1 to 4094/],
    [{ 'ovsnet.tag': 'x' }, /ovsnet\.tag=x/],
    [{ 'ovsnet.vni': '5' }, /-o ovsnet\.vni is not an ovsnet option; valid ones: ovsnet\.tag/],
    [{ 'ovsnet.encap': 'gre' }, /ovsnet\.encap=gre is not valid: expected vlan or vxlan/],
    [{ 'ovsnet.encap': 'vxlan' }, /-o ovsnet\.encap=vxlan needs -o ovsnet\.network=NAME/],
    [{ 'ovsnet.group': 'web' }, /-o ovsnet\.group=web needs -o ovsnet\.network=PARENT beside it/],
    [
      { 'ovsnet.group': 'web', 'ovsnet.network': 'app', 'ovsnet.encap': 'vxlan' },
      /takes its parent's encapsulation .*: drop -o ovsnet\.encap/,
    ],
    [{ 'ovsnet.group': 'web', 'ovsnet.network': 'app' }, /-o ovsnet\.group=web: this ovsnet was built without OpenFlow access/],
    [
      { 'ovsnet.allow': 'db:99999/tcp', 'ovsnet.network': 'app' },
      /ovsnet\.allow=db:99999\/tcp is not valid at "db:99999\/tcp": expected GROUP or GROUP:PORT\/tcp/,
    ],
    [{ 'ovsnet.network': 'a/b', 'ovsnet.encap': 'vxlan' }, /-o ovsnet\.network=a\/b is not valid/],
    [{ 'ovsnet.network': 'blue', 'ovsnet.encap': 'vxlan', 'ovsnet.tag': '16777216' }, /a VNI from 1 to 16777215/],
    [{ 'com.docker.network.driver.mtu': '9' }, /an MTU from 68 to 65535/],
  ] as const) {
    await t.rejects(driver.createNetwork(net(NET2, { 'com.docker.network.generic': opts }, '10.2.0.0/24')), {
      code: 'NETWORK_OPTION_INVALID',
      message,
    });
  }
  await driver.createNetwork(net(NET2, { 'com.docker.network.internal': true }, '10.2.0.0/24'));
  t.equal(ovs.ports.has('ovgbbbbbbbbbbbb'), false, '--internal: no gateway port');
  t.equal((await store.list(keys.tags)).kvs.length, 2, 'refusals left no tag behind');
});

t.test('a failed step undoes the earlier ones', async (t) => {
  const { ovs, links, nat, driver, store } = setup(t);
  nat.failNext('addNetwork');
  await t.rejects(driver.createNetwork(net(NET)), { message: /injected failure of addNetwork/ });
  t.equal(ovs.ports.size, 0, 'gateway port removed');
  t.equal(links.names.size, 0);
  t.same((await store.list(keys.tags)).kvs, [], 'tag released');
  t.equal(await store.get(keys.network(NET)), undefined);
  await driver.createNetwork(net(NET));
  await driver.createEndpoint(ep());
  ovs.failNext('addPort');
  await t.rejects(driver.join(NET, EP), { message: /injected failure of addPort/ });
  t.notOk(links.names.has('ovhcccccccccccc'), 'the veth of a failed Join is removed');
  const res = await driver.join(NET, EP);
  t.same(res, { srcName: 'ovccccccccccccc', gateway: '10.1.0.1', gatewayV6: '' }, 'and Join works afterwards');
});

t.test('endpoints: MAC only when Docker gave none, Join, Leave, idempotent DeleteEndpoint', async (t) => {
  const { ovs, links, driver, store } = setup(t);
  await driver.createNetwork(net(NET));
  t.same(await driver.createEndpoint(ep()), { mac: '02:42:0a:01:00:05' }, 'a MAC derived from the address');
  t.same(await driver.createEndpoint({ ...ep('02:00:00:00:00:01'), endpointId: 'd'.repeat(64) }), {}, "Docker's MAC is never echoed");
  await t.rejects(driver.createEndpoint({ ...ep(), endpointId: 'e'.repeat(64), address: '' }), {
    code: 'ENDPOINT_INVALID',
    message: /has no address/,
  });
  const res = await driver.join(NET, EP);
  t.equal(res.srcName, 'ovccccccccccccc');
  t.match(ovs.ports.get('ovhcccccccccccc'), { tag: 1, externalIds: { 'ovsnet-endpoint': EP, 'ovsnet-network': NET } });
  t.ok(links.txOff.has('ovccccccccccccc'), 'tx checksum off on the container end (userspace datapath)');
  t.match(await driver.endpointInfo(NET, EP), { bridge: 'br0', port: 'ovhcccccccccccc', tag: '1' });
  await driver.leave(NET, EP);
  await driver.deleteEndpoint(NET, EP);
  await driver.deleteEndpoint(NET, EP);
  t.notOk(ovs.ports.has('ovhcccccccccccc'));
  await driver.settled(); // the veth goes in the background
  t.notOk(links.names.has('ovhcccccccccccc'));
  t.equal(await store.get(keys.endpoint(NET, EP)), undefined);
  await t.rejects(driver.join(NET, EP), { code: 'ENDPOINT_NOT_FOUND' });
  await t.rejects(driver.join('f'.repeat(64), EP), { code: 'NETWORK_NOT_FOUND', message: /ffffffffffff is not an ovsnet network/ });
});

t.test('DeleteEndpoint does not wait for the kernel to delete the veth; a failed deletion is left to reconcile', async (t) => {
  const { links, driver, store } = setup(t);
  await driver.createNetwork(net(NET));
  const deleteLink = links.deleteLink.bind(links);
  /** DeleteEndpoint with a veth deletion that ends (or fails) only when told. */
  const deleteHeld = async () => {
    let finish: (fail: boolean) => void = () => undefined;
    links.deleteLink = (name) =>
      new Promise<boolean>((r) => (finish = r)).then((fail) => (fail ? Promise.reject(new Error('injected: EBUSY')) : deleteLink(name)));
    await driver.deleteEndpoint(NET, EP);
    links.deleteLink = deleteLink;
    return finish;
  };
  await driver.createEndpoint(ep());
  await driver.join(NET, EP);
  let finish = await deleteHeld();
  t.equal(await store.get(keys.endpoint(NET, EP)), undefined, 'DeleteEndpoint answered: the record is gone');
  t.ok(links.names.has('ovhcccccccccccc'), 'while the veth is still being deleted');
  finish(false);
  await driver.settled();
  t.notOk(links.names.has('ovhcccccccccccc'), 'then it is gone');

  await driver.createEndpoint(ep());
  await driver.join(NET, EP);
  finish = await deleteHeld();
  finish(true);
  await driver.settled();
  t.ok(links.names.has('ovhcccccccccccc'), 'a failed deletion leaves the veth');
  t.match((await driver.reconcile()).removed, ['ovhcccccccccccc'], 'and the next reconcile removes it');
  t.notOk(links.names.has('ovhcccccccccccc'));
});

t.test('kernel datapath: no checksum change', async (t) => {
  const { links, driver } = setup(t, 'system');
  await driver.createNetwork(net(NET));
  await driver.createEndpoint(ep());
  await driver.join(NET, EP);
  t.equal(links.txOff.size, 0);
});

t.test('DeleteNetwork removes the gateway, NAT and the tag; twice is fine', async (t) => {
  const { ovs, nat, driver, store } = setup(t);
  await driver.createNetwork(net(NET));
  await driver.deleteNetwork(NET);
  await driver.deleteNetwork(NET);
  t.equal(ovs.ports.size, 0);
  t.equal(nat.networks.size, 0);
  t.same((await store.list(keys.tags)).kvs, []);
});

t.test('reconcile: recreates what is missing, removes what no endpoint owns', async (t) => {
  const { ovs, links, driver, store } = setup(t);
  await driver.createNetwork(net(NET));
  await driver.createEndpoint(ep());
  await driver.join(NET, EP);
  // A crash left an orphan: a port and veth of an endpoint the store does not know.
  await links.createVeth({ host: 'ovh999999999999', container: 'ovc999999999999', mtu: 1500 });
  await ovs.addPort('br0', 'ovh999999999999', { tag: 1, externalIds: { 'ovsnet-network': NET, 'ovsnet-endpoint': '9'.repeat(64) } });
  // And the gateway port vanished (OVS database reset; ovs-vswitchd then removes its device).
  await ovs.deletePort('ovgaaaaaaaaaaaa');
  await ovs.waitApplied();
  // And a VLAN tag is held by a network that was never recorded (a create whose answer was lost).
  await store.txn({ compares: [], success: [{ type: 'put', key: keys.vlanTag('h1', 77), value: 'ghost' }] });
  const res = await driver.reconcile();
  t.same(res.removed, ['ovh999999999999', 'VLAN tag 77 of no network']);
  t.equal(await store.get(keys.vlanTag('h1', 77)), undefined, 'the tag is free again');
  t.same(res.repaired, ['gateway ovgaaaaaaaaaaaa']);
  t.ok(
    ovs.ports.has('ovgaaaaaaaaaaaa') && links.addresses.get('ovgaaaaaaaaaaaa')?.includes('10.1.0.1/24'),
    'gateway back with its address',
  );
  t.ok(ovs.ports.has('ovhcccccccccccc'), "a live endpoint's port stays");
  t.same(await driver.reconcile(), { repaired: [], removed: [] }, 'a second run changes nothing');
});

t.test('reconcile: a joined endpoint whose veth died with its container is removed', async (t) => {
  const { ovs, links, driver, store } = setup(t);
  await driver.createNetwork(net(NET));
  await driver.createEndpoint(ep());
  await driver.join(NET, EP);
  const other = 'd'.repeat(64);
  await driver.createEndpoint({ ...ep(), endpointId: other, address: '10.1.0.6/24' });
  // The container's namespace is destroyed (dockerd restarted): its veth pair is gone.
  await links.deleteLink('ovhcccccccccccc');
  const res = await driver.reconcile();
  t.same(res.removed, ['ovhcccccccccccc (stale endpoint cccccccccccc)']);
  t.notOk(ovs.ports.has('ovhcccccccccccc'), 'port removed');
  t.equal(await store.get(keys.endpoint(NET, EP)), undefined, 'record removed');
  t.ok(await store.get(keys.endpoint(NET, other)), 'an endpoint not joined yet is kept');
});

t.test("a container's calls read the store once for its network, never for its endpoint; removals are never served stale", async (t) => {
  const { store, driver } = setup(t);
  await driver.createNetwork(net(NET));
  const gets: string[] = [];
  const get = store.get.bind(store);
  store.get = (key) => {
    gets.push(key);
    return get(key);
  };
  await driver.createEndpoint(ep());
  await driver.join(NET, EP);
  await driver.programExternalConnectivity(NET, EP, [{ proto: 'tcp', containerPort: 80, hostIp: '', hostPort: 8080, hostPortEnd: 8080 }]);
  t.match(await driver.endpointInfo(NET, EP), { port: 'ovhcccccccccccc' });
  t.match(await driver.endpointInfo(NET, EP), { port: 'ovhcccccccccccc' });
  t.same(gets, [], 'CreateEndpoint, Join, ProgramExternalConnectivity, EndpointOperInfo x2: no store read');
  t.match(
    JSON.parse((await get(keys.endpoint(NET, EP)))?.value ?? '{}'),
    { portmap: [{ hostPort: 8080 }] },
    'the port map was written through',
  );
  await driver.leave(NET, EP);
  await driver.deleteEndpoint(NET, EP);
  await t.rejects(driver.endpointInfo(NET, EP), { code: 'ENDPOINT_NOT_FOUND' }, 'a deleted endpoint is gone');
  await driver.deleteNetwork(NET);
  await t.rejects(driver.createEndpoint(ep()), { code: 'NETWORK_NOT_FOUND' }, 'a deleted network is gone');
});

t.test('a store write whose outcome is unknown leaves no cached copy behind', async (t) => {
  const { store, driver } = setup(t);
  await driver.createNetwork(net(NET));
  await driver.createEndpoint(ep());
  await driver.join(NET, EP);
  const txn = store.txn.bind(store);
  // The delete is applied, then its answer is lost.
  store.txn = async (req) => {
    await txn(req);
    throw new Error('injected: the answer was lost');
  };
  await t.rejects(driver.deleteEndpoint(NET, EP));
  store.txn = txn;
  await t.rejects(driver.endpointInfo(NET, EP), { code: 'ENDPOINT_NOT_FOUND' }, 'read again from the store, where it is gone');
});

t.test("DeleteNetwork answers once the gateway's device is gone (a new network of the same subnet may follow at once)", async (t) => {
  const { driver, ovs, links } = setup(t);
  await driver.createNetwork(net(NET));
  const gateway = [...ovs.ports].find(([, p]) => p.type === 'internal')?.[0] ?? '';
  t.ok(links.names.has(gateway), 'the gateway device exists');
  await driver.deleteNetwork(NET);
  t.notOk(links.names.has(gateway), 'gone when DeleteNetwork answers, not only once ovs-vswitchd gets to it');
});
