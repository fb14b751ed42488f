/**
 * The driver's endpoint-group steps against in-memory OVS and OpenFlow: a group's checks against
 * its parent, the parent's gateway handed to a group's Join, the family's plan following Joins,
 * DeleteEndpoint, group removal, reconcile and the periodic sync of the bridge's flows; nothing for other networks.
 * The rules' effect on traffic: test/e2e/groups-datapath.test.ts and test/e2e/groups.test.ts.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { NetworkDriver } from '../../../src/driver/network-driver.js';
import type { GroupsApi, QosApi } from '../../../src/driver/effects/deps.js';
import { FEATURE, cookieOf } from '../../../src/driver/ovs/cookies.js';
import { groupFlows, groupScope, type GroupPlan } from '../../../src/driver/ovs/groups/group-flows.js';
import { createLogger } from '../../../src/lib/log.js';
import { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import { keys } from '../../../src/store/keys.js';
import { put } from '../../../src/store/types.js';
import { fakeOpenFlow, fakeSideEffects } from '../../helpers/driver-fakes.js';
import { NET, NET2, net } from '../../helpers/driver-setup.js';

const NET3 = 'd'.repeat(64);

/** The bridge's group flows as ovs-vswitchd keeps them: one plan per parent tag. */
class FakeGroups implements GroupsApi {
  readonly plans = new Map<number, GroupPlan>();
  calls = 0;
  async apply(_bridge: string, plan: GroupPlan): Promise<void> {
    this.calls++;
    this.plans.set(plan.parentTag, plan);
  }
  async remove(_bridge: string, tag: number): Promise<void> {
    this.calls++;
    this.plans.delete(tag);
  }
  async mac(link: string): Promise<string> {
    return link.startsWith('ovg') ? '02:00:00:00:00:01' : 'none';
  }
}

function setup(t: Test) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-groups-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const store = new SqliteStore({ file: path.join(dir, 'state.db') });
  t.teardown(() => store.close());
  const fx = fakeSideEffects();
  const qos: QosApi = {
    ofports: async () => new Map([...fx.ovs.ports.keys()].map((p, i) => [p, i + 1])),
    apply: async () => undefined,
    remove: async () => undefined,
  };
  const groups = new FakeGroups();
  const openflow = fakeOpenFlow(fx.ovs);
  const driver = new NetworkDriver({
    store,
    log: createLogger('silent'),
    ...fx,
    qos,
    groups,
    openflow,
    host: 'h1',
    bridge: 'br0',
    datapath: () => 'netdev',
  });
  return { driver, groups, openflow, store, ...fx };
}

const generic = (o: Record<string, string>) => ({ 'com.docker.network.generic': o });
const parent = () => net(NET, generic({ 'ovsnet.network': 'app' }));
const group = (id: string, name: string, extra: Record<string, string> = {}) =>
  net(id, generic({ 'ovsnet.network': 'app', 'ovsnet.group': name, ...extra }));
const endpoint = (networkId: string, id: string, address: string) => ({
  networkId,
  endpointId: id.repeat(64),
  address: `${address}/24`,
  addressV6: '',
  mac: '',
  portmap: [],
});

t.test("a group's Join gets its parent's gateway; the family's plan follows Joins and DeleteEndpoint", async (t) => {
  const { driver, groups } = setup(t);
  await driver.createNetwork(parent());
  await driver.createEndpoint(endpoint(NET, '1', '10.1.0.5'));
  await driver.join(NET, '1'.repeat(64));
  t.equal(groups.calls, 0, 'a named parent without groups: no rule touched at Join');
  t.equal(groups.plans.size, 0);
  await driver.createNetwork(group(NET2, 'web'));
  await driver.createNetwork(group(NET3, 'db', { 'ovsnet.allow': 'web:5432/tcp,app' }));
  await driver.createEndpoint(endpoint(NET2, '2', '10.1.0.6'));
  const joined = await driver.join(NET2, '2'.repeat(64));
  t.equal(joined.gateway, '10.1.0.1', "the parent's gateway");
  await driver.createEndpoint(endpoint(NET3, '3', '10.1.0.7'));
  await driver.join(NET3, '3'.repeat(64));
  const plan = [...groups.plans.values()][0];
  t.equal(groups.plans.size, 1, "one plan: the parent's");
  t.equal(plan?.subnet, '10.1.0.0/24');
  t.equal(plan?.gateway.mac, '02:00:00:00:00:01');
  t.same(
    plan?.members.map((m) => m.address),
    ['10.1.0.5', '10.1.0.6', '10.1.0.7'],
    'the parent and both groups',
  );
  t.equal(new Set(plan?.members.map((m) => m.group)).size, 3, 'each on its own tag');
  t.equal(plan?.allows.length, 2, 'db allows web on 5432/tcp and the parent');
  t.match(plan?.allows, [{ port: { number: 5432, proto: 'tcp' } }, {}]);
  await driver.deleteEndpoint(NET3, '3'.repeat(64));
  t.same(
    [...groups.plans.values()][0]?.members.map((m) => m.address),
    ['10.1.0.5', '10.1.0.6'],
    'DeleteEndpoint: the member is gone from the plan',
  );
  await driver.deleteNetwork(NET3);
  await driver.deleteEndpoint(NET2, '2'.repeat(64));
  await driver.deleteNetwork(NET2);
  t.equal(groups.plans.size, 0, 'the last group gone: no rule left');
});

