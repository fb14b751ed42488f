/**
 * Logical networks and VXLAN tunnels, with in-memory OVS, links, NAT and flows and one real
 * embedded store shared by three "hosts" (three drivers with their own fakes and IPAM).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { joinLogical, leaveLogical } from '../../../src/driver/vxlan/logical.js';
import { NetworkDriver } from '../../../src/driver/network-driver.js';
import { tunnelName, Tunnels, wantedTunnels } from '../../../src/driver/vxlan/tunnels.js';
import type { Ipam } from '../../../src/ipam-driver/ipam.js';
import { createLogger } from '../../../src/log.js';
import type { HostRecord } from '../../../src/store/hosts.js';
import { keys } from '../../../src/store/keys.js';
import { SqliteStore } from '../../../src/store/sqlite.js';
import type { Store } from '../../../src/store/types.js';
import { FakeFlows, FakeLinks, FakeNat, FakeHostPorts, FakeOvs } from '../../helpers/driver-fakes.js';
import { makeIpam, pool } from '../../helpers/ipam.js';
import { waitFor } from '../../helpers/wait.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-logical-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
let n = 0;

const log = createLogger('silent');

interface Host {
  name: string;
  store: Store;
  ovs: FakeOvs;
  flows: FakeFlows;
  ipam: Ipam;
  driver: NetworkDriver;
  tunnels: Tunnels;
}

/** Hosts h1..hN on one store file; `alive` is the registry every host sees. */
function cluster(t: Test, count: number, alive: Map<string, HostRecord>, afterAdding?: (h: Host) => Promise<void>): Host[] {
  const file = path.join(dir, `c${n++}.db`);
  return Array.from({ length: count }, (_, i) => {
    const name = `h${i + 1}`;
    const store = new SqliteStore({ file });
    const ovs = new FakeOvs();
    const links = new FakeLinks();
    ovs.links = links;
    const flows = new FakeFlows();
    const ipam = makeIpam(store, { host: name });
    const host: Host = {
      name,
      store,
      ovs,
      flows,
      ipam,
      driver: undefined as unknown as NetworkDriver,
      tunnels: undefined as unknown as Tunnels,
    };
    host.tunnels = new Tunnels({
      store,
      log,
      ovs,
      self: () => ({ name, vtepIp: `192.0.2.${i + 1}` }),
      hosts: () => alive,
      networks: () => host.driver.localNetworks(),
      ...(afterAdding === undefined ? {} : { afterAdding: () => afterAdding(host) }),
    });
    host.driver = new NetworkDriver({
      store,
      log,
      ovs,
      links,
      nat: new FakeNat(),
      hostPorts: new FakeHostPorts(),
      flows,
      host: name,
      bridge: 'br0',
      datapath: () => 'netdev',
      pools: ipam,
      tunnelMtu: () => 1600,
      onNetworksChanged: () => host.tunnels.schedule(),
    });
    alive.set(name, { name, vtepIp: `192.0.2.${i + 1}`, machineId: name, startedAt: '' });
    t.teardown(async () => {
      await host.tunnels.stop();
      await ipam.stop();
      await store.close();
    });
    return host;
  });
}

const id = (c: string) => c.repeat(64);
const generic = (o: Record<string, string>) => ({ 'com.docker.network.generic': o });

/** Docker's network create on one host: IPAM pool and gateway, then CreateNetwork. */
async function create(h: Host, networkId: string, subnet: string, opts: Record<string, string>): Promise<void> {
  const { poolId } = await h.ipam.requestPool(pool(subnet));
  const { address } = await h.ipam.requestAddress({ poolId, address: '', gateway: true });
  try {
    await h.driver.createNetwork({ networkId, options: generic(opts), ipv4: [{ pool: subnet, gateway: address }], ipv6: [] });
  } catch (err) {
    await h.ipam.releaseAddress(poolId, address.split('/')[0] ?? '');
    await h.ipam.releasePool(poolId);
    throw err;
  }
}

const tunnelPorts = (h: Host) => [...h.ovs.ports].filter(([, p]) => p.externalIds['ovsnet-role'] === 'tunnel');

