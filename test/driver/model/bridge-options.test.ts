/**
 * Docker's bridge-driver options on an ovsnet network: honoured where ovsnet
 * has the same thing, refused naming what it has instead. By effect against real iptables and
 * sockets: test/e2e/driver-egress.test.ts.
 */
import t from 'tap';
import { keys } from '../../../src/store/keys.js';
import { EP, NET, NET2, ep, net, setup } from '../../helpers/driver-setup.js';

const bridge = (o: Record<string, string>) => ({
  'com.docker.network.generic': Object.fromEntries(Object.entries(o).map(([k, v]) => [`com.docker.network.bridge.${k}`, v])),
});

t.test('enable_ip_masquerade=false: forwarding but no masquerade, kept in the record', async (t) => {
  const { nat, driver, store } = setup(t);
  await driver.createNetwork(net(NET, bridge({ enable_ip_masquerade: 'false' })));
  t.notOk(nat.networks.has(NET), 'not masqueraded');
  t.ok(nat.subnets.has('10.1.0.0/24'), 'still forwarded');
  t.match(JSON.parse((await store.get(keys.network(NET)))?.value ?? '{}'), { masquerade: false });
  await driver.createNetwork(net(NET2, bridge({ enable_ip_masquerade: 'true', enable_icc: 'true' }), '10.2.0.0/24'));
  t.ok(nat.networks.has(NET2), 'true: masqueraded, as without the option');
});

t.test('enable_ip_masquerade governs IPv6 too: NAT66 by default, none with false', async (t) => {
  const { nat, driver } = setup(t);
  const v6 = (pool: string) => ({ ipv6: [{ pool, gateway: pool.replace(/::\/64$/, '::1/64') }] });
  await driver.createNetwork({ ...net(NET), ...v6('fd00:1::/64') });
  t.match(nat.networksV6.get(NET), /^fd00:1::\/64 via /, 'default: IPv6 masqueraded (NAT66), as Docker does');
  await driver.createNetwork({ ...net(NET2, bridge({ enable_ip_masquerade: 'false' }), '10.2.0.0/24'), ...v6('fd00:2::/64') });
  t.notOk(nat.networksV6.has(NET2), 'false: routed, IPv6 as IPv4');
  t.notOk(nat.networks.has(NET2));
  t.ok(nat.subnets.has('fd00:2::/64'), 'still forwarded');
  await driver.deleteNetwork(NET);
  t.notOk(nat.networksV6.has(NET), 'removed with the network');
});

t.test('host_binding_ipv4: ports published without a host address take it', async (t) => {
  const { hostPorts, driver } = setup(t);
  await driver.createNetwork(net(NET, bridge({ host_binding_ipv4: '192.0.2.7' })));
  const portmap = [
    { proto: 'tcp' as const, containerPort: 80, hostIp: '', hostPort: 8080, hostPortEnd: 8080 },
    { proto: 'tcp' as const, containerPort: 81, hostIp: '127.0.0.1', hostPort: 8081, hostPortEnd: 8081 },
  ];
  await driver.createEndpoint({ ...ep(), portmap });
  await driver.join(NET, EP);
  await driver.programExternalConnectivity(NET, EP, portmap);
  t.match(await driver.endpointInfo(NET, EP), {
    'com.docker.network.portmap': [
      { Port: 80, HostIP: '192.0.2.7', HostPort: 8080 },
      { Port: 81, HostIP: '127.0.0.1', HostPort: 8081 },
    ],
  });
  t.match([...hostPorts.held.values()].flat(), [{ hostIp: '192.0.2.7' }, { hostIp: '127.0.0.1' }], 'held on that address');
});

t.test('refused, each naming what ovsnet has instead', async (t) => {
  const { driver } = setup(t);
  for (const [o, message] of [
    [{ enable_icc: 'no' }, /enable_icc=no is not valid: expected true or false/],
    [{ enable_icc: 'false' }, /enable_icc=false: this ovsnet was built without OpenFlow access, which keeps the containers apart/],
    [
      { name: 'br-x' },
      /bridge\.name=br-x is a bridge-driver option ovsnet does not honour: every ovsnet network is a VLAN of one Open vSwitch bridge, named by the OVSNET_BRIDGE setting/,
    ],
    [{ gateway_mode_ipv4: 'routed' }, /use com\.docker\.network\.bridge\.enable_ip_masquerade=false/],
    [{ gateway_mode_ipv6: 'routed' }, /ovsnet masquerades IPv6 as it does IPv4 \(NAT66.*enable_ip_masquerade=false for a routed/],
    [
      { whatever: '1' },
      /ovsnet has no such option \(it honours enable_ip_masquerade=true\|false, host_binding_ipv4=.*enable_icc=true\|false\)/,
    ],
    [{ enable_ip_masquerade: 'no' }, /enable_ip_masquerade=no is not valid: expected true or false/],
    [{ host_binding_ipv4: '::1' }, /host_binding_ipv4=::1 is not valid: expected an IPv4 address/],
  ] as const) {
    await t.rejects(driver.createNetwork(net(NET, bridge(o))), { code: 'NETWORK_OPTION_INVALID', message }, JSON.stringify(o));
  }
});
