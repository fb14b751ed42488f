/** Port publishing (src/driver/ports/publishing.ts) through the driver, against in-memory NAT and host ports. */
import t from 'tap';
import { NetworkDriver } from '../../../src/driver/network-driver.js';
import { createLogger } from '../../../src/lib/log.js';
import { keys } from '../../../src/store/keys.js';
import { EP, NET, ep, net, setup } from '../../helpers/driver-setup.js';

t.test('port publishing follows the endpoint', async (t) => {
  const { nat, driver } = setup(t);
  await driver.createNetwork(net(NET));
  const portmap = [{ proto: 'tcp' as const, containerPort: 80, hostIp: '', hostPort: 8080, hostPortEnd: 8080 }];
  await driver.createEndpoint({ ...ep(), portmap });
  await driver.join(NET, EP);
  await driver.programExternalConnectivity(NET, EP, []);
  t.equal(nat.ports.get(EP), '8080->10.1.0.5:80');
  await driver.revokeExternalConnectivity(NET, EP);
  t.notOk(nat.ports.has(EP));
});

t.test('a range publishes one free port of it, HostPort 0 any free port; EndpointOperInfo answers the ports taken', async (t) => {
  const { nat, hostPorts, driver, store } = setup(t);
  await driver.createNetwork(net(NET));
  hostPorts.hostTaken.add(1);
  const portmap = [
    { proto: 'tcp' as const, containerPort: 80, hostIp: '', hostPort: 1, hostPortEnd: 65535 },
    { proto: 'udp' as const, containerPort: 53, hostIp: '', hostPort: 0, hostPortEnd: 0 },
  ];
  await driver.createEndpoint({ ...ep(), portmap });
  await driver.join(NET, EP);
  await driver.programExternalConnectivity(NET, EP, portmap);
  t.equal(nat.ports.get(EP), '2->10.1.0.5:80,49153->10.1.0.5:53', "one DNAT per binding, to the port taken (1 was the host's)");
  t.match(await driver.endpointInfo(NET, EP), {
    'com.docker.network.portmap': [
      { Proto: 6, IP: '10.1.0.5', Port: 80, HostIP: '0.0.0.0', HostPort: 2, HostPortEnd: 2 },
      { Proto: 17, IP: '10.1.0.5', Port: 53, HostIP: '0.0.0.0', HostPort: 49153, HostPortEnd: 49153 },
    ],
  });
  await driver.programExternalConnectivity(NET, EP, portmap);
  t.equal(nat.ports.get(EP), '2->10.1.0.5:80,49153->10.1.0.5:53', 'again: the same ports');
  t.match(JSON.parse((await store.get(keys.endpoint(NET, EP)))?.value ?? '{}'), { published: [{ hostPort: 2 }, { hostPort: 49153 }] });
  await driver.revokeExternalConnectivity(NET, EP);
  t.notOk(nat.ports.has(EP), 'rules gone');
  t.equal(hostPorts.held.size, 0, 'host ports free');
  t.notMatch(await driver.endpointInfo(NET, EP), { 'com.docker.network.portmap': [] }, 'nothing reported');
});

t.test('a host port another endpoint holds is refused; a failed DNAT frees the host ports it took', async (t) => {
  const { nat, hostPorts, driver } = setup(t);
  await driver.createNetwork(net(NET));
  const p8080 = [{ proto: 'tcp' as const, containerPort: 80, hostIp: '', hostPort: 8080, hostPortEnd: 8080 }];
  await driver.createEndpoint({ ...ep(), portmap: p8080 });
  await driver.programExternalConnectivity(NET, EP, p8080);
  const other = 'd'.repeat(64);
  await driver.createEndpoint({ ...ep(), endpointId: other, address: '10.1.0.6/24', portmap: p8080 });
  await t.rejects(driver.programExternalConnectivity(NET, other, p8080), { code: 'PORT_IN_USE' });
  t.notOk(nat.ports.has(other));
  nat.failNext('addPorts');
  const p9000 = [{ proto: 'tcp' as const, containerPort: 80, hostIp: '', hostPort: 9000, hostPortEnd: 9000 }];
  await t.rejects(driver.programExternalConnectivity(NET, other, p9000), { code: 'OVS_FAILED' });
  t.notOk(hostPorts.held.has(other), 'the host port taken before the failure is free again');
});

