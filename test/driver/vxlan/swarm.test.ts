/**
 * Swarm networks (src/driver/vxlan/swarm.ts) with in-memory side effects on one real embedded
 * store: AllocateNetwork claims a VNI once whatever the retries, nodes' CreateNetwork join it,
 * FreeNetwork frees it once the last node has left, and what cannot work is refused.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { NetworkDriver } from '../../../src/driver/network-driver.js';
import { Tunnels } from '../../../src/driver/vxlan/tunnels.js';
import { createLogger } from '../../../src/lib/log.js';
import type { HostRecord } from '../../../src/cluster/hosts.js';
import { keys } from '../../../src/store/keys.js';
import { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import { FakeFlows, FakeHostPorts, FakeLinks, FakeNat, FakeOvs } from '../../helpers/driver-fakes.js';
import { loadConfig } from '../../../src/config/config.js';
import { Ipam } from '../../../src/ipam-driver/ipam.js';
import { waitFor } from '../../helpers/wait.js';
import { readLogical } from '../../../src/driver/records/logical-records.js';

const log = createLogger('silent');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-swarm-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
const file = path.join(dir, 'state.db');
const alive = new Map<string, HostRecord>();

/** A node: a driver of `scope` with its tunnels (UDP 4790), on the shared store. */
function node(name: string, scope: 'local' | 'global') {
  const store = new SqliteStore({ file });
  const ovs = new FakeOvs();
  const links = new FakeLinks();
  ovs.links = links;
  const vtepIp = `192.0.2.${alive.size + 1}`;
  const driver: NetworkDriver = new NetworkDriver({
    ...{ store, log, ovs, links, nat: new FakeNat(), hostPorts: new FakeHostPorts(), flows: new FakeFlows() },
    ...{ host: name, bridge: 'br0', datapath: () => 'netdev', tunnelMtu: () => 1600, vtepIp, scope },
    onNetworksChanged: () => tunnels.schedule(),
  });
  const tunnels = new Tunnels({
    ...{ store, log, ovs, self: () => ({ name, vtepIp }), hosts: () => alive },
    ...{ networks: () => driver.localNetworks(), vxlanPort: 4790 },
  });
  alive.set(name, { name, vtepIp, machineId: name, startedAt: '' });
  t.teardown(async () => {
    await tunnels.stop();
    await store.close();
  });
  return { name, store, ovs, driver, tunnels };
}

const [m1, w1, w2] = [node('m1', 'global'), node('w1', 'global'), node('w2', 'global')];
await Promise.all([m1, w1, w2].map((n) => n.tunnels.start()));
const SWARM_ID = 'k2xv9q7lmz0c4t1b8ysw3ah6e';
const ipv4 = [{ pool: '10.90.0.0/24', gateway: '10.90.0.1/24' }];
const allocate = (networkId: string, options: Record<string, string> = {}) =>
  m1.driver.allocateNetwork({ networkId, options, subnets: ['10.90.0.0/24'] });
const create = (n: typeof m1, networkId: string, options: Record<string, string>, v4 = ipv4) =>
  n.driver.createNetwork({ networkId, options: { 'com.docker.network.generic': options }, ipv4: v4, ipv6: [] });
const record = async (networkId: string) => (await m1.store.get(keys.logicalNetwork(`swarm-${networkId}`)))?.value;
const tunnelsOf = (n: typeof m1) => [...n.ovs.ports.values()].filter((p) => p.externalIds['ovsnet-role'] === 'tunnel');

t.test('AllocateNetwork claims a VNI once: a retry or a new leader gets the same answer', async (t) => {
  const first = await allocate(SWARM_ID);
  t.same(first, { 'ovsnet.encap': 'vxlan', 'ovsnet.tag': '1' });
  // swarmkit sends the spec's options merged with the last answer on a new leader.
  t.same(await allocate(SWARM_ID, first), first, 'again with its own answer');
  t.same(await allocate(SWARM_ID), first, 'again without');
  t.same(
    await m1.driver.allocateNetwork({
      networkId: 'a'.repeat(25),
      options: { 'ovsnet.tag': '42', 'com.docker.network.driver.mtu': '1400' },
      subnets: [],
    }),
    {
      'ovsnet.encap': 'vxlan',
      'ovsnet.tag': '42',
      'com.docker.network.driver.mtu': '1400',
    },
  );
  await t.rejects(allocate('b'.repeat(25), { 'ovsnet.tag': '42' }), {
    code: 'TAG_TAKEN',
    message: /VNI 42 is used by logical network swarm-a{25}/,
  });
  await t.rejects(allocate(SWARM_ID, { 'ovsnet.tag': '7' }), { code: 'TAG_TAKEN', message: /has VNI 1 already/ });
  await m1.driver.freeNetwork('a'.repeat(25));
  t.equal(await m1.store.get(keys.tag('vni', 42)), undefined, 'freed with no member: VNI 42 is free again');
});

