/**
 * Groups of a logical network across hosts, pure: what the other hosts' records add to a
 * host's plan (remotePart) and the flows that makes (group-remote.ts). Their effect on traffic
 * is test/e2e/cluster.test.ts's "endpoint groups of a logical network across hosts".
 */
import t from 'tap';
import { remoteNetworks, remotePart } from '../../../src/driver/groups/remote-family.js';
import type { EndpointRecord, NetworkRecord } from '../../../src/driver/model/records.js';
import { groupFlows, type GroupPlan } from '../../../src/driver/ovs/groups/group-flows.js';
import { REMOTE_TABLE, ROUTE_TABLE, routerMac } from '../../../src/driver/ovs/groups/group-remote.js';
import { tunnelName } from '../../../src/driver/vxlan/tunnels.js';

const base = { bridge: 'ovsnet0', ipv4: [{ pool: '10.9.0.0/24', gateway: '10.9.0.1/24' }], ipv6: [], createdAt: '' };
const net = (id: string, host: string, extra: Partial<NetworkRecord>): NetworkRecord =>
  ({ ...base, networkId: id, host, tag: 1, ...extra }) as unknown as NetworkRecord;
const ep = (networkId: string, n: number, extra: Partial<EndpointRecord> = {}): EndpointRecord => ({
  networkId,
  endpointId: `${networkId}-ep${n}`.padEnd(64, '0'),
  address: `10.9.0.${n}/24`,
  mac: `02:42:0a:09:00:${n.toString(16).padStart(2, '0')}`,
  hostVeth: `v${n}`,
  containerVeth: `c${n}`,
  portmap: [],
  createdAt: '',
  ...extra,
});

const mine = net('p1', 'h1', { logical: 'shop', vni: 7, tag: 10 });
const networks = [
  mine,
  net('web1', 'h1', { tag: 11, group: { name: 'web', parent: 'p1', allow: [] } }),
  net('p2', 'h2', { logical: 'shop', vni: 7, tag: 20 }),
  net('db2', 'h2', { tag: 21, group: { name: 'db', parent: 'p2', allow: [{ group: 'web', port: { number: 5432, proto: 'tcp' } }] } }),
  net('web2', 'h2', { tag: 22, group: { name: 'web', parent: 'p2', allow: [] } }),
  net('p3', 'h3', { logical: 'shop', vni: 7, tag: 30 }),
  net('x3', 'h3', { logical: 'other', vni: 8, tag: 31 }),
];
const endpoints: Record<string, EndpointRecord[]> = {
  db2: [ep('db2', 21)],
  web2: [ep('web2', 22)],
  p3: [ep('p3', 31)],
  x3: [ep('x3', 99)],
};
const vteps = new Map([
  ['h2', '192.0.2.2'],
  ['h3', '192.0.2.3'],
]);
const tunnelTo = (host: string) => tunnelName(7, vteps.get(host) ?? '') ?? '';
const ofports = new Map([
  [tunnelTo('h2'), 40],
  [tunnelTo('h3'), 41],
]);
const inputs = {
  self: 'h1',
  parent: mine,
  networks,
  endpointsOf: (id: string) => endpoints[id] ?? [],
  localTags: new Map([
    ['shop', 10],
    ['web', 11],
  ]),
  ofports,
  vtepOf: (host: string) => vteps.get(host),
};

t.test("the family on other hosts: their parent's network and its groups, no other logical network's", async (t) => {
  t.same(
    remoteNetworks('h1', 'shop', networks)
      .map((n) => n.networkId)
      .sort(),
    ['db2', 'p2', 'p3', 'web2'],
  );
  t.same(remoteNetworks('h1', 'nothing', networks), []);
});