t.test('a dual-stack parent: its groups share its IPv6 subnet and gateway too, and the plan has their IPv6 addresses', async (t) => {
  const { driver, groups } = setup(t);
  const v6 = [{ pool: 'fd01::/64', gateway: 'fd01::1/64' }];
  await driver.createNetwork({ ...parent(), ipv6: v6 });
  await t.rejects(driver.createNetwork({ ...group(NET2, 'web'), ipv6: [{ pool: 'fd02::/64', gateway: 'fd02::1/64' }] }), {
    message:
      /-o ovsnet\.group=web: a group shares its parent's IPv6 subnet and gateway too: give --ipv6 --subnet fd01::\/64 \(this request has fd02::\/64 gateway fd02::1\/64\)/,
  });
  await driver.createNetwork({ ...group(NET2, 'web'), ipv6: v6 });
  await driver.createEndpoint({ ...endpoint(NET2, '2', '10.1.0.6'), addressV6: 'fd01::6/64' });
  const joined = await driver.join(NET2, '2'.repeat(64));
  t.equal(joined.gatewayV6, 'fd01::1', "the parent's IPv6 gateway");
  const plan = [...groups.plans.values()][0];
  t.equal(plan?.subnet6, 'fd01::/64');
  t.equal(plan?.gateway.address6, 'fd01::1');
  t.same(
    plan?.members.map((m) => [m.address, m.address6]),
    [['10.1.0.6', 'fd01::6']],
  );
});

t.test("reconcile and the periodic sync put the plan's flows back", async (t) => {
  const { driver, groups, openflow } = setup(t);
  await driver.createNetwork(parent());
  await driver.createNetwork(group(NET2, 'web'));
  t.equal(groups.plans.size, 1);
  const [tag, plan] = [...groups.plans][0] ?? [];
  if (tag === undefined || plan === undefined) throw new Error('a plan');
  const planned = groupFlows(plan).sort();
  await driver.upkeep.syncFlows();
  t.same(openflow.flowsOf('br0', groupScope(tag)).sort(), planned, "the bridge holds the family's flows, as the plan applied says");
  openflow.restart(); // ovs-vswitchd restarted
  const synced = await driver.upkeep.syncFlows();
  t.ok(synced.modifications > planned.length, 'the groups flows put back, with the base flow');
  t.same(openflow.flowsOf('br0', groupScope(tag)).sort(), planned);
  t.equal((await driver.upkeep.syncFlows()).modifications, 0, 'nothing to do while the rules are there');
  openflow.restart();
  t.match((await driver.reconcile()).repaired, [/^\d+ OpenFlow changes$/]);
  t.same(openflow.flowsOf('br0', groupScope(tag)).sort(), planned);
});

t.test('a group is refused with what to give, before anything is made', async (t) => {
  const { driver, ovs } = setup(t);
  await t.rejects(driver.createNetwork(group(NET2, 'web')), {
    code: 'NETWORK_NOT_FOUND',
    message: /-o ovsnet\.network=app: no network on this host has that name; create the parent first/,
  });
  await driver.createNetwork(parent());
  const ports = ovs.ports.size;
  await t.rejects(driver.createNetwork({ ...group(NET2, 'web'), ipv4: [{ pool: '10.2.0.0/24', gateway: '10.2.0.1/24' }] }), {
    message:
      /a group shares its parent's subnet and gateway: give --subnet 10\.1\.0\.0\/24 --ipam-driver ovsnet --ipam-opt ovsnet\.group=web/,
  });
  await t.rejects(driver.createNetwork({ ...group(NET2, 'web'), ipv6: [{ pool: 'fd00::/64', gateway: 'fd00::1/64' }] }), {
    message: /-o ovsnet\.group=web: its parent app has no IPv6 subnet: create the group without --ipv6, or its parent with one/,
  });
  await t.rejects(
    driver.createNetwork({ ...group(NET2, 'web'), options: { ...group(NET2, 'web').options, 'com.docker.network.internal': true } }),
    {
      message: /drop --internal/,
    },
  );
  await t.rejects(driver.createNetwork(group(NET2, 'web', { 'ovsnet.infra': 'true' })), {
    message: /give -o ovsnet\.infra=true to the parent/,
  });
  t.equal(ovs.ports.size, ports, 'nothing made');
  await driver.createNetwork(group(NET2, 'web'));
  await t.rejects(driver.createNetwork(group(NET3, 'web')), {
    code: 'NETWORK_GROUP_EXISTS',
    message: /app has a group of that name already/,
  });
  t.equal(ovs.ports.size, ports, 'a group has no gateway port of its own');
});

