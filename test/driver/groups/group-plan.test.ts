/** A parent and its groups turned into group-flows.ts's plan (pure). */
import t from 'tap';
import { planGroups, type GroupNetwork } from '../../../src/driver/groups/group-plan.js';

const gateway = { port: 'ovg-shop', mac: '02:00:00:00:00:01', cidr: '10.50.0.1/23' };
const ep = (hostVeth: string, address: string | undefined, mac = '02:00:00:00:00:09') => ({
  hostVeth,
  mac,
  ...(address === undefined ? {} : { address }),
});
const networks: GroupNetwork[] = [
  { name: 'shop', tag: 10, allow: [{ group: 'web' }], endpoints: [ep('vp1', '10.50.0.31/23')] },
  {
    name: 'web',
    tag: 11,
    allow: [],
    qos: { dscp: 10 },
    endpoints: [
      { ...ep('va1', '10.50.0.11/23'), qos: { rateKbps: 1000, burstKbit: 500 } },
      ep('va2', '10.50.1.12/23'),
      ep('vnew', '10.50.0.13/23'),
    ],
  },
  {
    name: 'db',
    tag: 12,
    allow: [{ group: 'web', port: { number: 5432, proto: 'tcp' } }, { group: 'cache' }],
    endpoints: [ep('vb1', '10.50.0.21/23'), ep('v6', undefined)],
  },
];
const ofports = new Map([
  ['ovg-shop', 1],
  ['vp1', 5],
  ['va1', 2],
  ['va2', 3],
  ['vb1', 4],
  ['v6', 6],
]);

t.test("members by port and group, the parent's subnet, allows by tag", async (t) => {
  const r = planGroups(10, gateway, networks, ofports);
  t.same(r?.plan.gateway, { ofport: 1, mac: '02:00:00:00:00:01', address: '10.50.0.1' });
  t.equal(r?.plan.subnet, '10.50.0.0/23');
  t.same(r?.plan.groups, [10, 11, 12]);
  t.same(
    r?.plan.members.map((m) => [m.ofport, m.address, m.group]),
    [
      [5, '10.50.0.31', 10],
      [2, '10.50.0.11', 11],
      [3, '10.50.1.12', 11],
      [4, '10.50.0.21', 12],
    ],
  );
  t.same(r?.plan.allows, [
    { to: 10, from: 11 },
    { to: 12, from: 11, port: { number: 5432, proto: 'tcp' } },
  ]);
  t.same(r?.skipped, ['vnew', 'v6'], 'not joined yet, or no IPv4 address');
  t.same(
    r?.plan.members.map((m) => m.qos),
    [undefined, { rateKbps: 1000, burstKbit: 500, dscp: 10 }, { dscp: 10 }, undefined],
    "each member's QoS: its own over its network's",
  );
  t.same(r?.unknown, ['db <- cache']);
});

t.test('no plan while the gateway has no port', async (t) => {
  t.equal(planGroups(10, gateway, networks, new Map([['va1', 2]])), undefined);
});

t.test("a dual-stack parent: members by IPv6 address too, the parent's IPv6 subnet and gateway", async (t) => {
  const dual = networks.map((n) => ({
    ...n,
    endpoints: n.endpoints.map((e) => (e.hostVeth === 'va1' ? { ...e, addressV6: 'fd00:50::11/64' } : e)),
  }));
  const r = planGroups(10, { ...gateway, cidr6: 'fd00:50::1/64' }, dual, ofports);
  t.same(r?.plan.gateway, { ofport: 1, mac: '02:00:00:00:00:01', address: '10.50.0.1', address6: 'fd00:50::1' });
  t.equal(r?.plan.subnet6, 'fd00:50::/64');
  t.same(
    r?.plan.members.map((m) => m.address6),
    [undefined, 'fd00:50::11', undefined, undefined],
    'an endpoint without an IPv6 address is an IPv4 member only',
  );
  const v4 = planGroups(10, gateway, dual, ofports);
  t.equal(v4?.plan.subnet6, undefined, 'an IPv4 parent: no IPv6 subnet');
  t.notOk(
    v4?.plan.members.some((m) => m.address6 !== undefined),
    'nor IPv6 members',
  );
});