t.test('wantedTunnels: one per (network, live peer member), never to itself', async (t) => {
  const hosts = new Map<string, HostRecord>([
    ['a', { name: 'a', vtepIp: '10.0.0.1', machineId: 'a', startedAt: '' }],
    ['b', { name: 'b', vtepIp: '10.0.0.2', machineId: 'b', startedAt: '' }],
  ]);
  const logical = new Map([
    [
      'blue',
      {
        name: 'blue',
        encap: 'vxlan' as const,
        vni: 7,
        subnets: [],
        internal: false,
        members: { a: { networkId: 'x', since: '' }, b: { networkId: 'y', since: '' }, c: { networkId: 'z', since: '' } },
        createdBy: 'a',
        createdAt: '',
      },
    ],
  ]);
  const nets = [
    {
      networkId: 'x',
      host: 'a',
      logical: 'blue',
      vni: 7,
      bridge: 'br0',
      tag: 3,
      mtu: 1450,
      internal: false,
      ipv4: [],
      ipv6: [],
      createdAt: '',
    },
  ];
  t.same(
    wantedTunnels('a', nets, logical, hosts),
    [{ name: tunnelName(7, 'b'), bridge: 'br0', tag: 3, vni: 7, peer: 'b', remoteIp: '10.0.0.2' }],
    'c is a member but not alive',
  );
  t.equal(tunnelName(7, 'b').length, 15);
  t.not(tunnelName(7, 'b'), tunnelName(8, 'b'));
  t.not(tunnelName(7, 'b'), tunnelName(7, 'c'));
});

