/**
 * IPAM keyed by holder (src/ipam-driver/allocation/allocator.ts, state/holder-keys.ts): a repeated
 * request of one key gets its address again, a release by a non-holder changes nothing, sticky
 * pools give a key its last address back while it is free, adopted addresses are taken over only
 * by their container.
 */
import t, { type Test } from 'tap';
import { holders } from '../../../src/ipam-driver/state/holder-keys.js';
import type { Ipam } from '../../../src/ipam-driver/ipam.js';
import type { Reservation } from '../../../src/ipam-driver/state/records.js';
import { keys } from '../../../src/store/keys.js';
import type { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import { put } from '../../../src/store/types.js';
import { makeIpam, pool } from '../../helpers/ipam.js';
import { tempStore } from '../../helpers/temp-store.js';

function setup(t: Test, host = 'test-host'): { store: SqliteStore; ipam: Ipam } {
  const store = tempStore(t);
  const ipam = makeIpam(store, { host });
  t.teardown(() => ipam.stop());
  return { store, ipam };
}

const plain = (a: string) => a.split('/')[0] ?? '';
const count = async (store: SqliteStore, poolId: string) => Number((await store.get(keys.poolCount(poolId)))?.value ?? '0');
const reservations = async (store: SqliteStore, poolId: string) =>
  (await store.list(keys.addresses(poolId))).kvs.map((kv) => JSON.parse(kv.value) as Reservation);
const ask = (ipam: Ipam, poolId: string, more: { name?: string; holder?: string; address?: string } = {}) =>
  ipam.requestAddress({ poolId, address: more.address ?? '', gateway: false, ...more });

t.test('every reservation records its holder key', async (t) => {
  const { store, ipam } = setup(t);
  const { poolId } = await ipam.requestPool(pool('10.80.0.0/24'));
  await ipam.requestAddress({ poolId, address: '', gateway: true });
  const named = plain((await ask(ipam, poolId, { name: 'web' })).address);
  const unnamed = plain((await ask(ipam, poolId)).address);
  const cni = plain((await ask(ipam, poolId, { holder: holders.cni('c0ffee', 'eth0') })).address);
  const byAddress = new Map((await reservations(store, poolId)).map((r) => [r.address, r.holder]));
  t.equal(byAddress.get('10.80.0.1'), 'docker/gateway');
  t.equal(byAddress.get(named), 'docker/name/test-host/web', 'a Docker request with its endpoint name (dockerd 29+)');
  t.match(byAddress.get(unnamed), /^docker\/request\/test-host\/[0-9a-f]{16}$/, 'a Docker request without a name: unique to it');
  t.equal(byAddress.get(cni), 'cni/c0ffee/eth0');
});

t.test('a repeated request of one key gets the same address; the count moves once', async (t) => {
  const { store, ipam } = setup(t);
  const { poolId } = await ipam.requestPool(pool('10.80.1.0/24'));
  for (const more of [{ name: 'web' }, { holder: holders.cni('abc', 'eth0') }]) {
    const before = await count(store, poolId);
    const first = await ask(ipam, poolId, more);
    // Concurrent repeats too (a runtime retrying while the first is in flight).
    const again = await Promise.all([ask(ipam, poolId, more), ask(ipam, poolId, more), ask(ipam, poolId, more)]);
    t.same(
      again.map((a) => a.address),
      [first.address, first.address, first.address],
      `${JSON.stringify(more)}: same address`,
    );
    t.equal(await count(store, poolId), before + 1, `${JSON.stringify(more)}: one reservation`);
    const err = await ask(ipam, poolId, { ...more, address: '10.80.1.200' }).catch((e: Error) => e);
    t.match(err, { code: 'IPAM_ADDRESS_TAKEN', message: `already holds ${plain(first.address)} in pool 10.80.1.0/24, not 10.80.1.200` });
  }
  // Without a name (dockerd up to 28) every request is its own holder.
  const a = await ask(ipam, poolId);
  const b = await ask(ipam, poolId);
  t.not(a.address, b.address, 'requests without a key are never matched');
});

t.test('a Docker name bound to its endpoint is no longer the key: the same name gets a new address', async (t) => {
  const { ipam } = setup(t);
  const { poolId } = await ipam.requestPool(pool('10.80.2.0/24'));
  const first = await ask(ipam, poolId, { name: 'web' });
  t.equal(await ipam.bindEndpoint(first.address, 'ep-1'), true);
  // `docker rename web old; docker run --name web`: the running container keeps its address.
  const second = await ask(ipam, poolId, { name: 'web' });
  t.not(second.address, first.address, 'a running container keeps its address to itself');
});

t.test('a release by a non-holder changes nothing', async (t) => {
  const { store, ipam } = setup(t);
  const { poolId } = await ipam.requestPool(pool('10.80.3.0/24'));
  const cni = plain((await ask(ipam, poolId, { holder: holders.cni('abc', 'eth0') })).address);
  const docker = plain((await ask(ipam, poolId, { name: 'web' })).address);
  await ipam.releaseAddress(poolId, cni);
  t.same((await ipam.releaseHolder(holders.cni('other', 'eth0'))).length, 0, 'another key frees nothing');
  t.same((await ipam.releaseHolder(holders.cni('abc', 'eth1'))).length, 0, 'another interface of the container frees nothing');
  t.equal(await count(store, poolId), 2, "Docker's ReleaseAddress never frees a CNI attachment's address");
  t.same(await ipam.releaseHolder(holders.cni('abc', 'eth0')), [cni], 'its own key frees it');
  t.same(await ipam.releaseHolder(holders.cni('abc', 'eth0')), [], 'twice: nothing more');
  await ipam.releaseAddress(poolId, docker);
  t.equal(await count(store, poolId), 0, "Docker's release frees Docker's reservation");
});

t.test('records written before holders were kept are still read and released', async (t) => {
  const { store, ipam } = setup(t);
  const { poolId } = await ipam.requestPool(pool('10.80.4.0/24'));
  const { address } = await ask(ipam, poolId);
  const a = plain(address);
  const old: Reservation = {
    address: a,
    poolId,
    kind: 'dynamic',
    host: 'test-host',
    reservedAt: new Date().toISOString(),
    endpoint: 'ep-old',
  };
  await store.txn({ compares: [], success: [put(keys.address(poolId, a), JSON.stringify(old))] });
  await ipam.releaseAddress(poolId, a);
  t.equal(await count(store, poolId), 0);
  t.equal(await store.get(keys.address(poolId, a)), undefined);
});

t.test('sticky pools: a key gets back the address it held last, while it is free', async (t) => {
  const { store, ipam } = setup(t);
  const { poolId } = await ipam.requestPool({ ...pool('10.80.5.0/24'), options: { 'ovsnet.sticky': 'true' } });
  const { poolId: plainPool } = await ipam.requestPool(pool('10.80.6.0/24'));
  for (const [id, sticky] of [
    [poolId, true],
    [plainPool, false],
  ] as const) {
    const first = await ask(ipam, id, { name: 'db' });
    await ipam.releaseAddress(id, first.address);
    await ask(ipam, id, { name: 'other' });
    const again = await ask(ipam, id, { name: 'db' });
    t.equal(
      again.address === first.address,
      sticky,
      `sticky=${sticky}: the recreated container ${sticky ? 'keeps' : 'does not keep'} its address`,
    );
  }
  // A CNI attachment, by its key.
  const c = await ask(ipam, poolId, { holder: holders.cni('c1', 'eth0') });
  await ipam.releaseHolder(holders.cni('c1', 'eth0'));
  t.equal((await ask(ipam, poolId, { holder: holders.cni('c1', 'eth0') })).address, c.address);
  // Taken meanwhile by someone else: another address, never the holder's.
  const x = await ask(ipam, poolId, { name: 'x' });
  await ipam.releaseAddress(poolId, x.address);
  await ask(ipam, poolId, { address: plain(x.address) });
  const y = await ask(ipam, poolId, { name: 'x' });
  t.not(y.address, x.address, 'the last address is taken: a free one');
  t.ok((await store.list(keys.sticky(poolId))).kvs.length > 0, 'sticky records are kept under the pool');
  await ipam.releasePool(poolId);
  t.equal((await store.list(keys.sticky(poolId))).kvs.length, 0, 'and go with it');
});

t.test('ovsnet.sticky takes true or false', async (t) => {
  const { ipam } = setup(t);
  const err = await ipam.requestPool({ ...pool('10.80.7.0/24'), options: { 'ovsnet.sticky': 'yes' } }).catch((e: Error) => e);
  t.match(err, { code: 'IPAM_OPTION_INVALID', message: '--ipam-opt ovsnet.sticky=yes is not valid: expected true or false' });
});

t.test('adopt: an adopted address is never handed out, and goes to its own container', async (t) => {
  const { store, ipam } = setup(t);
  const { poolId } = await ipam.requestPool(pool('10.80.8.0/29'));
  // 10.80.8.1-6 usable; adopt .2 for a Docker container and .3 for a CNI attachment.
  t.match(await ipam.adopt('10.80.8.2', holders.adoptedDocker('cid1'), 'docker network old', 'web'), {
    outcome: 'adopted',
    pool: '10.80.8.0/29',
  });
  t.match(await ipam.adopt('10.80.8.2', holders.adoptedDocker('cid1'), 'docker network old', 'web'), { outcome: 'held' }, 'twice: held');
  t.match(await ipam.adopt('10.80.8.3', holders.cni('cid2', 'eth0'), 'host-local net1'), { outcome: 'adopted' });
  t.match(await ipam.adopt('10.80.8.3', holders.cni('cid3', 'eth0'), 'host-local net1'), {
    outcome: 'taken',
    by: { holder: 'cni/cid2/eth0' },
  });
  t.match(await ipam.adopt('10.99.0.1', holders.cni('cid3', 'eth0'), 'host-local net1'), { outcome: 'no pool' });
  const dynamic: string[] = [];
  for (;;) {
    const r = await ask(ipam, poolId).catch(() => undefined);
    if (r === undefined) break;
    dynamic.push(plain(r.address));
  }
  t.same(dynamic.sort(), ['10.80.8.1', '10.80.8.4', '10.80.8.5', '10.80.8.6'], 'dynamic allocation skips adopted addresses');
  t.equal(
    (await ask(ipam, poolId, { holder: holders.cni('cid2', 'eth0') })).address,
    '10.80.8.3/29',
    'the CNI key gets its adopted address',
  );
  const wrong = await ask(ipam, poolId, { address: '10.80.8.2', name: 'not-web' }).catch((e: Error) => e);
  t.match(wrong, { code: 'IPAM_ADDRESS_TAKEN' }, 'another container (by name) cannot take it over');
  const before = await count(store, poolId);
  t.equal(
    (await ask(ipam, poolId, { address: '10.80.8.2', name: 'web' })).address,
    '10.80.8.2/29',
    'its container moving over with --ip takes it',
  );
  t.equal(await count(store, poolId), before, 'taken over: the count does not move');
  const r = (await reservations(store, poolId)).find((x) => x.address === '10.80.8.2');
  t.equal(r?.holder, 'docker/name/test-host/web');
});

t.test('CNI GC: the holders of a pool by key prefix, and releasing those the runtime no longer lists', async (t) => {
  const { store, ipam } = setup(t);
  const { poolId } = await ipam.requestPool(pool('10.80.9.0/24'));
  for (const id of ['k1', 'k2', 'k3']) await ask(ipam, poolId, { holder: holders.cni(id, 'eth0') });
  await ask(ipam, poolId, { name: 'docker-one' });
  const listed = await ipam.holdersIn(poolId, 'cni/');
  t.same(listed.map((h) => h.holder).sort(), ['cni/k1/eth0', 'cni/k2/eth0', 'cni/k3/eth0'], 'only the CNI holders');
  const valid = new Set(['cni/k2/eth0']);
  for (const h of listed) if (!valid.has(h.holder)) await ipam.releaseHolder(h.holder, poolId);
  t.same(
    (await ipam.holdersIn(poolId, 'cni/')).map((h) => h.holder),
    ['cni/k2/eth0'],
  );
  t.equal(await count(store, poolId), 2, 'the kept attachment and the Docker container');
});

t.test('a record whose holder is not a string is malformed, skipped by the holder map, and still released', async (t) => {
  const { store, ipam } = setup(t);
  const { poolId } = await ipam.requestPool(pool('10.80.10.0/24'));
  const a = plain((await ask(ipam, poolId)).address);
  const kv = await store.get(keys.address(poolId, a));
  const bad = { ...(JSON.parse(kv?.value ?? '{}') as Reservation), holder: 42 };
  await store.txn({ compares: [], success: [put(keys.address(poolId, a), JSON.stringify(bad))] });
  const b = await ask(ipam, poolId, { holder: holders.cni('ok', 'eth0') });
  t.not(plain(b.address), a, 'the malformed reservation still holds its address');
  await ipam.releaseAddress(poolId, a);
  t.equal(await store.get(keys.address(poolId, a)), undefined, "Docker's release removes it");
  t.equal(await count(store, poolId), 1);
});
