/**
 * `swarm-<ID>` logical networks belong to swarm networks: a user's `-o ovsnet.network` may not
 * name one (it would join a swarm network's segment and pool on a standalone host by naming it).
 */
import t from 'tap';
import { parseNetworkOptions } from '../../../src/driver/model/options.js';
import { joinLogical } from '../../../src/driver/vxlan/logical.js';
import { keys } from '../../../src/store/keys.js';
import { cluster, create, generic, id } from '../../helpers/logical-hosts.js';

const SWARM = `swarm-${'q'.repeat(25)}`;

t.test("a standalone host naming a swarm network's logical network is refused; nothing changes", async (t) => {
  const [h1] = cluster(t, 1, new Map());
  if (h1 === undefined) throw new Error('one host');
  // The swarm network as its AllocateNetwork leaves it in the shared store.
  await joinLogical(h1.store, {
    name: SWARM,
    encap: 'vxlan',
    vni: 4100,
    subnets: ['10.95.0.0/24'],
    internal: false,
    host: 'manager',
    networkId: 'q'.repeat(25),
    now: new Date(),
  });
  // The driver's keys (the helper's IPAM pool request is Docker's, released on the refusal).
  const driverKeys = async () =>
    JSON.stringify((await h1.store.list('/')).kvs.filter((kv) => !kv.key.includes('/ipam/')).map((kv) => [kv.key, kv.value]));
  const before = await driverKeys();
  const ports = [...h1.ovs.ports.keys()];
  for (const opts of [
    { 'ovsnet.network': SWARM, 'ovsnet.encap': 'vxlan' },
    { 'ovsnet.network': SWARM, 'ovsnet.encap': 'vxlan', 'ovsnet.tag': '4100' },
    { 'ovsnet.network': 'swarm-mine' },
    { 'ovsnet.network': 'swarm-', 'ovsnet.encap': 'vlan' },
  ]) {
    await t.rejects(create(h1, id('s'), '10.95.0.0/24', opts), {
      code: 'NETWORK_OPTION_INVALID',
      message: new RegExp(
        `-o ovsnet\\.network=${opts['ovsnet.network']} is not valid: names starting with swarm- are reserved for Docker swarm networks`,
      ),
    });
  }
  t.equal(await h1.store.get(keys.network(id('s'))), undefined, 'no network record');
  t.equal(await driverKeys(), before, 'the store as it was');
  t.same([...h1.ovs.ports.keys()], ports, 'no port made');
  // A name that merely contains "swarm" is anyone's.
  await create(h1, id('u'), '10.96.0.0/24', { 'ovsnet.network': 'my-swarm-net', 'ovsnet.encap': 'vxlan' });
  t.ok(await h1.store.get(keys.logicalNetwork('my-swarm-net')));
});

t.test("the swarm path's own name still parses: the network's own swarm-<ID>", async (t) => {
  const networkId = 'q'.repeat(25);
  const parsed = parseNetworkOptions(generic({ 'ovsnet.network': SWARM, 'ovsnet.encap': 'vxlan', 'ovsnet.tag': '4100' }), networkId);
  t.equal(parsed.logical, SWARM);
  t.throws(() => parseNetworkOptions(generic({ 'ovsnet.network': `swarm-${'r'.repeat(25)}`, 'ovsnet.encap': 'vxlan' }), networkId), {
    code: 'NETWORK_OPTION_INVALID',
  });
});
