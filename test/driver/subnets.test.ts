/**
 * CreateNetwork checks the subnets it is given, whichever IPAM chose them: the driver parses
 * IPv4Data/IPv6Data itself (a pool becomes the gateway's prefix, host routes and masquerade rules).
 */
import t, { type Test } from 'tap';
import { prefix } from '../../src/lib/cidr.js';
import { NetworkDriver } from '../../src/driver/network-driver.js';
import { createLogger } from '../../src/lib/log.js';
import type { HostNet } from '../../src/lib/subnets.js';
import { fakeSideEffects } from '../helpers/driver-fakes.js';
import { tempStore } from '../helpers/temp-store.js';

const HOST: HostNet[] = [
  { prefix: prefix('192.168.10.0/24'), dev: 'eth0', kind: 'connected route' },
  { prefix: prefix('192.168.10.5/32'), dev: 'eth0', kind: 'address' },
  { prefix: prefix('172.25.0.0/16'), dev: 'eth0', kind: 'route' },
];

function setup(t: Test) {
  const store = tempStore(t);
  const effects = fakeSideEffects();
  const rules = { minPrefix: { 4: 8, 6: 32 }, hostNets: () => HOST };
  const driver = new NetworkDriver({
    ...effects,
    store,
    log: createLogger('silent'),
    host: 'h1',
    bridge: 'br0',
    datapath: () => 'netdev',
    subnets: rules,
  });
  return { store, ovs: effects.ovs, nat: effects.nat, driver };
}

let id = 0;
const net = (
  pool: string,
  gateway: string | undefined,
  opts: Record<string, string> = {},
  v6: { pool: string; gateway?: string }[] = [],
) => ({
  networkId: (++id).toString(16).padStart(64, '0'),
  options: { 'com.docker.network.generic': opts },
  ipv4: [gateway === undefined ? { pool } : { pool, gateway }],
  ipv6: v6,
});

t.test('pools and gateways from any IPAM are checked before anything is made', async (t) => {
  const { driver, ovs, nat, store } = setup(t);
  const refused: [ReturnType<typeof net>, string, RegExp][] = [
    [
      net('0.0.0.0/0', '0.0.0.1/0'),
      'SUBNET_INVALID',
      /IPv4Data\.Pool 0\.0\.0\.0\/0 is too large: IPv4 subnets of ovsnet are \/8 or longer/,
    ],
    [net('127.0.0.0/8', '127.0.0.1/8'), 'SUBNET_INVALID', /loopback/],
    [net('224.1.0.0/16', undefined), 'SUBNET_INVALID', /multicast/],
    [
      net('10.1.0.0/24', '10.2.0.1/24'),
      'SUBNET_INVALID',
      /IPv4Data\.Gateway \(--gateway\) of 10\.1\.0\.0\/24 10\.2\.0\.1\/24 is not a usable address of subnet 10\.1\.0\.0\/24: give one inside it, e\.g\. 10\.1\.0\.1\/24/,
    ],
    [net('10.1.0.0/24', '10.1.0.1/16'), 'SUBNET_INVALID', /has prefix length \/16 but its subnet 10\.1\.0\.0\/24 has \/24/],
    [net('bogus', '10.1.0.1/24'), 'SUBNET_INVALID', /IPv4Data\.Pool: "bogus" is not a CIDR/],
    [net('fd00::/64', undefined), 'SUBNET_INVALID', /IPv4Data\.Pool fd00::\/64 is not an IPv4 subnet/],
    [
      net('10.1.0.0/24', '10.1.0.1/24', {}, [{ pool: 'fe80::/64' }]),
      'SUBNET_INVALID',
      /IPv6Data\.Pool fe80::\/64 overlaps fe80::\/10, link-local/,
    ],
    [net('10.1.0.0/24', '10.1.0.1/24', {}, [{ pool: 'fd00:1::/64', gateway: 'fd00:1::1%eth0/64' }]), 'SUBNET_INVALID', /IPv6 zone/],
    [net('10.1.0.0/24', '10.1.0.1/24', {}, [{ pool: 'fd00:1::%eth0/64' }]), 'SUBNET_INVALID', /IPv6 zone/],
    [
      net('192.168.0.0/16', '192.168.0.1/16'),
      'SUBNET_HOST_OVERLAP',
      /subnet 192\.168\.0\.0\/16 overlaps the host's connected route 192\.168\.10\.0\/24 on eth0: .*or share the segment on purpose with -o ovsnet\.allow-connected=true/,
    ],
    [
      net('10.1.0.0/24', '10.1.0.1/24', { 'ovsnet.allow-connected': 'maybe' }),
      'NETWORK_OPTION_INVALID',
      /-o ovsnet\.allow-connected=maybe is not valid: expected true or false/,
    ],
  ];
  for (const [req, code, message] of refused) {
    await t.rejects(driver.createNetwork(req), { code, message }, `${req.ipv4[0]?.pool ?? ''} ${JSON.stringify(req.ipv6)}`);
  }
  t.equal(ovs.ports.size, 0, 'no port made');
  t.equal(nat.networks.size, 0, 'no masquerade rule');
  t.same((await store.list('/ovsnet/')).kvs, [], 'no record or tag');
});

t.test("Docker's default IPAM flows and sharing a segment on purpose still work", async (t) => {
  const { driver, nat } = setup(t);
  await driver.createNetwork(net('172.18.0.0/16', '172.18.0.1/16'));
  await driver.createNetwork(net('10.42.1.0/24', '10.42.1.1/24', {}, [{ pool: 'fd00:55::/64', gateway: 'fd00:55::1/64' }]));
  await driver.createNetwork(net('172.25.3.0/24', '172.25.3.1/24')); // shadows a route via a gateway
  await driver.createNetwork(net('192.168.10.0/24', '192.168.10.1/24', { 'ovsnet.allow-connected': 'true' }));
  t.equal(nat.networks.size, 4, 'four networks with their masquerade');
});
