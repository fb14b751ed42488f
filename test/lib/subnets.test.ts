/** subnets.ts's rules, exhaustively over the blocks the issue names and the IANA registries give. */
import t from 'tap';
import { prefix } from '../../src/lib/cidr.js';
import { loadConfig } from '../../src/config/config.js';
import { isOvsnetError } from '../../src/lib/errors.js';
import {
  SPECIAL_BLOCKS,
  allowConnected,
  checkGateway,
  checkHostOverlap,
  checkSubnet,
  parseMinPrefix,
  parseSubnet,
  type HostNet,
} from '../../src/lib/subnets.js';

const refusal = (f: () => void): string => {
  try {
    f();
  } catch (err) {
    if (isOvsnetError(err)) return `${err.code}: ${err.message}`;
    throw err;
  }
  return 'accepted';
};
const subnet = (cidr: string, min?: { 4: number; 6: number }) => refusal(() => checkSubnet(prefix(cidr), 'Pool', min));

t.test('the pools of the issue are refused, each naming the rule and a valid alternative', async (t) => {
  t.match(
    subnet('64.0.0.0/2'),
    /^SUBNET_INVALID: Pool 64\.0\.0\.0\/2 is too large: IPv4 subnets of ovsnet are \/8 or longer \(OVSNET_MIN_PREFIX\); use a private range such as 10\.0\.0\.0\/8/,
  );
  t.match(
    subnet('127.0.0.0/8'),
    /Pool 127\.0\.0\.0\/8 overlaps 127\.0\.0\.0\/8, loopback \(RFC 1122\), which cannot number containers; use a private range such as 10\.0\.0\.0\/8/,
  );
  t.match(subnet('224.0.0.0/4', { 4: 4, 6: 32 }), /overlaps 224\.0\.0\.0\/4, multicast/);
  t.match(subnet('224.0.0.0/4'), /too large/, 'the length rule first');
  t.match(subnet('169.254.0.0/16'), /overlaps 169\.254\.0\.0\/16, link-local/);
  t.match(subnet('::/0'), /Pool ::\/0 is too large: IPv6 subnets of ovsnet are \/32 or longer .*unique local range \(fc00::\/7\)/);
  t.match(subnet('0.0.0.0/0'), /too large/);
  t.match(subnet('0.0.0.0/8'), /"this network", source-only/);
  t.match(subnet('240.0.0.0/8'), /reserved, with the limited broadcast address/);
  t.match(subnet('255.255.255.0/24'), /240\.0\.0\.0\/4/, 'broadcast');
  t.match(subnet('127.5.0.0/16'), /loopback/, 'a subnet inside a special block');
  t.match(subnet('126.0.0.0/7', { 4: 7, 6: 32 }), /loopback/, 'a subnet containing one');
  t.match(subnet('::1/128'), /::1\/128, loopback/);
  t.match(subnet('::/128'), /unspecified/);
  t.match(subnet('ff02::/64'), /multicast/);
  t.match(subnet('fe80::/64'), /fe80::\/10, link-local/);
  t.match(subnet('fec0::/64'), /site-local/);
  t.match(subnet('64:ff9b::/96'), /NAT64/);
  t.match(subnet('2001::/32'), /IETF protocol assignments/);
  t.match(subnet('2002:a00::/32'), /6to4/);
  t.match(subnet('100::/64'), /discard-only/);
  t.match(subnet('4000::/64'), /outside global unicast \(2000::\/3\) and unique local \(fc00::\/7\)/);
  t.match(subnet('192.0.0.0/29'), /IETF protocol assignments/);
});

t.test("Docker's and the tests' subnets, private, shared, documentation and benchmarking space stay usable", async (t) => {
  for (const ok of [
    '172.17.0.0/16',
    '172.31.0.0/16',
    '192.168.0.0/20',
    '10.0.0.0/8',
    '10.42.1.0/24',
    '100.64.0.0/10',
    '192.0.2.0/24',
    '198.18.0.0/15',
    '203.0.113.0/24',
    'fd00:55::/64',
    'fd5e:e00::/40',
    '2001:db8::/32',
    '2a01:4f8::/32',
    '10.1.0.0/32',
  ])
    t.equal(subnet(ok), 'accepted', ok);
  t.equal(
    subnet('64.0.0.0/2', { 4: 2, 6: 32 }),
    'SUBNET_INVALID: Pool 64.0.0.0/2 overlaps 127.0.0.0/8, loopback (RFC 1122), which cannot number containers; use a private range such as 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16',
    'a lower bound lets the size pass, not the content',
  );
  t.equal(subnet('11.0.0.0/7', { 4: 7, 6: 32 }), 'accepted', 'the bound is configurable');
});

t.test('every special block is refused whole and at its edges', async (t) => {
  for (const s of SPECIAL_BLOCKS) {
    const loose = { 4: 1, 6: 1 };
    t.match(
      refusal(() => checkSubnet(s.block, 'Pool', loose)),
      /^SUBNET_INVALID: /,
      `${s.what}`,
    );
  }
});

t.test('zones and malformed subnets', async (t) => {
  t.match(
    refusal(() => parseSubnet('fe80::%eth0/64', 'Pool')),
    /^SUBNET_INVALID: Pool "fe80::%eth0\/64" has an IPv6 zone/,
  );
  t.match(
    refusal(() => parseSubnet('bogus', 'Pool')),
    /^SUBNET_INVALID: Pool: "bogus" is not a CIDR/,
  );
  t.same(parseSubnet('10.1.0.5/24', 'Pool'), prefix('10.1.0.0/24'));
});