t.test('a one-host name that a logical network has is refused: its -o ovsnet.encap was likely forgotten', async (t) => {
  const { driver, store } = setup(t);
  // As another host's ovsnet writes it (vxlan/logical.ts).
  const logical = {
    name: 'app',
    encap: 'vxlan',
    vni: 1,
    subnets: ['10.9.0.0/24'],
    internal: false,
    members: {},
    createdBy: 'h2',
    createdAt: '',
  };
  await store.txn({ compares: [], success: [put(keys.logicalNetwork('app'), JSON.stringify(logical))] });
  await t.rejects(driver.createNetwork(parent()), {
    code: 'NETWORK_OPTION_INVALID',
    message: /hosts sharing this store have a logical network app: add its -o ovsnet\.encap \(vxlan or vlan\) to join it/,
  });
});

t.test('a network without groups never touches group rules', async (t) => {
  const { driver, groups, openflow } = setup(t);
  await driver.createNetwork(net(NET));
  await driver.createEndpoint(endpoint(NET, '1', '10.1.0.5'));
  await driver.join(NET, '1'.repeat(64));
  await driver.deleteEndpoint(NET, '1'.repeat(64));
  await driver.upkeep.syncFlows();
  await driver.reconcile();
  t.equal(groups.calls, 0);
  t.same(openflow.flowsOf('br0', { value: cookieOf(FEATURE.groups, 0), mask: 0xffffn << 48n }), [], 'no group flow synced either');
});

t.test("Engine 28+ skipped the group's gateway (GwAllocCheck): created, and its Join gets the parent's", async (t) => {
  const { driver } = setup(t);
  await driver.createNetwork(parent());
  const {
    ipv4: [data],
    ...rest
  } = group(NET2, 'web');
  await driver.createNetwork({ ...rest, ipv4: [{ pool: data?.pool ?? '' }] });
  await driver.createEndpoint(endpoint(NET2, '2', '10.1.0.6'));
  t.equal((await driver.join(NET2, '2'.repeat(64))).gateway, '10.1.0.1', "the parent's gateway");
  const other = { ...rest, networkId: NET3, ipv4: [{ pool: data?.pool ?? '', gateway: '10.1.0.9/24' }] };
  await t.rejects(
    driver.createNetwork(other),
    /a group shares its parent's subnet and gateway/,
    'a gateway other than the parent still refused',
  );
});

t.test(
  "a parent without groups: its endpoints' Joins and DeleteEndpoints read no network list after the first; a group made later is in the next Join's plan",
  async (t) => {
    const { driver, groups, store } = setup(t);
    let lists = 0;
    const list = store.list.bind(store);
    store.list = (prefix: string) => (prefix === keys.networks && lists++, list(prefix));
    await driver.createNetwork(parent());
    for (const i of ['1', '2', '3']) {
      await driver.createEndpoint(endpoint(NET, i, `10.1.0.${5 + Number(i)}`));
      await driver.join(NET, i.repeat(64));
    }
    lists = 0;
    await driver.createEndpoint(endpoint(NET, '4', '10.1.0.9'));
    await driver.join(NET, '4'.repeat(64));
    await driver.deleteEndpoint(NET, '4'.repeat(64));
    t.equal(lists, 0, 'no list of every network for a family known to have no group');
    t.equal(groups.calls, 0);
    await driver.createNetwork(group(NET2, 'web'));
    await driver.createEndpoint(endpoint(NET, '5', '10.1.0.10'));
    await driver.join(NET, '5'.repeat(64));
    t.same(
      [...groups.plans.values()][0]?.members.map((m) => m.address),
      ['10.1.0.6', '10.1.0.7', '10.1.0.8', '10.1.0.10'],
      "the group made since: the parent's new endpoint is in the family's plan",
    );
  },
);