t.test('each remote member: its address, MAC, group number and the tunnel to its host', async (t) => {
  const { plan, groups, skipped } = remotePart(inputs);
  t.ok(groups, 'h2 has groups');
  t.same(skipped, []);
  t.equal(plan?.vni, 7);
  t.equal(plan?.routerMac, '02:0f:00:00:00:07');
  const byAddress = new Map(plan?.members.map((m) => [m.address, m]));
  t.equal(byAddress.get('10.9.0.21')?.tunnel, 40);
  t.equal(byAddress.get('10.9.0.31')?.tunnel, 41);
  t.notOk(byAddress.has('10.9.0.99'), 'another logical network is not the family');
  const names = [...(plan?.groups.values() ?? [])].map((g) => `${g.name}@${g.host}`).sort();
  t.same(names, ['db@h2', 'shop@h2', 'shop@h3', 'web@h2']);
});

t.test("allows: the receiver's own rule, resolved to this host's tags, and the same group by name", async (t) => {
  const { plan } = remotePart(inputs);
  const number = (name: string, host: string) => [...(plan?.groups ?? [])].find(([, g]) => g.name === name && g.host === host)?.[0];
  const db = number('db', 'h2');
  const web2 = number('web', 'h2');
  const shop3 = number('shop', 'h3');
  t.same(
    plan?.allows.filter((a) => a.to === db),
    [{ to: db, from: 11, port: { number: 5432, proto: 'tcp' } }],
    'db allows web (tag 11 here) on 5432/tcp only',
  );
  t.same(
    plan?.allows.filter((a) => a.to === web2),
    [{ from: 11, to: web2 }],
    'web reaches web on another host',
  );
  t.same(
    plan?.allows.filter((a) => a.to === shop3),
    [{ from: 10, to: shop3 }],
    "the parent's own containers reach each other",
  );
});

