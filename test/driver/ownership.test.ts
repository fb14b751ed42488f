/**
 * Each host acts only on what is its own: two hosts' drivers and IPAMs on one store, host h1
 * given host h2's NetworkID, EndpointID and PoolID finds nothing and changes nothing of h2's.
 * Pools shared by a logical network stay usable by every member host (shared on purpose). Each
 * host's endpoint counters are its own endpoints'.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { endpointCounters } from '../../src/cli/endpoints-view.js';
import type { Config } from '../../src/config/config.js';
import { NetworkDriver } from '../../src/driver/network-driver.js';
import { OpenFlow } from '../../src/driver/ovs/openflow.js';
import { createLogger } from '../../src/lib/log.js';
import { keys } from '../../src/store/keys.js';
import { DriverRecords } from '../../src/driver/records/driver-records.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';
import type { Store } from '../../src/store/types.js';
import { fakeSideEffects } from '../helpers/driver-fakes.js';
import { makeIpam, pool } from '../helpers/ipam.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-own-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
let n = 0;

function hosts(t: Test): [Host, Host] {
  const file = path.join(dir, `o${n++}.db`);
  const make = (name: string): Host => {
    const store = new SqliteStore({ file });
    const fx = fakeSideEffects();
    const ipam = makeIpam(store, { host: name });
    const driver = new NetworkDriver({ store, log: createLogger('silent'), ...fx, host: name, bridge: 'br0', datapath: () => 'netdev' });
    t.teardown(async () => {
      await ipam.stop();
      await store.close();
    });
    return { name, store, ipam, driver, ...fx };
  };
  return [make('h1'), make('h2')];
}
type Host = { name: string; store: Store; ipam: ReturnType<typeof makeIpam>; driver: NetworkDriver } & ReturnType<typeof fakeSideEffects>;

const dump = async (store: Store) => (await store.list('/')).kvs.map((kv) => `${kv.key}=${kv.value}`).join('\n');

const NET = '2b'.repeat(32);
const EP = '3c'.repeat(32);

t.test("host h1 given host h2's network and endpoint IDs finds nothing and changes nothing", async (t) => {
  const [h1, h2] = hosts(t);
  const { poolId } = await h2.ipam.requestPool(pool('10.70.0.0/24'));
  await h2.ipam.requestAddress({ poolId, address: '', gateway: true });
  await h2.driver.createNetwork({ networkId: NET, options: {}, ipv4: [{ pool: '10.70.0.0/24', gateway: '10.70.0.1/24' }], ipv6: [] });
  const { address } = await h2.ipam.requestAddress({ poolId, address: '', gateway: false });
  await h2.driver.createEndpoint({ networkId: NET, endpointId: EP, address, addressV6: '', mac: '', portmap: [] });
  await h2.driver.join(NET, EP);
  const before = await dump(h2.store);

  await t.rejects(h1.driver.join(NET, EP), { code: 'NETWORK_NOT_FOUND' });
  await t.rejects(h1.driver.endpointInfo(NET, EP), { code: 'NETWORK_NOT_FOUND' });
  await t.rejects(h1.driver.programExternalConnectivity(NET, EP, []), { code: 'ENDPOINT_NOT_FOUND' });
  const other = '4d'.repeat(32);
  await t.rejects(h1.driver.createEndpoint({ networkId: NET, endpointId: other, address, addressV6: '', mac: '', portmap: [] }), {
    code: 'NETWORK_NOT_FOUND',
  });
  await h1.driver.leave(NET, EP);
  await h1.driver.revokeExternalConnectivity(NET, EP);
  await h1.driver.deleteEndpoint(NET, EP);
  await h1.driver.deleteNetwork(NET);
  await h1.driver.settled();
  await t.rejects(
    h1.driver.createNetwork({ networkId: NET, options: {}, ipv4: [{ pool: '10.71.0.0/24', gateway: '10.71.0.1/24' }], ipv6: [] }),
    {
      code: 'NETWORK_EXISTS',
      message: /network 2b2b2b2b2b2b is host h2's, not this host's \(h1\)/,
    },
  );
  t.equal(await dump(h2.store), before, "every record of h2's is as it was");
  t.same([...h1.ovs.ports.keys()], [], 'h1 made no port, and undid its failed create');
  t.same([...h1.links.names], [], 'nor any link');
  t.same([...h1.nat.networks.keys()], []);
  t.notOk((await h1.store.list(keys.vlanTags('h1'))).kvs.length, 'nor holds a VLAN tag');
  t.ok(h2.ovs.ports.has(`ovh${EP.slice(0, 12)}`), "h2's port is there");
  t.same(await h1.driver.localNetworks(), []);
});

t.test("host h1 given host h2's PoolID: not found, nothing released; a logical network's pool stays shared", async (t) => {
  const [h1, h2] = hosts(t);
  const { poolId } = await h2.ipam.requestPool(pool('10.72.0.0/24'));
  const { address } = await h2.ipam.requestAddress({ poolId, address: '', gateway: false });
  const before = await dump(h2.store);
  await t.rejects(h1.ipam.requestAddress({ poolId, address: '', gateway: false }), {
    code: 'IPAM_POOL_NOT_FOUND',
    message: /pool "LocalDefault\/10\.72\.0\.0\/24" does not exist on host h1/,
  });
  await t.rejects(h1.ipam.requestAddress({ poolId, address: '10.72.0.9', gateway: false }), { code: 'IPAM_POOL_NOT_FOUND' });
  await h1.ipam.releaseAddress(poolId, address.split('/')[0] ?? '');
  await h1.ipam.releasePool(poolId);
  t.equal(await dump(h2.store), before, "h2's pool and reservation stand");
  t.equal(await h1.ipam.bindLogical('10.72.0.0/24', 'blue'), undefined, "h1 cannot make h2's one-host pool a logical network's");

  // Shared on purpose: a logical network's pool is every member host's.
  const shared = await h2.ipam.requestPool(pool('10.73.0.0/24'));
  t.equal(await h2.ipam.bindLogical('10.73.0.0/24', 'green'), shared.poolId);
  const joined = await h1.ipam.requestPool(pool('10.73.0.0/24'));
  t.equal(joined.poolId, shared.poolId);
  const a = await h1.ipam.requestAddress({ poolId: shared.poolId, address: '', gateway: false });
  t.match(a.address, /^10\.73\.0\.\d+\/24$/, 'h1 allocates in the shared pool');
  await h1.ipam.releaseAddress(shared.poolId, a.address.split('/')[0] ?? '');
  await h1.ipam.releasePool(shared.poolId);
  t.ok(await h2.store.get(keys.pool(shared.poolId)), 'h1 leaving the shared pool leaves it to h2');
});

t.test("the endpoints' counters: each host reads its own endpoints only (ovsnet endpoints -o wide)", async (t) => {
  const [h1, h2] = hosts(t);
  const made: Record<string, string> = {};
  for (const [h, subnet, id] of [
    [h1, '10.72.0.0/24', '5e'],
    [h2, '10.73.0.0/24', '6f'],
  ] as const) {
    const { poolId } = await h.ipam.requestPool(pool(subnet));
    await h.ipam.requestAddress({ poolId, address: '', gateway: true });
    const gateway = `${subnet.replace(/0\/24$/, '1')}/24`;
    await h.driver.createNetwork({ networkId: id.repeat(32), options: {}, ipv4: [{ pool: subnet, gateway }], ipv6: [] });
    const { address } = await h.ipam.requestAddress({ poolId, address: '', gateway: false });
    await h.driver.createEndpoint({
      networkId: id.repeat(32),
      endpointId: id.repeat(32).replace(/^../, 'ee'),
      address,
      addressV6: '',
      mac: '',
      portmap: [],
    });
    made[h.name] = id.repeat(32).replace(/^../, 'ee');
  }
  t.same(
    (await new DriverRecords(h1.store, 'h1').localEndpoints()).map((e) => e.endpointId),
    [made.h1],
    "h1's own endpoint, not h2's",
  );
  // Both ports on one bridge as far as this ovs-ofctl says: h1 still counts only its own.
  const port = (id = '') => `ovh${id.slice(0, 12)}`;
  const of = new OpenFlow(async (_cmd, args) => ({
    code: 0,
    stdout: args.includes('dump-ports')
      ? `OFPST_PORT reply (OF1.3) (xid=0x2): 2 ports\n${[made.h1, made.h2]
          .map(
            (id) =>
              `  port  ${port(id)}: rx pkts=7, bytes=700, drop=0, errs=0, frame=0, over=0, crc=0\n           tx pkts=3, bytes=300, drop=0, errs=0, coll=0\n`,
          )
          .join('')}`
      : '',
    stderr: '',
  }));
  const counters = await endpointCounters({ host: { name: 'h1' } } as Config, h1.store, of);
  t.same(
    [...counters],
    [[made.h1?.slice(0, 12), { sentPackets: 7, sentBytes: 700, receivedPackets: 3, receivedBytes: 300, policyDrops: 0 }]],
  );
});