t.test('gateways: inside the pool, with its prefix length, no zone', async (t) => {
  const p = prefix('10.1.0.0/24');
  const gw = (g: string, pool = p) => refusal(() => checkGateway(g, pool, 'Gateway'));
  t.equal(gw('10.1.0.1/24'), 'accepted');
  t.equal(gw('10.1.0.254/24'), 'accepted');
  t.equal(gw('10.1.0.1'), 'accepted', 'without a length: the pool’s');
  t.match(
    gw('10.2.0.1/24'),
    /^SUBNET_INVALID: Gateway 10\.2\.0\.1\/24 is not a usable address of subnet 10\.1\.0\.0\/24: give one inside it, e\.g\. 10\.1\.0\.1\/24/,
  );
  t.match(gw('10.1.0.0/24'), /not a usable address/, 'the network address');
  t.match(gw('10.1.0.255/24'), /not a usable address/, 'the broadcast address');
  t.match(gw('10.1.0.1/16'), /has prefix length \/16 but its subnet 10\.1\.0\.0\/24 has \/24: use the subnet's, e\.g\. 10\.1\.0\.1\/24/);
  t.match(gw('fd00::1/64'), /not a usable address/, 'another family');
  t.match(gw('fd00::1%eth0/64', prefix('fd00::/64')), /IPv6 zone/);
  t.equal(gw('fd00::1/64', prefix('fd00::/64')), 'accepted');
  t.equal(gw('10.9.0.1/32', prefix('10.9.0.1/32')), 'accepted', 'a /32 keeps its one address');
});

t.test('host overlap: addresses and connected routes, not routes via a gateway', async (t) => {
  const host: HostNet[] = [
    { prefix: prefix('192.168.1.0/24'), dev: 'eth0', kind: 'connected route' },
    { prefix: prefix('192.168.1.10/32'), dev: 'eth0', kind: 'address' },
    { prefix: prefix('10.50.0.7/32'), dev: 'wg0', kind: 'address' },
    { prefix: prefix('172.20.0.0/16'), dev: 'eth0', kind: 'route' },
  ];
  const over = (cidr: string, suggest?: string) =>
    refusal(() => checkHostOverlap(prefix(cidr), 'subnet', host, '-o ovsnet.allow-connected=true', suggest));
  t.equal(
    over('192.168.0.0/16', '10.192.0.0/24'),
    "SUBNET_HOST_OVERLAP: subnet 192.168.0.0/16 overlaps the host's connected route 192.168.1.0/24 on eth0: containers could not reach that segment and the host would route it two ways; choose a free subnet such as 10.192.0.0/24, or share the segment on purpose with -o ovsnet.allow-connected=true",
  );
  t.match(over('10.50.0.0/24'), /overlaps the host's address 10\.50\.0\.7 on wg0: .*choose a subnet no host interface is on/);
  t.equal(over('172.20.5.0/24'), 'accepted', 'a route via a gateway may be shadowed on purpose');
  t.equal(over('192.168.2.0/24'), 'accepted');
});

t.test('OVSNET_MIN_PREFIX and ovsnet.allow-connected values', async (t) => {
  t.same(parseMinPrefix('8,32'), { 4: 8, 6: 32 });
  t.same(parseMinPrefix('/16, /48'), { 4: 16, 6: 48 });
  t.equal(parseMinPrefix('8'), 'not two prefix lengths');
  t.equal(parseMinPrefix('0,32'), 'IPv4 /0 is outside 1-30');
  t.equal(parseMinPrefix('8,200'), 'IPv6 /200 is outside 1-124');
  t.same(
    [allowConnected(undefined), allowConnected('false'), allowConnected('true'), allowConnected('yes')],
    [false, false, true, undefined],
  );
});

t.test('OVSNET_MIN_PREFIX in the settings, and OVSNET_DEFAULT_POOLS kept to the rules', async (t) => {
  t.same(loadConfig({}).minPrefix, { 4: 8, 6: 32 });
  t.same(loadConfig({ OVSNET_MIN_PREFIX: '12,48' }).minPrefix, { 4: 12, 6: 48 });
  t.throws(() => loadConfig({ OVSNET_MIN_PREFIX: '8' }), {
    code: 'CONFIG_INVALID',
    message: /OVSNET_MIN_PREFIX="8" is not valid \(not two prefix lengths\): expected IPV4,IPV6 prefix lengths, IPv4 1-30 and IPv6 1-124/,
  });
  t.throws(() => loadConfig({ OVSNET_DEFAULT_POOLS: '127.0.0.0/8:24' }), { message: /OVSNET_DEFAULT_POOLS=.*loopback/ });
  t.throws(() => loadConfig({ OVSNET_DEFAULT_POOLS: '10.0.0.0/8:24,fe80::/10:64' }), { message: /OVSNET_DEFAULT_POOLS=.*link-local/ });
  t.throws(() => loadConfig({ OVSNET_DEFAULT_POOLS: '10.0.0.0/6:7' }), { message: /OVSNET_DEFAULT_POOLS=.*too large/ });
  t.throws(() => loadConfig({ OVSNET_DEFAULT_POOLS: '10.0.0.0/8:24', OVSNET_MIN_PREFIX: '25,32' }), {
    message: /OVSNET_DEFAULT_POOLS=.*\/24 is too large: IPv4 subnets of ovsnet are \/25 or longer/,
  });
});