t.test('three hosts join one logical network: VNI once, tunnels to every member, shared gateway', async (t) => {
  const alive = new Map<string, HostRecord>();
  const [h1, h2, h3] = cluster(t, 3, alive);
  if (h1 === undefined || h2 === undefined || h3 === undefined) throw new Error('three hosts');
  await Promise.all([h1, h2, h3].map((h) => h.tunnels.start()));
  // A leftover member of h1 (a create whose answer was lost): the real one takes its place.
  await joinLogical(h1.store, {
    name: 'blue',
    vni: undefined,
    subnets: ['10.80.0.0/24'],
    internal: false,
    host: 'h1',
    networkId: 'ghost',
    now: new Date(),
  });
  await create(h1, id('a'), '10.80.0.0/24', { 'ovsnet.network': 'blue', 'ovsnet.encap': 'vxlan' });
  t.match(
    JSON.parse((await h1.store.get(keys.logicalNetwork('blue')))?.value ?? '{}'),
    { members: { h1: { networkId: id('a') } } },
    'the leftover member was replaced',
  );
  const rec = JSON.parse((await h1.store.get(keys.network(id('a'))))?.value ?? '{}') as {
    vni: number;
    mtu: number;
    logical: string;
    host: string;
  };
  t.match(rec, { vni: 1, mtu: 1550, logical: 'blue', host: 'h1' }, 'VNI allocated; MTU = tunnel MTU - 50');
  t.same(h1.flows.guards.get('br0/1'), ['10.80.0.1'], 'the gateway is guarded against the tunnels');

  await t.rejects(create(h2, id('b'), '10.81.0.0/24', { 'ovsnet.network': 'blue', 'ovsnet.encap': 'vxlan' }), {
    code: 'LOGICAL_NETWORK_MISMATCH',
    message:
      /logical network blue is vxlan VNI 1 with subnet 10\.80\.0\.0\/24 \(created on host h1 at .*\); this request has subnet 10\.81\.0\.0\/24: pass --subnet 10\.80\.0\.0\/24/,
  });
  await t.rejects(create(h2, id('b'), '10.80.0.0/24', { 'ovsnet.network': 'blue', 'ovsnet.encap': 'vxlan', 'ovsnet.tag': '99' }), {
    message: /this request asks for VNI 99: omit -o ovsnet\.tag or pass 1/,
  });
  await t.rejects(create(h2, id('b'), '10.80.0.0/24', {}), {
    code: 'LOGICAL_NETWORK_MISMATCH',
    message: /subnet 10\.80\.0\.0\/24 belongs to logical network blue: add -o ovsnet\.network=blue -o ovsnet\.encap=vxlan/,
  });
  await create(h2, id('b'), '10.80.0.0/24', { 'ovsnet.network': 'blue', 'ovsnet.encap': 'vxlan' });
  await create(h3, id('c'), '10.80.0.0/24', { 'ovsnet.network': 'blue', 'ovsnet.encap': 'vxlan', 'ovsnet.tag': '1' });
  const members = Object.keys(
    (JSON.parse((await h1.store.get(keys.logicalNetwork('blue')))?.value ?? '{}') as { members: object }).members,
  );
  t.same(members.sort(), ['h1', 'h2', 'h3']);
  t.same(h3.flows.guards.get('br0/1'), ['10.80.0.1'], 'one gateway address on every host');

  for (const h of [h1, h2, h3]) {
    await waitFor(() => tunnelPorts(h).length === 2, 3000, `${h.name} has tunnels to both peers`);
    for (const [, p] of tunnelPorts(h))
      t.match(p, { type: 'vxlan', protected: true, options: { key: '1' } }, `${h.name}: keyed by the VNI, protected`);
  }
  t.match(Object.fromEntries(tunnelPorts(h1)), { [tunnelName(1, 'h2')]: { options: { remote_ip: '192.0.2.2', local_ip: '192.0.2.1' } } });

  // ovs-vswitchd restarted: the guard flows are gone until the periodic check puts them back.
  h1.flows.guards.clear();
  t.same(await h1.driver.checkGuards(), ['gateway guard of blue']);
  t.same(h1.flows.guards.get('br0/1'), ['10.80.0.1'], 'guard back');
  t.same(await h1.driver.checkGuards(), [], 'nothing to repair when they are there');

  // Reclaimed by its peers after a long absence, a host joins again at its next reconcile.
  await leaveLogical(h2.store, 'blue', 'h2', undefined);
  t.match(await h2.driver.reconcile(), { repaired: ['member of logical network blue'] });
  t.ok(
    (JSON.parse((await h1.store.get(keys.logicalNetwork('blue')))?.value ?? '{}') as { members: Record<string, unknown> }).members.h2,
    'h2 is a member again',
  );

  // A peer gone from the registry loses its tunnels; back, it gets them again.
  alive.delete('h3');
  h1.tunnels.schedule();
  await waitFor(() => tunnelPorts(h1).length === 1, 3000, 'the tunnel to a dead peer goes');
  alive.set('h3', { name: 'h3', vtepIp: '192.0.2.33', machineId: 'h3', startedAt: '' });
  h1.tunnels.schedule();
  await waitFor(
    () => tunnelPorts(h1).some(([, p]) => p.options?.remote_ip === '192.0.2.33'),
    3000,
    'a peer with a new address gets a new tunnel',
  );

  // Leaving: members go; the last one deletes the logical network and frees its VNI.
  await h3.driver.deleteNetwork(id('c'));
  await waitFor(() => tunnelPorts(h1).length === 1 && tunnelPorts(h3).length === 0, 3000, 'tunnels follow a member leaving');
  t.same(h3.flows.guards.size, 0, 'guard removed');
  await h2.driver.deleteNetwork(id('b'));
  await h1.driver.deleteNetwork(id('a'));
  t.equal(await h1.store.get(keys.logicalNetwork('blue')), undefined, 'the last member deleted the logical network');
  t.equal(await h1.store.get(keys.tag('vni', 1)), undefined, 'and freed its VNI');
  await waitFor(() => tunnelPorts(h1).length === 0, 3000, 'no tunnel left');
});

t.test('after adding tunnel ports (never after removing them) the datapath is refreshed, until that succeeds', async (t) => {
  const alive = new Map<string, HostRecord>();
  const calls: string[] = [];
  let failures = 1;
  const [h1, h2] = cluster(t, 2, alive, async (h) => {
    calls.push(`${h.name} with ${tunnelPorts(h).length} tunnel`);
    if (h.name === 'h1' && failures-- > 0) throw new Error('ovs-vswitchd is restarting');
  });
  if (h1 === undefined || h2 === undefined) throw new Error('two hosts');
  await Promise.all([h1, h2].map((h) => h.tunnels.start()));
  await create(h1, id('p'), '10.82.0.0/24', { 'ovsnet.network': 'pink', 'ovsnet.encap': 'vxlan' });
  await h1.tunnels.settled;
  t.same(calls, [], 'no tunnel, nothing to refresh');
  await create(h2, id('q'), '10.82.0.0/24', { 'ovsnet.network': 'pink', 'ovsnet.encap': 'vxlan' });
  await waitFor(() => calls.length === 3, 5000, 'refreshed again after a failure');
  t.same(
    calls.sort(),
    ['h1 with 1 tunnel', 'h1 with 1 tunnel', 'h2 with 1 tunnel'],
    'each host once its port was there; the failed call retried',
  );
  alive.delete('h2');
  h1.tunnels.schedule();
  await waitFor(() => tunnelPorts(h1).length === 0, 3000, 'the tunnel goes with the peer');
  await h1.tunnels.settled;
  t.equal(calls.length, 3, 'a removal refreshes nothing');
});

