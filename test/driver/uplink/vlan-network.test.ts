/**
 * VLAN networks across hosts over the uplink, and infra networks (test/helpers/logical-hosts.ts:
 * drivers with in-memory side effects sharing one real embedded store): the cluster's tag on
 * every host, the uplink's MTU, the trunk's tags, the gateway guard, the refusals; the infra
 * port and its address from the pool.
 */
import t from 'tap';
import type { UplinkApi } from '../../../src/driver/effects/deps.js';
import { keys } from '../../../src/store/keys.js';
import type { HostRecord } from '../../../src/cluster/hosts.js';
import { cluster, create, generic, id, tunnelPorts } from '../../helpers/logical-hosts.js';
import { readLogical } from '../../../src/driver/records/logical-records.js';

/** An uplink that records the tags the trunk is told to carry. */
class FakeUplink implements UplinkApi {
  carried: number[] = [];
  readonly name = 'eth1';
  /** The MTU once attached (undefined: ovsnet still starting). */
  attached: number | undefined = 9000;
  mtu(): number | undefined {
    return this.attached;
  }
  async attach(tags: readonly number[]): Promise<void> {
    this.carried = [...tags];
  }
  async carry(tags: readonly number[]): Promise<void> {
    this.carried = [...tags].sort((a, b) => a - b);
  }
}

const VLAN = { 'ovsnet.encap': 'vlan', 'ovsnet.network': 'vblue' };

t.test("two hosts: the cluster's tag on both bridges, the uplink's MTU, trunked, guarded, no tunnel", async (t) => {
  const uplinks = [new FakeUplink(), new FakeUplink(), new FakeUplink()];
  const [h1, h2, h3] = cluster(t, 3, new Map<string, HostRecord>(), undefined, (i) => uplinks[i]);
  if (h1 === undefined || h2 === undefined || h3 === undefined) throw new Error('three hosts');
  // h1 holds tag 1 for a one-host network: the cluster's tag is one free on h1 too.
  await create(h1, id('1'), '10.90.1.0/24', {});
  await create(h1, id('a'), '10.90.0.0/24', VLAN);
  await create(h2, id('b'), '10.90.0.0/24', VLAN);
  const [n1, n2] = [(await h1.driver.localNetworks()).find((n) => n.networkId === id('a')), (await h2.driver.localNetworks())[0]];
  t.match(n1, { logical: 'vblue', uplink: 'eth1', tag: 2, mtu: 9000 }, "h1: tag 2 (1 is its one-host network's), the uplink's MTU");
  t.match(n2, { logical: 'vblue', uplink: 'eth1', tag: 2, mtu: 9000 }, 'h2: the same tag');
  t.equal(n1?.vni, undefined, 'no VNI');
  t.same(uplinks[0]?.carried, [2], "h1's trunk carries the tag, not the one-host network's");
  t.same(h2.flows.guards.get('br0/vlan2@eth1'), ['10.90.0.1'], 'the gateway is guarded against frames from the uplink');
  t.same(tunnelPorts(h2), [], 'no tunnel');
  t.equal((await h1.store.get(keys.tag('uplink-vlan', 2)))?.value, 'vblue', 'the tag is claimed for the cluster');
  // One-host networks made now avoid the cluster's tag, even on a host that has not joined it.
  await create(h3, id('3'), '10.90.3.0/24', {});
  await create(h3, id('4'), '10.90.4.0/24', {});
  t.same((await h3.driver.localNetworks()).map((n) => n.tag).sort(), [1, 3], "h3's one-host networks skip tag 2");
  await h1.driver.deleteNetwork(id('a'));
  t.same(uplinks[0]?.carried, [], 'deleted: the trunk stops carrying it');
  await h2.driver.deleteNetwork(id('b'));
  t.equal(await h1.store.get(keys.tag('uplink-vlan', 2)), undefined, 'the last member frees the tag');
});