t.test('what cannot work in swarm is refused, saying what to use instead', async (t) => {
  await t.rejects(allocate('c'.repeat(25), { encrypted: '' }), {
    code: 'SWARM_UNSUPPORTED',
    message: /overlay driver \(-d overlay --opt encrypted\)/,
  });
  await t.rejects(allocate('c'.repeat(25), { 'ovsnet.network': 'blue' }), { message: /drop -o ovsnet.network/ });
  await t.rejects(allocate('c'.repeat(25), { 'ovsnet.encap': 'vlan' }), { message: /drop -o ovsnet.encap/ });
  t.equal(await record('c'.repeat(25)), undefined, 'nothing claimed');
  const local = node('solo', 'local');
  await t.rejects(create(local, SWARM_ID, { 'ovsnet.encap': 'vxlan', 'ovsnet.tag': '1' }), {
    code: 'SWARM_UNSUPPORTED',
    message: /OVSNET_SCOPE=local.*Set OVSNET_SCOPE=global on every node/,
  });
  t.equal(local.driver.scope, 'local');
  await t.rejects(create(w1, 'd'.repeat(64), {}), { code: 'SWARM_UNSUPPORTED', message: /serves Docker swarm networks only/ });
  await t.rejects(create(w1, 'e'.repeat(25), { 'ovsnet.encap': 'vxlan', 'ovsnet.tag': '9' }), {
    code: 'SWARM_NOT_ALLOCATED',
    message: /swarm network e{25} has no allocation/,
  });
  t.same(await w1.driver.localNetworks(), [], 'no network was made');
  const { minPrefix, defaultPools } = loadConfig({});
  const swarmIpam = new Ipam({
    store: w1.store,
    log,
    host: 'w1',
    defaultPools,
    hostNets: () => [],
    minPrefix,
    readyTimeoutMs: 5000,
    swarmScope: true,
  });
  await t.rejects(swarmIpam.requestPool({ addressSpace: 'GlobalDefault', pool: '10.90.0.0/24', subPool: '', options: {}, v6: false }), {
    code: 'SWARM_UNSUPPORTED',
    message: /create the network without --ipam-driver/,
  });
  t.match(
    await swarmIpam.requestPool({ addressSpace: 'LocalDefault', pool: '10.91.0.0/24', subPool: '', options: {}, v6: false }),
    {
      pool: '10.91.0.0/24',
    },
    'pools of one host as before',
  );
  await swarmIpam.stop();
});

t.test('nodes join the allocated network: tunnels on UDP 4790 between them; it outlives its last node until freed', async (t) => {
  const opts = await allocate(SWARM_ID);
  await create(w1, SWARM_ID, opts);
  await create(w2, SWARM_ID, opts);
  await create(w2, SWARM_ID, opts); // Docker repeats a create: nothing changes
  const [net] = await w1.driver.localNetworks();
  t.match(net, { logical: `swarm-${SWARM_ID}`, vni: 1, mtu: 1550 });
  await waitFor(() => tunnelsOf(w1).length === 1 && tunnelsOf(w2).length === 1, 5000, 'a tunnel each way');
  t.match(tunnelsOf(w1)[0]?.options, { remote_ip: '192.0.2.3', key: '1', dst_port: '4790' });
  await w1.driver.deleteNetwork(SWARM_ID);
  await w2.driver.deleteNetwork(SWARM_ID);
  await waitFor(() => tunnelsOf(w1).length === 0 && tunnelsOf(w2).length === 0, 5000, 'the tunnels to go');
  t.match((await readLogical(m1.store, `swarm-${SWARM_ID}`))?.record, { vni: 1, members: {} }, 'no node has it: still allocated');
  await create(w1, SWARM_ID, opts); // a task comes back to a node
  await m1.driver.freeNetwork(SWARM_ID); // docker network rm while w1 still leaves
  t.match(JSON.parse((await record(SWARM_ID)) ?? '{}'), { freedAt: String }, 'freed, w1 still a member');
  await t.rejects(create(w2, SWARM_ID, opts), { code: 'SWARM_NOT_ALLOCATED' }, 'no node joins a freed network');
  await m1.driver.freeNetwork(SWARM_ID); // FreeNetwork retried
  await w1.driver.deleteNetwork(SWARM_ID);
  t.equal(await record(SWARM_ID), undefined, 'gone with its last node');
  t.equal(await m1.store.get(keys.tag('vni', 1)), undefined, 'and its VNI');
});

t.test(
  'AllocateNetwork changes nothing where no swarm manager would call it: a local-scope ovsnet, an ID not of the swarm form',
  async (t) => {
    const local = node('l1', 'local');
    const before = (await local.store.list('')).kvs.length;
    await t.rejects(local.driver.allocateNetwork({ networkId: 'q2xv9q7lmz0c4t1b8ysw3ah6e', options: {}, subnets: [] }), {
      code: 'SWARM_UNSUPPORTED',
      message: /OVSNET_SCOPE=local: set OVSNET_SCOPE=global/,
    });
    await t.rejects(m1.driver.allocateNetwork({ networkId: 'c0ffee'.padEnd(64, '1'), options: {}, subnets: [] }), {
      code: 'SWARM_UNSUPPORTED',
      message: /swarm network IDs are 25 lowercase letters and digits/,
    });
    t.equal((await local.store.list('')).kvs.length, before, 'no key written');
    t.equal(await m1.store.get(keys.logicalNetwork(`swarm-${'c0ffee'.padEnd(64, '1')}`)), undefined, 'no logical network claimed');
  },
);