t.test('CreateEndpoint binds the reservation to the endpoint, finding its pool in the IPAM index', async (t) => {
  const [h1] = cluster(t, 1, new Map());
  if (h1 === undefined) throw new Error('one host');
  await create(h1, id('k'), '10.83.0.0/24', {});
  for (let i = 0; i < 20; i++) await h1.ipam.requestPool(pool(`10.84.${i}.0/24`)); // other pools
  const { address } = await h1.ipam.requestAddress({ poolId: 'LocalDefault/10.83.0.0/24', address: '', gateway: false });
  const listed: string[] = [];
  const list = h1.store.list.bind(h1.store);
  h1.store.list = (prefix) => (listed.push(prefix), list(prefix));
  await h1.driver.createEndpoint({ networkId: id('k'), endpointId: id('e'), address, addressV6: '', mac: '', portmap: [] });
  const rec = JSON.parse((await h1.store.get(keys.address('LocalDefault/10.83.0.0/24', address.split('/')[0] ?? '')))?.value ?? '{}') as {
    endpoint?: string;
  };
  t.equal(rec.endpoint, id('e'), 'the reservation names its endpoint');
  t.same(
    listed.filter((p) => p === keys.pools),
    [],
    'without reading every pool record',
  );
});

t.test('a logical network needs a tunnel address', async (t) => {
  const store = new SqliteStore({ file: path.join(dir, `v${n++}.db`) });
  t.teardown(() => store.close());
  const ovs = new FakeOvs();
  const driver = new NetworkDriver({
    store,
    log,
    ovs,
    links: new FakeLinks(),
    nat: new FakeNat(),
    hostPorts: new FakeHostPorts(),
    flows: new FakeFlows(),
    host: 'h1',
    bridge: 'br0',
    datapath: () => 'netdev',
    vtepIp: '',
  });
  await t.rejects(
    driver.createNetwork({
      networkId: id('g'),
      options: generic({ 'ovsnet.network': 'x', 'ovsnet.encap': 'vxlan' }),
      ipv4: [{ pool: '10.93.0.0/24', gateway: '10.93.0.1/24' }],
      ipv6: [],
    }),
    { code: 'LOGICAL_NETWORK_INVALID', message: /set OVSNET_VTEP_IP/ },
  );
  t.equal(await store.get(keys.logicalNetwork('x')), undefined);
});

t.test('a logical network needs ovsnet IPAM, and a refused one leaves nothing', async (t) => {
  const [h1] = cluster(t, 1, new Map());
  if (h1 === undefined) throw new Error('one host');
  await t.rejects(
    h1.driver.createNetwork({
      networkId: id('d'),
      options: generic({ 'ovsnet.network': 'red', 'ovsnet.encap': 'vxlan' }),
      ipv4: [{ pool: '10.90.0.0/24', gateway: '10.90.0.1/24' }],
      ipv6: [],
    }),
    {
      code: 'LOGICAL_NETWORK_INVALID',
      message: /logical network red needs ovsnet's IPAM for subnet 10\.90\.0\.0\/24.*--ipam-driver ovsnet/,
    },
  );
  t.equal(await h1.store.get(keys.logicalNetwork('red')), undefined, 'no logical network left behind');
  t.same((await h1.store.list(keys.tags)).kvs, [], 'no VNI or VLAN tag left behind');
  await create(h1, id('e'), '10.91.0.0/24', { 'ovsnet.network': 'green', 'ovsnet.encap': 'vxlan', 'ovsnet.tag': '5000' });
  await t.rejects(create(h1, id('f'), '10.92.0.0/24', { 'ovsnet.network': 'mauve', 'ovsnet.encap': 'vxlan', 'ovsnet.tag': '5000' }), {
    code: 'TAG_TAKEN',
    message: /VNI 5000 is used by logical network green/,
  });
});