t.test('refusals: a host without an uplink, a tag taken on the host, a host mixing encapsulations', async (t) => {
  const [h1, h2, h3] = cluster(t, 3, new Map<string, HostRecord>(), undefined, (i) => (i === 2 ? undefined : new FakeUplink()));
  if (h1 === undefined || h2 === undefined || h3 === undefined) throw new Error('three hosts');
  await create(h1, id('a'), '10.91.0.0/24', VLAN);
  await t.rejects(create(h3, id('c'), '10.91.0.0/24', VLAN), {
    code: 'LOGICAL_NETWORK_INVALID',
    message:
      /logical network vblue with -o ovsnet\.encap=vlan goes onto the physical network through an uplink, and this host has none: set OVSNET_UPLINK/,
  });
  await t.rejects(create(h2, id('m'), '10.91.0.0/24', { ...VLAN, 'com.docker.network.driver.mtu': '9001' }), {
    code: 'LOGICAL_NETWORK_INVALID',
    message: /-o com\.docker\.network\.driver\.mtu=9001 is more than the uplink eth1 carries \(MTU 9000\): pass at most 9000/,
  });
  const starting = new FakeUplink();
  starting.attached = undefined;
  const [h4] = cluster(t, 1, new Map<string, HostRecord>(), undefined, () => starting);
  if (h4 !== undefined) {
    await t.rejects(create(h4, id('s'), '10.91.0.0/24', VLAN), {
      code: 'NOT_READY',
      message: /needs the uplink eth1, not attached yet \(ovsnet is starting\): retry/,
    });
  }
  await create(h2, id('x'), '10.91.9.0/24', { 'ovsnet.tag': '1' });
  await t.rejects(create(h2, id('b'), '10.91.0.0/24', VLAN), {
    code: 'TAG_TAKEN',
    message:
      /logical network vblue is VLAN tag 1 on the physical network, and on this host that tag is taken \(VLAN tag 1 is used by network x{12}/,
  });
  t.notOk((await readLogical(h1.store, 'vblue'))?.record.members.h2, 'the refused host is no member');
  await t.rejects(create(h2, id('v'), '10.91.0.0/24', { 'ovsnet.encap': 'vxlan', 'ovsnet.network': 'vblue' }), {
    code: 'LOGICAL_NETWORK_MISMATCH',
    message: /logical network vblue is vlan VLAN tag 1 .*this request asks for -o ovsnet\.encap=vxlan: pass -o ovsnet\.encap=vlan/,
  });
});

t.test('an infra network: a host port on its tag with an address from the pool, gone with the network', async (t) => {
  const [h1, h2] = cluster(t, 2, new Map<string, HostRecord>(), undefined, () => new FakeUplink());
  if (h1 === undefined || h2 === undefined) throw new Error('two hosts');
  await create(h1, id('a'), '10.92.0.0/24', { ...VLAN, 'ovsnet.infra': 'true' });
  await create(h2, id('b'), '10.92.0.0/24', { ...VLAN, 'ovsnet.infra': 'true' });
  const [n1, n2] = [(await h1.driver.localNetworks())[0], (await h2.driver.localNetworks())[0]];
  t.match(n1?.infra, { port: `ovi${'a'.repeat(12)}`, addresses: [/^10\.92\.0\.\d+\/24$/] });
  t.not(n1?.infra?.addresses[0], n2?.infra?.addresses[0], 'one address per host');
  t.not(n1?.infra?.addresses[0], '10.92.0.1/24', 'not the gateway');
  t.match(h1.ovs.ports.get(`ovi${'a'.repeat(12)}`), { tag: n1?.tag, externalIds: { 'ovsnet-role': 'infra' } }, 'on the network tag');
  // The reservation records of the pool's addresses, in the store: the infra address's goes with the network.
  const reserved = async () => (await h1.store.list(keys.allAddresses)).kvs.map((kv) => kv.key.split('/').pop() ?? '');
  const address = n1?.infra?.addresses[0]?.split('/')[0] ?? '';
  t.ok((await reserved()).includes(address), `${address} is reserved`);
  await h1.driver.deleteNetwork(id('a'));
  t.equal(h1.ovs.ports.has(`ovi${'a'.repeat(12)}`), false, 'the port went with the network');
  t.notOk((await reserved()).includes(address), 'and its address went back to the pool');
  // Docker's default IPAM gave the subnet: ovsnet has no pool to take the host's address from.
  const refused = h1.driver.createNetwork({
    networkId: id('d'),
    options: generic({ 'ovsnet.infra': 'true' }),
    ipv4: [{ pool: '10.94.0.0/24', gateway: '10.94.0.1/24' }],
    ipv6: [],
  });
  await t.rejects(refused, {
    code: 'NETWORK_OPTION_INVALID',
    message: /ovsnet's IPAM does not hold subnet 10\.94\.0\.0\/24: create the network with --ipam-driver ovsnet/,
  });
  t.same(
    (await h1.driver.localNetworks()).map((n) => n.networkId),
    [],
    'the refused network left no record',
  );
  t.same((await h1.store.list(keys.vlanTags('h1'))).kvs, [], 'no tag');
  t.same(
    [...h1.ovs.ports.keys()].filter((p) => p.startsWith('ovi')),
    [],
    'no infra port',
  );
  await t.rejects(create(h1, id('o'), '10.93.0.0/24', { 'ovsnet.infra': 'maybe' }), {
    message: /-o ovsnet\.infra=maybe is not valid: expected true or false/,
  });
});
