/**
 * Logical networks across hosts (test/helpers/logical-hosts.ts: drivers with in-memory side
 * effects sharing one real embedded store): one VNI, shared pools, gateways, refusals.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { joinLogical, leaveLogical } from '../../../src/driver/vxlan/logical.js';
import { NetworkDriver } from '../../../src/driver/network-driver.js';
import { FEATURE, cookieOf, only } from '../../../src/driver/ovs/cookies.js';
import { guardFlows } from '../../../src/driver/ovs/flows.js';
import { tunnelName } from '../../../src/driver/vxlan/tunnels.js';
import { createLogger } from '../../../src/lib/log.js';
import type { HostRecord } from '../../../src/cluster/hosts.js';
import { keys } from '../../../src/store/keys.js';
import { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import { FakeFlows, FakeHostPorts, FakeLinks, FakeNat, FakeOvs } from '../../helpers/driver-fakes.js';
import { pool } from '../../helpers/ipam.js';
import { waitFor } from '../../helpers/wait.js';
import { cluster, create, generic, id, tunnelPorts } from '../../helpers/logical-hosts.js';
import { readLogical } from '../../../src/driver/records/logical-records.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-logical-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
let n = 0;
const log = createLogger('silent');

t.test('three hosts join one logical network: VNI once, tunnels to every member, shared gateway', async (t) => {
  const alive = new Map<string, HostRecord>();
  const [h1, h2, h3] = cluster(t, 3, alive);
  if (h1 === undefined || h2 === undefined || h3 === undefined) throw new Error('three hosts');
  await Promise.all([h1, h2, h3].map((h) => h.tunnels.start()));
  // A leftover member of h1 (a create whose answer was lost): the real one takes its place.
  await joinLogical(h1.store, {
    name: 'blue',
    encap: 'vxlan',
    vni: undefined,
    subnets: ['10.80.0.0/24'],
    internal: false,
    host: 'h1',
    networkId: 'ghost',
    now: new Date(),
  });
  await create(h1, id('a'), '10.80.0.0/24', { 'ovsnet.network': 'blue', 'ovsnet.encap': 'vxlan' });
  t.match((await readLogical(h1.store, 'blue'))?.record, { members: { h1: { networkId: id('a') } } }, 'the leftover member was replaced');
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
  const members = Object.keys((await readLogical(h1.store, 'blue'))?.record.members ?? {});
  t.same(members.sort(), ['h1', 'h2', 'h3']);
  t.same(h3.flows.guards.get('br0/1'), ['10.80.0.1'], 'one gateway address on every host');

  for (const h of [h1, h2, h3]) {
    await waitFor(() => tunnelPorts(h).length === 2, 3000, `${h.name} has tunnels to both peers`);
    for (const [, p] of tunnelPorts(h))
      t.match(p, { type: 'vxlan', protected: true, options: { key: '1' } }, `${h.name}: keyed by the VNI, protected`);
  }
  t.match(Object.fromEntries(tunnelPorts(h1)), {
    [tunnelName(1, '192.0.2.2') ?? '']: { options: { remote_ip: '192.0.2.2', local_ip: '192.0.2.1' } },
  });

  // ovs-vswitchd restarted: the guard flows are gone until the bridge's flows are synced again.
  const guard = only(cookieOf(FEATURE.guardVni, 1));
  await h1.driver.upkeep.syncFlows();
  t.same(h1.openflow.flowsOf('br0', guard).sort(), guardFlows({ vni: 1 }, ['10.80.0.1']).sort(), 'the guard is in the synced state');
  h1.openflow.restart();
  t.same(h1.openflow.flowsOf('br0', guard), []);
  t.equal((await h1.driver.upkeep.syncFlows()).modifications, 3, 'the base flow and both guard flows put back');
  t.same(h1.openflow.flowsOf('br0', guard).sort(), guardFlows({ vni: 1 }, ['10.80.0.1']).sort(), 'guard back');
  t.equal((await h1.driver.upkeep.syncFlows()).modifications, 0, 'nothing to repair when they are there');

  // Reclaimed by its peers after a long absence, a host joins again at its next reconcile.
  await leaveLogical(h2.store, 'blue', 'h2', undefined);
  t.match(await h2.driver.reconcile(), { repaired: ['member of logical network blue'] });
  t.ok((await readLogical(h1.store, 'blue'))?.record.members.h2, 'h2 is a member again');

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
