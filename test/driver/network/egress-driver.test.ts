/**
 * The driver's egress and ingress steps against in-memory OVS and OpenFlow: CreateNetwork's
 * refusals (nothing made), the network's flows following Join, published ports, DeleteEndpoint,
 * DeleteNetwork and the periodic sync; a Join whose rules cannot be applied fails; networks
 * without rules cost no OpenFlow call; resolvers unknown let port 53 pass, said once. The flows'
 * effect on traffic: test/e2e/driver-egress.test.ts.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { NetworkDriver } from '../../../src/driver/network-driver.js';
import type { DriverDeps, GroupsApi, QosApi } from '../../../src/driver/effects/deps.js';
import { egressScope } from '../../../src/driver/network/egress-flows.js';
import { createLogger } from '../../../src/lib/log.js';
import { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import { keys } from '../../../src/store/keys.js';
import type { Resolvers } from '../../../src/host/resolvers.js';
import { fakeOpenFlow, fakeSideEffects } from '../../helpers/driver-fakes.js';
import { NET, NET2, net } from '../../helpers/driver-setup.js';

const GW_MAC = '02:00:00:00:00:01';

function setup(t: Test, opts: { resolvers?: () => Promise<Resolvers>; openflow?: boolean } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-egress-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const store = new SqliteStore({ file: path.join(dir, 'state.db') });
  t.teardown(() => store.close());
  const fx = fakeSideEffects();
  const qos: QosApi = {
    ofports: async () => new Map([...fx.ovs.ports.keys()].map((p, i) => [p, i + 1])),
    apply: async () => undefined,
    remove: async () => undefined,
  };
  const groups: GroupsApi = { apply: async () => undefined, remove: async () => undefined, mac: async () => GW_MAC };
  const openflow = fakeOpenFlow(fx.ovs);
  const warnings: string[] = [];
  const log = createLogger('silent');
  log.warn = (...args: unknown[]) => void warnings.push(String(args.find((a) => typeof a === 'string')));
  const deps: DriverDeps = {
    store,
    log,
    ...fx,
    qos,
    groups,
    ...(opts.openflow === false ? {} : { openflow }),
    host: 'h1',
    bridge: 'br0',
    datapath: () => 'netdev',
    resolvers: opts.resolvers ?? (async () => ({ servers: ['192.0.2.53'], from: '/etc/resolv.conf' })),
  };
  return { driver: new NetworkDriver(deps), openflow, store, warnings, ...fx };
}

const generic = (o: Record<string, string>) => ({ 'com.docker.network.generic': o });
const endpoint = (networkId: string, id: string, address: string) => ({
  networkId,
  endpointId: id.repeat(64),
  address: `${address}/24`,
  addressV6: '',
  mac: '',
  portmap: [],
});
const tagOf = async (driver: NetworkDriver, id: string) => (await driver.localNetworks()).find((n) => n.networkId === id)?.tag ?? -1;

t.test('Join brings the network its flows, before the container runs; DeleteEndpoint and DeleteNetwork take them', async (t) => {
  const { driver, openflow } = setup(t);
  await driver.createNetwork(net(NET, generic({ 'ovsnet.egress': '198.19.0.10/32:8080/tcp', 'ovsnet.ingress': '198.18.0.0/24' })));
  const tag = await tagOf(driver, NET);
  const mine = () => openflow.flowsOf('br0', egressScope(tag));
  t.same(mine(), [], 'no member yet: nothing to rule');
  await driver.createEndpoint(endpoint(NET, '1', '10.1.0.5'));
  await driver.join(NET, '1'.repeat(64));
  t.ok(
    mine().some((f) => f.includes(`dl_dst=${GW_MAC},ip,`) && f.includes('table=62')),
    "the member's way out goes through the rules",
  );
  t.ok(
    mine().some((f) => f.includes('tcp,nw_dst=198.19.0.10/32,tp_dst=8080')),
    'its egress rule',
  );
  t.ok(
    mine().some((f) => f.includes('ip,nw_src=198.18.0.0/24')),
    'its ingress rule',
  );
  t.ok(
    mine().some((f) => f.includes('udp,nw_dst=192.0.2.53,tp_dst=53')),
    "DNS to the host's resolver",
  );
  await driver.programExternalConnectivity(NET, '1'.repeat(64), [
    { proto: 'tcp', containerPort: 80, hostIp: '', hostPort: 8080, hostPortEnd: 8080 },
  ]);
  t.ok(
    mine().some((f) => f.includes('table=65,priority=30') && f.includes(',tcp,tp_dst=80,')),
    'a published port passes ingress',
  );
  const synced = await driver.upkeep.syncFlows();
  t.equal(synced.modifications, 0, "the periodic sync wants the same: the whole bridge's state holds them");
  await driver.leave(NET, '1'.repeat(64));
  await driver.deleteEndpoint(NET, '1'.repeat(64));
  t.same(mine(), [], 'its last member gone: nothing left');
  await driver.createEndpoint(endpoint(NET, '2', '10.1.0.6'));
  await driver.join(NET, '2'.repeat(64));
  t.not(mine().length, 0);
  await driver.deleteEndpoint(NET, '2'.repeat(64));
  await driver.createEndpoint(endpoint(NET, '3', '10.1.0.7'));
  await driver.join(NET, '3'.repeat(64));
  await driver.deleteNetwork(NET);
  t.same(mine(), [], 'DeleteNetwork: nothing under its cookie');
});

t.test('a network without rules costs no OpenFlow call at Join', async (t) => {
  const { driver, openflow } = setup(t);
  await driver.createNetwork(net(NET, {}));
  await driver.createEndpoint(endpoint(NET, '1', '10.1.0.5'));
  const before = openflow.syncs;
  await driver.join(NET, '1'.repeat(64));
  await driver.deleteEndpoint(NET, '1'.repeat(64));
  t.equal(openflow.syncs, before);
});

t.test('a Join whose rules cannot be applied fails (Docker then deletes the endpoint): never a container unruled', async (t) => {
  const { driver, openflow } = setup(t);
  await driver.createNetwork(net(NET, generic({ 'ovsnet.egress': 'none' })));
  await driver.createEndpoint(endpoint(NET, '1', '10.1.0.5'));
  openflow.failNext('sync');
  await t.rejects(driver.join(NET, '1'.repeat(64)), { message: /injected failure of sync/ });
});

t.test('refused at CreateNetwork, nothing made: no OpenFlow, an IPv6 rule without IPv6, --internal', async (t) => {
  const refused = async (
    driver: NetworkDriver,
    store: SqliteStore,
    req: Parameters<NetworkDriver['createNetwork']>[0],
    message: RegExp,
  ) => {
    await t.rejects(driver.createNetwork(req), { code: 'NETWORK_OPTION_INVALID', message });
    t.same((await store.list(keys.networks)).kvs, [], 'no record');
    t.same((await store.list(keys.tags)).kvs, [], 'no tag');
  };
  const bare = setup(t, { openflow: false });
  await refused(
    bare.driver,
    bare.store,
    net(NET, generic({ 'ovsnet.egress': 'none' })),
    /no OpenFlow access, which egress and ingress rules need/,
  );
  const { driver, store, ovs } = setup(t);
  await refused(driver, store, net(NET, generic({ 'ovsnet.ingress': 'fd00::/8' })), /fd00::\/8 is IPv6 and the network has no IPv6 subnet/);
  await refused(
    driver,
    store,
    {
      ...net(NET, generic({ 'ovsnet.egress': 'none' })),
      options: { ...generic({ 'ovsnet.egress': 'none' }), 'com.docker.network.internal': true },
    },
    /an --internal network has none/,
  );
  await refused(driver, store, net(NET, generic({ 'ovsnet.egress': '10.0.0.0/8,actions=drop' })), /ovsnet\.egress=CIDR\[:PORT\/tcp\|udp\]/);
  t.equal(ovs.ports.size, 0, 'no port');
  await driver.createNetwork({
    ...net(NET2, generic({ 'ovsnet.ingress': 'fd00::/8,10.0.0.0/8' })),
    ipv6: [{ pool: 'fd01::/64', gateway: 'fd01::1/64' }],
  });
  t.pass('a dual-stack network takes IPv6 rules');
});

t.test("resolvers unknown: port 53 to any address passes, said once; known again, the resolvers' only", async (t) => {
  let answer: Resolvers = { unknown: 'cannot read /run/systemd/resolve/resolv.conf (ENOENT)' };
  const { driver, openflow, warnings } = setup(t, { resolvers: async () => answer });
  await driver.createNetwork(net(NET, generic({ 'ovsnet.egress': 'none' })));
  await driver.createEndpoint(endpoint(NET, '1', '10.1.0.5'));
  await driver.join(NET, '1'.repeat(64));
  await driver.upkeep.syncFlows();
  const dns = () => openflow.flowsOf('br0', egressScope(1)).filter((f) => f.includes('tp_dst=53'));
  t.same(
    dns().map((f) => /reg8=\d+,([^,]+),/.exec(f)?.[1]),
    ['tcp', 'tcp6', 'udp', 'udp6'],
  );
  t.equal(warnings.filter((w) => w.includes('let DNS (port 53) to any address pass')).length, 1, 'said once');
  answer = { servers: ['192.0.2.53'], from: '/etc/resolv.conf' };
  await driver.upkeep.syncFlows();
  t.ok(dns().every((f) => f.includes('nw_dst=192.0.2.53')) && dns().length === 2, 'the periodic sync follows resolv.conf');
});
