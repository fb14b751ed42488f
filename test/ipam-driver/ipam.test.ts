/** IPAM behaviour against a real embedded store. */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { keys } from '../../src/store/keys.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';
import type { Store } from '../../src/store/types.js';
import { makeIpam, pool } from '../helpers/ipam.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-ipam-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
let n = 0;
function fresh(t: Test): Store {
  const store = new SqliteStore({ file: path.join(dir, `s${n++}.db`) });
  t.teardown(() => store.close());
  return store;
}

async function counted(store: Store, poolId: string): Promise<{ count: number; reservations: number }> {
  const count = Number((await store.get(keys.poolCount(poolId)))?.value ?? '0');
  const reservations = (await store.list(keys.addresses(poolId))).kvs.length;
  return { count, reservations };
}

t.test('docker network create --subnet --ip-range --gateway --aux-address, then containers', async (t) => {
  const store = fresh(t);
  const ipam = makeIpam(store);
  const { poolId, pool: p } = await ipam.requestPool(pool('10.55.0.0/24', '10.55.0.128/25'));
  t.equal(p, '10.55.0.0/24');
  t.equal(poolId, 'LocalDefault/10.55.0.0/24/10.55.0.128/25', 'deterministic PoolID');
  t.same(await ipam.requestAddress({ poolId, address: '10.55.0.1', gateway: true }), { address: '10.55.0.1/24' });
  t.same(
    await ipam.requestAddress({ poolId, address: '10.55.0.2', gateway: false }),
    { address: '10.55.0.2/24' },
    'aux outside the range is accepted',
  );
  t.same(await ipam.requestAddress({ poolId, address: '', gateway: false }), { address: '10.55.0.128/24' });
  t.same(await ipam.requestAddress({ poolId, address: '', gateway: false }), { address: '10.55.0.129/24' });
  t.same(await ipam.requestAddress({ poolId, address: '10.55.0.50', gateway: false }), { address: '10.55.0.50/24' });
  await t.rejects(ipam.requestAddress({ poolId, address: '10.55.0.50', gateway: false }), {
    code: 'IPAM_ADDRESS_TAKEN',
    message:
      /address 10\.55\.0\.50 is already in use in pool 10\.55\.0\.0\/24: reserved by a request for this exact address \(host test-host/,
  });
  await ipam.releaseAddress(poolId, '10.55.0.50');
  t.same(
    await ipam.requestAddress({ poolId, address: '10.55.0.50', gateway: false }),
    { address: '10.55.0.50/24' },
    'reusable after release',
  );
  t.same(await counted(store, poolId), { count: 5, reservations: 5 }, 'gateway, aux, two dynamic, one static');
});

t.test('gateway defaults to the first address plus one, and is never handed out', async (t) => {
  const ipam = makeIpam(fresh(t));
  const { poolId } = await ipam.requestPool(pool('10.56.0.0/29'));
  t.same(await ipam.requestAddress({ poolId, address: '', gateway: true }), { address: '10.56.0.1/29' });
  const got: string[] = [];
  for (let i = 0; i < 5; i++) got.push((await ipam.requestAddress({ poolId, address: '', gateway: false })).address);
  t.same(
    got,
    ['10.56.0.2/29', '10.56.0.3/29', '10.56.0.4/29', '10.56.0.5/29', '10.56.0.6/29'],
    'never .0 (network), .1 (gateway) or .7 (broadcast)',
  );
  await t.rejects(ipam.requestAddress({ poolId, address: '', gateway: false }), {
    code: 'IPAM_POOL_EXHAUSTED',
    message:
      'no free address in pool 10.56.0.0/29: all 6 usable addresses are in use; remove containers or use a larger --subnet / --ip-range',
  });
  await t.rejects(ipam.requestAddress({ poolId, address: '10.56.0.0', gateway: false }), {
    message: /network address of 10\.56\.0\.0\/29/,
  });
  await t.rejects(ipam.requestAddress({ poolId, address: '10.56.0.7', gateway: false }), { message: /broadcast address/ });
  await t.rejects(ipam.requestAddress({ poolId, address: '10.57.0.7', gateway: false }), {
    message: /10\.57\.0\.7 is not in pool 10\.56\.0\.0\/29/,
  });
  await t.rejects(ipam.requestAddress({ poolId, address: 'nope', gateway: false }), { code: 'IPAM_ADDRESS_INVALID' });
});

t.test('release is idempotent and the count moves once per address', async (t) => {
  const store = fresh(t);
  const ipam = makeIpam(store);
  const { poolId } = await ipam.requestPool(pool('10.58.0.0/24'));
  const { address } = await ipam.requestAddress({ poolId, address: '', gateway: false });
  t.same(await counted(store, poolId), { count: 1, reservations: 1 });
  await ipam.releaseAddress(poolId, address.split('/')[0] ?? '');
  await ipam.releaseAddress(poolId, address.split('/')[0] ?? '');
  t.same(await counted(store, poolId), { count: 0, reservations: 0 }, 'a second release moves nothing');
  await ipam.releaseAddress('LocalDefault/10.99.0.0/24', '10.99.0.5');
  t.pass('releasing in an unknown pool is a no-op');
  await ipam.releasePool(poolId);
  await ipam.releasePool(poolId);
  t.equal(await store.get(keys.pool(poolId)), undefined);
  await t.rejects(ipam.requestAddress({ poolId, address: '', gateway: false }), { code: 'IPAM_POOL_NOT_FOUND' });
});

t.test('pools: overlap refused naming the other, validation names the field', async (t) => {
  const ipam = makeIpam(fresh(t));
  await ipam.requestPool(pool('10.60.0.0/16'));
  await t.rejects(ipam.requestPool(pool('10.60.5.0/24')), {
    code: 'IPAM_POOL_OVERLAP',
    message: /pool 10\.60\.5\.0\/24 overlaps pool 10\.60\.0\.0\/16 \(LocalDefault\/10\.60\.0\.0\/16\)/,
  });
  await t.rejects(ipam.requestPool(pool('10.61.0.0/24', '10.62.0.0/25')), {
    message: /--ip-range 10\.62\.0\.0\/25 is not inside --subnet 10\.61\.0\.0\/24/,
  });
  await t.rejects(ipam.requestPool(pool('10.61.0.0/24', '', true)), { message: /is IPv4 but the request is for IPv6/ });
  await t.rejects(ipam.requestPool(pool('fd00::/96', '', true)), { message: /\/64 or larger/ });
  await t.rejects(ipam.requestPool(pool('10.61.0.0/33')), { code: 'IPAM_POOL_INVALID', message: /Pool: .*prefix length/ });
  await t.rejects(ipam.requestPool({ ...pool('10.61.0.0/24'), options: { 'ovsnet.bogus': '1' } }), {
    code: 'IPAM_OPTION_INVALID',
    message: /--ipam-opt ovsnet\.bogus is not an ovsnet IPAM option/,
  });
  t.ok(await ipam.requestPool({ ...pool('10.61.0.0/24'), options: { 'com.docker.other': '1' } }), "others' options pass");
  await t.rejects(ipam.requestPool({ ...pool('10.63.0.0/24'), addressSpace: 'Mars' }), {
    message: /address space "Mars" is not one of ovsnet's: LocalDefault, GlobalDefault/,
  });
  await t.rejects(
    ipam.requestPool({ ...pool('10.60.0.0/16'), addressSpace: 'GlobalDefault' }),
    { code: 'IPAM_POOL_OVERLAP' },
    'address spaces share the hosts: their pools may not overlap either',
  );
});

t.test('dynamic pools: distinct, skip routes and pools, never one that is held', async (t) => {
  const ipam = makeIpam(fresh(t), { routes: ['10.192.1.0/24'], defaultPools: '10.192.0.0/21:24,fd5e::/62:64' });
  await ipam.requestPool(pool('10.192.2.0/25'));
  const next = async () => (await ipam.requestPool(pool(''))).pool;
  const a = await ipam.requestPool(pool(''));
  t.equal(a.pool, '10.192.0.0/24');
  t.equal(await next(), '10.192.3.0/24', 'skips the host route and the explicit pool');
  await ipam.releasePool(a.poolId);
  t.same(
    [await next(), await next(), await next(), await next()],
    ['10.192.4.0/24', '10.192.5.0/24', '10.192.6.0/24', '10.192.7.0/24'],
    'a released pool is not handed out again at once: the search goes on from the last one',
  );
  t.equal(await next(), '10.192.0.0/24', 'it comes back after a full cycle');
  await t.rejects(next(), {
    code: 'IPAM_NO_FREE_POOL',
    message: /every pool of OVSNET_DEFAULT_POOLS \(10\.192\.0\.0\/21:24\) overlaps a network or a host route/,
  });
  t.equal((await ipam.requestPool(pool('', '', true))).pool, 'fd5e::/64', 'IPv6 from its own range');
});

t.test('IPv6 pools of /64: sparse, canonical answers', async (t) => {
  const store = fresh(t);
  const ipam = makeIpam(store);
  const { poolId, pool: p } = await ipam.requestPool(pool('fd00:55::/64', '', true));
  t.equal(p, 'fd00:55::/64');
  t.same(await ipam.requestAddress({ poolId, address: '', gateway: true }), { address: 'fd00:55::1/64' });
  t.same(await ipam.requestAddress({ poolId, address: '', gateway: false }), { address: 'fd00:55::2/64' });
  t.same(await ipam.requestAddress({ poolId, address: 'fd00:55::ffff:ffff:ffff:ffff', gateway: false }), {
    address: 'fd00:55::ffff:ffff:ffff:ffff/64',
  });
  t.same(await ipam.requestAddress({ poolId, address: 'FD00:55:0::9', gateway: false }), { address: 'fd00:55::9/64' });
  const big = await ipam.requestPool(pool('fd01::/48', '', true));
  t.same(await ipam.requestAddress({ poolId: big.poolId, address: '', gateway: false }), { address: 'fd01::1/48' });
});