t.test('a member whose host has no tunnel yet is left out, and said so', async (t) => {
  const { plan, skipped } = remotePart({ ...inputs, ofports: new Map([[tunnelTo('h2'), 40]]) });
  t.equal(skipped.length, 1);
  t.match(skipped[0], /^h3\//);
  t.notOk(plan?.members.some((m) => m.address === '10.9.0.31'));
});

t.test(
  "a member's tunnel is the port named by its host's address: unregistered, or moved to an address with no port yet, it is left out",
  async (t) => {
    const unregistered = remotePart({ ...inputs, vtepOf: (host) => (host === 'h3' ? undefined : vteps.get(host)) });
    t.same(
      unregistered.skipped.map((s) => s.split('/')[0]),
      ['h3'],
    );
    const moved = remotePart({ ...inputs, vtepOf: (host) => (host === 'h3' ? '192.0.2.33' : vteps.get(host)) });
    t.same(
      moved.skipped.map((s) => s.split('/')[0]),
      ['h3'],
      "h3's port is still the one to its old address",
    );
    t.equal(new Map(moved.plan?.members.map((m) => [m.address, m])).get('10.9.0.21')?.tunnel, 40);
  },
);

t.test('no family elsewhere, or not a logical parent: nothing added', async (t) => {
  t.same(remotePart({ ...inputs, networks: [mine] }), { plan: undefined, groups: false, skipped: [] });
  const { vni: _v, ...oneHost } = mine;
  t.same(remotePart({ ...inputs, parent: oneHost }), { plan: undefined, groups: false, skipped: [] });
});

t.test('the flows: routed to a remote member only through the allow check, delivered only when routed', async (t) => {
  const { plan: remote } = remotePart(inputs);
  const plan: GroupPlan = {
    parentTag: 10,
    gateway: { ofport: 1, mac: '02:00:00:00:00:01', address: '10.9.0.1' },
    subnet: '10.9.0.0/24',
    groups: [10, 11],
    members: [{ ofport: 5, mac: '02:42:0a:09:00:05', address: '10.9.0.5', group: 11 }],
    allows: [],
    ...(remote === undefined ? {} : { remote }),
  };
  const flows = groupFlows(plan);
  const router = routerMac(7);
  t.ok(
    flows.some((f) => /table=43,priority=20,reg7=10,ip,nw_dst=10\.9\.0\.21,actions=load:\d+->NXM_NX_REG4\[\],resubmit\(,44\)/.test(f)),
    'to a remote member: its group into reg4, then the allow check',
  );
  t.ok(
    flows.some(
      (f) =>
        f.includes(`table=${ROUTE_TABLE},`) && f.includes(`set_field:${router}->eth_src,set_field:02:42:0a:09:00:15->eth_dst,output:40`),
    ),
    'routed with the router MAC out of the tunnel to h2',
  );
  t.ok(
    flows.some((f) => f.includes(`table=${REMOTE_TABLE},`) && /reg6=11,reg4=\d+,tcp,tp_dst=5432,actions=ct\(commit,zone=10/.test(f)),
    'web -> db: 5432/tcp committed with the sender group',
  );
  t.ok(
    flows.some((f) => f.includes(`table=${REMOTE_TABLE},priority=1,`) && f.endsWith('actions=drop')),
    'anything else: dropped',
  );
  t.ok(
    flows.some((f) => f.includes(`tun_id=7,dl_src=${router},dl_dst=02:42:0a:09:00:05,ip,`) && f.includes('ct(zone=10,table=42)')),
    'routed from a tunnel to the local member: through the member table',
  );
  t.ok(
    flows.some((f) => f.includes('priority=399,tun_id=7,dl_dst=02:42:0a:09:00:05,actions=drop')),
    'anything else from a tunnel to it: dropped',
  );
  t.ok(
    flows.some((f) => f.includes(`priority=402,in_port=5,dl_src=${router},actions=drop`)),
    'a member cannot send as the router',
  );
  t.ok(
    flows.some((f) => f.includes('tun_id=7,arp,actions=drop')),
    'no ARP across hosts',
  );
});

t.test("another host's hostile records: nothing of them reaches a flow", async (t) => {
  const inject = ',actions=output:4242';
  const hostile: Record<string, EndpointRecord[]> = {
    db2: [
      ep('db2', 21, { mac: `02:42:0a:09:00:15${inject}` }),
      ep('db2', 22, { address: `10.9.0.22${inject}/24` }),
      ep('db2', 23, { address: '10.8.0.23/24' }),
      ep('db2', 24, { mac: '03:00:00:00:00:01' }),
      ep('db2', 25, { address: '10.9.0.025/24' }),
      ep('db2', 26),
    ],
  };
  const nets = networks.map((n) =>
    n.networkId === 'db2'
      ? ({
          ...n,
          group: { name: 'db', parent: 'p2', allow: [{ group: 'web', port: { number: 80, proto: `tcp${inject}` } }] },
        } as unknown as NetworkRecord)
      : n.networkId === 'web2'
        ? { ...n, group: { name: `web${inject}`, parent: 'p2', allow: [] } }
        : n,
  );
  const { plan, skipped } = remotePart({ ...inputs, networks: nets, endpointsOf: (id) => hostile[id] ?? [] });
  t.same(
    plan?.members.map((m) => m.address),
    ['10.9.0.26'],
    'only the well-formed endpoint: no injected MAC or address, none outside the subnet, no multicast MAC, no non-canonical address',
  );
  t.equal(skipped.length, 5);
  t.notOk(
    plan?.allows.some((a) => a.port !== undefined),
    'a malformed allow rule allows nothing',
  );
  t.notOk(
    [...(plan?.groups.values() ?? [])].some((g) => g.name.includes(',')),
    'a group with a malformed name is left out',
  );
  const flows = groupFlows({
    parentTag: 10,
    gateway: { ofport: 1, mac: '02:00:00:00:00:01', address: '10.9.0.1' },
    subnet: '10.9.0.0/24',
    groups: [10],
    members: [],
    allows: [],
    ...(plan === undefined ? {} : { remote: plan }),
  });
  t.notOk(
    flows.some((f) => f.includes(inject)),
    'no flow holds the injected text',
  );
});