t.test("IPv4 host addresses go to the container's IPv4 address, IPv6 ones to its IPv6 address; a family it lacks is refused", async (t) => {
  const { nat, hostPorts, driver } = setup(t);
  await driver.createNetwork({ ...net(NET), ipv6: [{ pool: 'fd00:1::/64', gateway: 'fd00:1::1/64' }] });
  const portmap = [
    { proto: 'tcp' as const, containerPort: 80, hostIp: '', hostPort: 8080, hostPortEnd: 8080 },
    { proto: 'tcp' as const, containerPort: 80, hostIp: '::', hostPort: 8081, hostPortEnd: 8081 },
    { proto: 'udp' as const, containerPort: 53, hostIp: '::1', hostPort: 8053, hostPortEnd: 8053 },
  ];
  await driver.createEndpoint({ ...ep(), addressV6: 'fd00:1::5/64', portmap });
  await driver.programExternalConnectivity(NET, EP, portmap);
  t.equal(nat.ports.get(EP), '8080->10.1.0.5:80,8081->[fd00:1::5]:80,8053->[fd00:1::5]:53');
  t.match(await driver.endpointInfo(NET, EP), {
    'com.docker.network.portmap': [
      { Proto: 6, IP: '10.1.0.5', HostIP: '0.0.0.0', HostPort: 8080 },
      { Proto: 6, IP: 'fd00:1::5', HostIP: '::', HostPort: 8081 },
      { Proto: 17, IP: 'fd00:1::5', HostIP: '::1', HostPort: 8053 },
    ],
  });
  await driver.revokeExternalConnectivity(NET, EP);
  t.notOk(nat.ports.has(EP), 'both families removed');

  const v6only = 'd'.repeat(64);
  await driver.createEndpoint({ ...ep(), endpointId: v6only, address: '', addressV6: 'fd00:1::6/64', portmap: [] });
  await t.rejects(driver.programExternalConnectivity(NET, v6only, portmap.slice(0, 1)), { code: 'PORT_UNSUPPORTED' }, 'no IPv4 address');
  const v4only = 'f'.repeat(64);
  await driver.createEndpoint({ ...ep(), endpointId: v4only, address: '10.1.0.7/24', portmap: [] });
  await t.rejects(driver.programExternalConnectivity(NET, v4only, portmap.slice(1, 2)), { code: 'PORT_UNSUPPORTED' }, 'no IPv6 address');
  t.equal(hostPorts.held.size, 0, 'nothing held after a refusal');
});

t.test('an IPv6 subnet with a gateway gets forwarding rules too (only replies and published ports in)', async (t) => {
  const { nat, driver } = setup(t);
  await driver.createNetwork({ ...net(NET), ipv6: [{ pool: 'fd00:1::/64', gateway: 'fd00:1::1/64' }] });
  t.same([...nat.subnets], ['10.1.0.0/24', 'fd00:1::/64']);
  await driver.deleteNetwork(NET);
  t.same([...nat.subnets], [], 'removed with the network');
});

t.test('reconcile: published ports held again after a restart; rules of endpoints gone meanwhile removed', async (t) => {
  const { nat, hostPorts, ovs, links, flows, driver, store } = setup(t);
  await driver.createNetwork(net(NET));
  const portmap = [{ proto: 'tcp' as const, containerPort: 80, hostIp: '', hostPort: 8080, hostPortEnd: 8090 }];
  await driver.createEndpoint({ ...ep(), portmap });
  await driver.join(NET, EP);
  hostPorts.hostTaken.add(8080);
  await driver.programExternalConnectivity(NET, EP, portmap);
  // A restart: the sockets are gone with the old process, the rules stayed; the host process on
  // 8080 is gone too; a rule is left of an endpoint removed meanwhile.
  hostPorts.held.clear();
  hostPorts.hostTaken.clear();
  await nat.addPorts('9'.repeat(64), '10.1.0.9', portmap);
  const fresh = new NetworkDriver({
    store,
    log: createLogger('silent'),
    ovs,
    links,
    nat,
    hostPorts,
    flows,
    host: 'h1',
    bridge: 'br0',
    datapath: () => 'netdev',
  });
  await fresh.reconcile();
  t.same(
    hostPorts.held.get(EP)?.map((b) => b.hostPort),
    [8081],
    'the recorded port held again, not a new pick of the range',
  );
  t.notOk(nat.ports.has('9'.repeat(64)), 'the rule of the endpoint gone meanwhile is removed');
  t.equal(nat.ports.get(EP), '8081->10.1.0.5:80');
});
