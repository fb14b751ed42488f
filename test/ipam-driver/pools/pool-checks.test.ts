/** RequestPool against subnets.ts's rules, the host's own segments and every address space's pools. */
import t from 'tap';
import { makeIpam, pool } from '../../helpers/ipam.js';
import { tempStore as fresh } from '../../helpers/temp-store.js';

t.test('the pools the issue names are refused with the rule and an alternative; nothing is stored', async (t) => {
  const store = fresh(t);
  const ipam = makeIpam(store);
  const refused: [string, boolean, RegExp][] = [
    [
      '64.0.0.0/2',
      false,
      /Pool 64\.0\.0\.0\/2 is too large: IPv4 subnets of ovsnet are \/8 or longer \(OVSNET_MIN_PREFIX\); use a private range/,
    ],
    ['127.0.0.0/8', false, /Pool 127\.0\.0\.0\/8 overlaps 127\.0\.0\.0\/8, loopback/],
    ['224.0.0.0/8', false, /multicast/],
    ['169.254.0.0/16', false, /link-local/],
    ['240.0.0.0/8', false, /reserved/],
    ['::/0', true, /Pool ::\/0 is too large: IPv6 subnets of ovsnet are \/32 or longer/],
    ['fe80::/64', true, /fe80::\/10, link-local/],
    ['ff02::/64', true, /multicast/],
  ];
  for (const [cidr, v6, message] of refused) {
    await t.rejects(ipam.requestPool(pool(cidr, '', v6)), { code: 'SUBNET_INVALID', message }, cidr);
  }
  await t.rejects(ipam.requestPool(pool('fd00::%eth0/64', '', true)), { code: 'IPAM_POOL_INVALID', message: /has an IPv6 zone/ });
  t.same((await store.list('/ovsnet/')).kvs, [], 'no key written by a refusal');
  const ok = await ipam.requestPool(pool('10.0.0.0/8'));
  t.equal(ok.pool, '10.0.0.0/8', '10.0.0.0/8 is private and usable');
  t.equal((await ipam.requestPool(pool('fd00:55::/64', '', true))).pool, 'fd00:55::/64');
});

t.test('OVSNET_MIN_PREFIX moves the bound', async (t) => {
  const ipam = makeIpam(fresh(t), { minPrefix: '16,48' });
  await t.rejects(ipam.requestPool(pool('10.0.0.0/12')), { code: 'SUBNET_INVALID', message: /are \/16 or longer/ });
  await t.rejects(ipam.requestPool(pool('fd00::/40', '', true)), { code: 'SUBNET_INVALID', message: /are \/48 or longer/ });
  t.equal((await ipam.requestPool(pool('10.0.0.0/16'))).pool, '10.0.0.0/16');
});

t.test("--subnet overlapping the host's own segments: refused with a free pool, unless allowed on purpose", async (t) => {
  const ipam = makeIpam(fresh(t), {
    connected: ['192.168.10.0/24 eth0', '192.168.10.5/32 eth0', '10.195.0.9/32 wg0'],
    routes: ['172.20.0.0/16'],
    defaultPools: '10.192.0.0/12:24',
  });
  await t.rejects(ipam.requestPool(pool('192.168.0.0/16')), {
    code: 'SUBNET_HOST_OVERLAP',
    message:
      "Pool 192.168.0.0/16 overlaps the host's connected route 192.168.10.0/24 on eth0: containers could not reach that segment and the host would route it two ways; choose a free subnet such as 10.192.0.0/24, or share the segment on purpose with --ipam-opt ovsnet.allow-connected=true (and -o ovsnet.allow-connected=true for the ovsnet driver)",
  });
  await t.rejects(ipam.requestPool(pool('10.195.0.0/24')), {
    code: 'SUBNET_HOST_OVERLAP',
    message: /the host's address 10\.195\.0\.9 on wg0/,
  });
  t.equal((await ipam.requestPool(pool('172.20.1.0/24'))).pool, '172.20.1.0/24', 'a route via a gateway may be shadowed');
  await t.rejects(ipam.requestPool({ ...pool('192.168.10.0/24'), options: { 'ovsnet.allow-connected': 'yes' } }), {
    code: 'IPAM_OPTION_INVALID',
    message: '--ipam-opt ovsnet.allow-connected=yes is not valid: expected true or false',
  });
  const shared = await ipam.requestPool({ ...pool('192.168.10.0/24'), options: { 'ovsnet.allow-connected': 'true' } });
  t.equal(shared.pool, '192.168.10.0/24', '--ipam-opt ovsnet.allow-connected=true shares the segment');
  const dyn = await ipam.requestPool(pool(''));
  t.equal(dyn.pool, '10.192.0.0/24');
  const more = await Promise.all([1, 2, 3].map(() => ipam.requestPool(pool(''))));
  t.notOk(
    more.some((p) => p.pool === '10.195.0.0/24'),
    "dynamic pools skip the host's addresses",
  );
});

t.test('pools of LocalDefault and GlobalDefault may not overlap each other', async (t) => {
  const ipam = makeIpam(fresh(t));
  await ipam.requestPool(pool('10.70.0.0/16'));
  await t.rejects(ipam.requestPool({ ...pool('10.70.1.0/24'), addressSpace: 'GlobalDefault' }), {
    code: 'IPAM_POOL_OVERLAP',
    message:
      /pool 10\.70\.1\.0\/24 overlaps pool 10\.70\.0\.0\/16 \(LocalDefault\/10\.70\.0\.0\/16\) already in use in address space LocalDefault: choose a subnet that overlaps no other network's, e\.g\. 10\.192\.0\.0\/24 \(free now\)/,
  });
  t.equal((await ipam.requestPool({ ...pool('10.71.0.0/16'), addressSpace: 'GlobalDefault' })).pool, '10.71.0.0/16');
});

t.test("a logical network's pool: a new host is checked against its own segments, a member is told it is one", async (t) => {
  const store = fresh(t);
  await makeIpam(store, { host: 'h1' }).requestPool(pool('10.210.0.0/24'));
  await makeIpam(store, { host: 'h1' }).bindLogical('10.210.0.0/24', 'blue');
  await makeIpam(store, { host: 'h2' }).requestPool(pool('10.210.0.0/24'));
  // h2 now holds the network's gateway: its connected route is its own, the reason is membership.
  await t.rejects(makeIpam(store, { host: 'h2', connected: ['10.210.0.0/24 ovg0123456789ab'] }).requestPool(pool('10.210.0.0/24')), {
    code: 'IPAM_POOL_OVERLAP',
    message: /already used on this host by logical network blue/,
  });
  await t.rejects(makeIpam(store, { host: 'h3', connected: ['10.210.0.0/25 eth1'] }).requestPool(pool('10.210.0.0/24')), {
    code: 'SUBNET_HOST_OVERLAP',
    message: /Pool 10\.210\.0\.0\/24 overlaps the host's connected route 10\.210\.0\.0\/25 on eth1/,
  });
});
