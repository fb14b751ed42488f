/**
 * Reaping (src/ipam-driver/recovery/orphan-reaper.ts) with an embedded store and fake views of the driver: what is
 * released (endpoint gone, CNI container gone, never bound), only after the grace period, and
 * what never is (an address an endpoint names, another host's, a gateway, a pool of Docker's
 * own driver, an unnamed static request, a record changed since it was judged).
 */
import t, { type Test } from 'tap';
import { holders } from '../../../src/ipam-driver/state/holder-keys.js';
import type { Ipam } from '../../../src/ipam-driver/ipam.js';
import { Reaper, type ReapDeps, type ReapReason } from '../../../src/ipam-driver/recovery/orphan-reaper.js';
import type { Reservation } from '../../../src/ipam-driver/state/records.js';
import { createLogger } from '../../../src/lib/log.js';
import { keys } from '../../../src/store/keys.js';
import type { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import { put } from '../../../src/store/types.js';
import { makeIpam, pool } from '../../helpers/ipam.js';
import { tempStore } from '../../helpers/temp-store.js';

const GRACE = 60_000;
const plain = (a: string) => a.split('/')[0] ?? '';

interface World {
  store: SqliteStore;
  ipam: Ipam;
  reaper: Reaper;
  clock: { now: number };
  endpoints: { ids: Set<string>; addresses: Set<string> };
  driverPools: Set<string>;
  reasons: ReapReason[];
}

function world(t: Test, over: Partial<ReapDeps> = {}): World {
  const store = tempStore(t);
  const ipam = makeIpam(store, { host: 'h1' });
  t.teardown(() => ipam.stop());
  const clock = { now: Date.now() };
  const endpoints = { ids: new Set<string>(), addresses: new Set<string>() };
  const driverPools = new Set<string>();
  const reasons: ReapReason[] = [];
  const reaper = new Reaper({
    store,
    log: createLogger('silent'),
    host: 'h1',
    graceMs: GRACE,
    endpoints: () => Promise.resolve(endpoints),
    driverPools: () => Promise.resolve(driverPools),
    release: (poolId, address, onlyIf) => ipam.releaseIf(poolId, address, onlyIf),
    onReaped: (r) => reasons.push(r),
    now: () => new Date(clock.now),
    ...over,
  });
  return { store, ipam, reaper, clock, endpoints, driverPools, reasons };
}

const held = async (w: World, poolId: string) =>
  (await w.store.list(keys.addresses(poolId))).kvs.map((kv) => (JSON.parse(kv.value) as Reservation).address).sort();
const count = async (w: World, poolId: string) => Number((await w.store.get(keys.poolCount(poolId)))?.value ?? '0');

t.test('an endpoint gone: released once a sweep a grace period after the first sighting finds it gone still', async (t) => {
  const w = world(t);
  const { poolId } = await w.ipam.requestPool(pool('10.82.0.0/24'));
  const a = await w.ipam.requestAddress({ poolId, address: '', gateway: false });
  await w.ipam.bindEndpoint(a.address, 'ep-live');
  const b = await w.ipam.requestAddress({ poolId, address: '', gateway: false });
  await w.ipam.bindEndpoint(b.address, 'ep-gone');
  w.endpoints.ids.add('ep-live');
  t.same(await w.reaper.sweep(), [], 'first sighting: kept (its ReleaseAddress may be on its way)');
  w.clock.now += GRACE - 1;
  t.same(await w.reaper.sweep(), [], 'within the grace period: kept');
  w.clock.now += 1;
  t.same(await w.reaper.sweep(), [{ poolId, address: plain(b.address), holder: 'docker/endpoint/ep-gone', reason: 'endpoint gone' }]);
  t.same(await held(w, poolId), [plain(a.address)], "the live endpoint's address stays");
  t.equal(await count(w, poolId), 1, 'the count moved with it');
  t.same(w.reasons, ['endpoint gone'], 'counted');
  t.same(await w.reaper.sweep(), [], 'nothing more');
});

t.test('a holder that comes back within the grace period keeps its address', async (t) => {
  const w = world(t);
  const { poolId } = await w.ipam.requestPool(pool('10.82.1.0/24'));
  const a = await w.ipam.requestAddress({ poolId, address: '', gateway: false });
  await w.ipam.bindEndpoint(a.address, 'ep');
  await w.reaper.sweep();
  w.endpoints.ids.add('ep'); // its record was being written (CreateEndpoint in flight)
  w.clock.now += GRACE;
  await w.reaper.sweep();
  w.endpoints.ids.delete('ep');
  w.clock.now += GRACE;
  t.same(await w.reaper.sweep(), [], 'gone again: a new first sighting');
  t.same(await held(w, poolId), [plain(a.address)]);
});

t.test('never freed: an address an endpoint names, a gateway, another host, an unnamed static request, Docker-driver pools', async (t) => {
  const w = world(t);
  const { poolId } = await w.ipam.requestPool(pool('10.82.2.0/24'));
  const { poolId: bridgePool } = await w.ipam.requestPool(pool('10.82.3.0/24'));
  w.driverPools.add('10.82.2.0/24'); // an ovsnet network's; 10.82.3.0/24 is a `-d bridge --ipam-driver ovsnet` one
  await w.ipam.requestAddress({ poolId, address: '', gateway: true });
  const aux = await w.ipam.requestAddress({ poolId, address: '10.82.2.9', gateway: false }); // aux address or --ip (dockerd 28)
  const inUse = await w.ipam.requestAddress({ poolId, address: '', gateway: false }); // bound failed, but its endpoint names it
  w.endpoints.addresses.add(plain(inUse.address));
  const bridge = await w.ipam.requestAddress({ poolId: bridgePool, address: '', gateway: false });
  const other: Reservation = {
    address: '10.82.2.50',
    poolId,
    kind: 'dynamic',
    host: 'h2',
    reservedAt: new Date(0).toISOString(),
    endpoint: 'gone',
  };
  await w.store.txn({ compares: [], success: [put(keys.address(poolId, other.address), JSON.stringify(other))] });
  for (let i = 0; i < 3; i++) {
    t.same(await w.reaper.sweep(), [], `sweep ${i}`);
    w.clock.now += GRACE;
  }
  t.same(await held(w, poolId), ['10.82.2.1', plain(inUse.address), '10.82.2.50', plain(aux.address)].sort());
  t.same(await held(w, bridgePool), [plain(bridge.address)]);
});

t.test(
  'never bound: released once seen unbound on two sweeps a grace period apart, a grace period old (dynamic, or named by dockerd 29+)',
  async (t) => {
    const w = world(t);
    const { poolId } = await w.ipam.requestPool(pool('10.82.4.0/24'));
    w.driverPools.add('10.82.4.0/24');
    const dynamic = await w.ipam.requestAddress({ poolId, address: '', gateway: false });
    const named = await w.ipam.requestAddress({ poolId, address: '10.82.4.77', gateway: false, name: 'web' });
    const bound = await w.ipam.requestAddress({ poolId, address: '', gateway: false });
    await w.ipam.bindEndpoint(bound.address, 'ep');
    w.endpoints.ids.add('ep');
    t.same(await w.reaper.sweep(), [], 'young: kept (CreateEndpoint comes right after)');
    w.clock.now += GRACE + 5000; // the records' times are the real clock's, a little after the fake one's start
    t.same(await w.reaper.sweep(), [], 'a grace period old, seen unbound the first time: kept (a loaded host sends CreateEndpoint late)');
    w.clock.now += GRACE - 1;
    t.same(await w.reaper.sweep(), [], 'within the grace period of that sighting: kept');
    w.clock.now += 1;
    const reaped = await w.reaper.sweep();
    t.same(reaped.map((r) => [r.address, r.reason]).sort(), [
      [plain(dynamic.address), 'never bound'],
      [plain(named.address), 'never bound'],
    ]);
    t.same(await held(w, poolId), [plain(bound.address)]);
  },
);

t.test('CNI holders: judged by the hook, released only when it says gone', async (t) => {
  const alive = new Map<string, boolean | undefined>([
    ['live', true],
    ['dead', false],
    ['unknown', undefined],
  ]);
  const w = world(t);
  w.reaper.cniAlive = (id) => Promise.resolve(alive.get(id));
  const { poolId } = await w.ipam.requestPool(pool('10.82.5.0/24'));
  const got = new Map<string, string>();
  for (const id of alive.keys())
    got.set(id, plain((await w.ipam.requestAddress({ poolId, address: '', gateway: false, holder: holders.cni(id, 'eth0') })).address));
  await w.reaper.sweep();
  w.clock.now += GRACE;
  t.same(await w.reaper.sweep(), [{ poolId, address: got.get('dead'), holder: 'cni/dead/eth0', reason: 'container gone' }]);
  t.same(await held(w, poolId), [got.get('live'), got.get('unknown')].sort());
  // Without the hook (no CNI front end), CNI holders are left alone.
  w.reaper.cniAlive = undefined;
  alive.set('live', false);
  w.clock.now += 2 * GRACE;
  await w.reaper.sweep();
  t.equal((await w.reaper.sweep()).length, 0);
});

t.test('a record changed since it was judged is not released', async (t) => {
  const w = world(t);
  const { poolId } = await w.ipam.requestPool(pool('10.82.6.0/24'));
  const a = await w.ipam.requestAddress({ poolId, address: '', gateway: false });
  await w.ipam.bindEndpoint(a.address, 'old');
  await w.reaper.sweep();
  w.clock.now += GRACE;
  // Between the sweep's read and its release the address changed hands (released and taken again).
  const reaper = new Reaper({
    store: w.store,
    log: createLogger('silent'),
    host: 'h1',
    graceMs: 0,
    endpoints: () => Promise.resolve(w.endpoints),
    driverPools: () => Promise.resolve(w.driverPools),
    release: async (poolId, address, onlyIf) => {
      await w.ipam.releaseAddress(poolId, address);
      await w.ipam.requestAddress({ poolId, address, gateway: false, name: 'newcomer' });
      return w.ipam.releaseIf(poolId, address, onlyIf);
    },
  });
  await reaper.sweep();
  t.same(await reaper.sweep(), [], 'the newcomer is not the holder judged gone');
  t.same(await held(w, poolId), [plain(a.address)]);
});

t.test(
  "the host's own port address (an infra network's) is never reaped; a CNI attachment is judged by its container even once bound",
  async (t) => {
    let alive = true;
    const w = world(t);
    w.reaper.cniAlive = () => Promise.resolve(alive);
    const { poolId } = await w.ipam.requestPool(pool('10.82.9.0/24'));
    w.driverPools.add('10.82.9.0/24');
    const infra = await w.ipam.hostAddress('10.82.9.0/24', 'infra:h1');
    const cni = await w.ipam.requestAddress({ poolId, address: '', gateway: false, holder: holders.cni('c1', 'eth0') });
    await w.ipam.bindEndpoint(cni.address, 'cni-endpoint'); // the CNI front end's CreateEndpoint...
    w.endpoints.ids.add('cni-endpoint'); // ...which writes an endpoint record naming the address
    w.endpoints.addresses.add(plain(cni.address));
    const removed: string[] = [];
    // The CNI front end undoes the whole attachment (service.collect): endpoint record and address.
    w.reaper.cniRemove = async (id, ifname) => {
      if (alive) return 'alive';
      removed.push(`${id}/${ifname}`);
      w.endpoints.ids.delete('cni-endpoint');
      w.endpoints.addresses.delete(plain(cni.address));
      await w.ipam.releaseHolder(holders.cni(id, ifname), poolId);
      return 'removed';
    };
    for (let i = 0; i < 3; i++) {
      t.same(await w.reaper.sweep(), [], `sweep ${i}: kept`);
      w.clock.now += GRACE;
    }
    t.same(await held(w, poolId), [plain(infra ?? ''), plain(cni.address)].sort());
    alive = false;
    await w.reaper.sweep();
    w.clock.now += GRACE;
    t.same(
      (await w.reaper.sweep()).map((r) => r.reason),
      ['container gone'],
      'the CNI container gone: reaped',
    );
    t.same(removed, ['c1/eth0'], 'the attachment undone whole, once');
    t.same(await held(w, poolId), [plain(infra ?? '')], 'the infra address stays');
  },
);

t.test('an address adopted from host-local for a CNI container is kept until that container attaches through ovsnet', async (t) => {
  const w = world(t);
  w.reaper.cniAlive = () => Promise.resolve(false); // no attachment recorded: the CNI side says gone
  const { poolId } = await w.ipam.requestPool(pool('10.82.10.0/24'));
  t.equal((await w.ipam.adopt('10.82.10.7', holders.cni('c9', 'eth0'), 'host-local')).outcome, 'adopted');
  for (let i = 0; i < 3; i++) {
    t.same(await w.reaper.sweep(), [], `sweep ${i}: kept`);
    w.clock.now += GRACE;
  }
  t.same(await held(w, poolId), ['10.82.10.7']);
  // Attached through ovsnet (ADD with that key, bound by its CreateEndpoint): judged as any attachment.
  await w.ipam.bindEndpoint('10.82.10.7', 'cni-endpoint');
  await w.reaper.sweep();
  w.clock.now += GRACE;
  t.same(
    (await w.reaper.sweep()).map((r) => r.reason),
    ['container gone'],
  );
  t.same(await held(w, poolId), []);
});
