/**
 * DeleteEndpoint frees the endpoint's address in its own transaction and leaves a tombstone;
 * Docker's ReleaseAddress consumes it (endpoint-release.ts, state/tombstones.ts). What must
 * hold: an address handed out again between the two calls is never freed by the old release;
 * a restart between them loses nothing; consumed tombstones are swept by a later transaction;
 * an expired one lets the release through; a sticky pool keeps its record on the same path; a
 * released pool takes its tombstones with it.
 */
import t from 'tap';
import { keys } from '../../../src/store/keys.js';
import { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import { TOMBSTONE_TTL_MS, Tombstones, tombstoneTxn } from '../../../src/ipam-driver/state/tombstones.js';
import { NET, driverWithIpam, ep } from '../../helpers/driver-ipam.js';
import { makeIpam } from '../../helpers/ipam.js';

const plainOf = (a: string) => a.split('/')[0] ?? '';

t.test('an address handed out again between DeleteEndpoint and ReleaseAddress stays with its new holder', async (t) => {
  const { store, ipam, driver, poolId, reservation } = await driverWithIpam(t);
  const { address } = await ipam.requestAddress({ poolId, address: '', gateway: false });
  const E1 = '1'.repeat(64);
  await driver.createEndpoint(ep(E1, address));
  await driver.deleteEndpoint(NET, E1);
  t.equal(await store.get(keys.address(poolId, plainOf(address))), undefined, 'DeleteEndpoint freed it');
  t.equal((await store.list(keys.tombstones(poolId))).kvs.length, 1, 'and left a tombstone');

  // Another container gets the same address (--ip) before Docker's release of the first arrives.
  const again = await ipam.requestAddress({ poolId, address: plainOf(address), gateway: false });
  t.equal(again.address, address, 'the address was free to hand out');
  await ipam.releaseAddress(poolId, address);
  t.ok(await store.get(keys.address(poolId, plainOf(address))), "the old release left the new holder's reservation");
  const E2 = '2'.repeat(64);
  await driver.createEndpoint(ep(E2, again.address));
  t.equal((await reservation(address)).endpoint, E2, 'bound to the new endpoint');

  // The new holder's own release goes the same way.
  await driver.deleteEndpoint(NET, E2);
  await ipam.releaseAddress(poolId, address);
  t.equal(await store.get(keys.address(poolId, plainOf(address))), undefined, 'freed');
  t.equal(Number((await store.get(keys.poolCount(poolId)))?.value), 1, 'the count: the gateway alone');
  t.same(
    ipam.usage().map((u) => u.count),
    [1],
    "the index's count agrees",
  );
  // A second release of a consumed address frees nothing and fails nothing.
  await ipam.releaseAddress(poolId, address);
  t.equal(Number((await store.get(keys.poolCount(poolId)))?.value), 1, 'a repeated release moved nothing');
});

t.test('ovsnet restarted between DeleteEndpoint and ReleaseAddress: the durable tombstone is consumed', async (t) => {
  const { store, file, ipam, driver, poolId } = await driverWithIpam(t);
  const { address } = await ipam.requestAddress({ poolId, address: '', gateway: false });
  const E = '3'.repeat(64);
  await driver.createEndpoint(ep(E, address));
  await driver.deleteEndpoint(NET, E);
  await ipam.stop();
  const store2 = new SqliteStore({ file });
  const ipam2 = makeIpam(store2);
  t.teardown(async () => {
    await ipam2.stop();
    await store2.close();
  });
  const again = await ipam2.requestAddress({ poolId, address: plainOf(address), gateway: false });
  t.equal(again.address, address, 'the restarted ovsnet hands the address out again');
  await ipam2.releaseAddress(poolId, address);
  t.ok(
    await store.get(keys.address(poolId, plainOf(address))),
    "the release Docker sent after the restart freed nothing of the new holder's",
  );
});

t.test('consumed tombstones go with the next DeleteEndpoint, or with a sweep of their own', async (t) => {
  const { store, ipam, driver, poolId } = await driverWithIpam(t);
  const tombstones = async () => (await store.list(keys.tombstones(poolId))).kvs.length;
  const cycle = async (E: string) => {
    const { address } = await ipam.requestAddress({ poolId, address: '', gateway: false });
    await driver.createEndpoint(ep(E, address));
    await driver.deleteEndpoint(NET, E);
    await ipam.releaseAddress(poolId, address);
  };
  await cycle('4'.repeat(64));
  t.equal(await tombstones(), 1, 'consumed, its key still there');
  await cycle('5'.repeat(64));
  t.equal(await tombstones(), 1, "the second DeleteEndpoint's transaction deleted the first's key");
  const internal = ipam as unknown as { endpointRelease: { tombstones: Tombstones } };
  await internal.endpointRelease.tombstones.sweepNow(store);
  t.equal(await tombstones(), 0, 'a sweep of its own deleted the last');
  await ipam.releasePool(poolId);
  t.equal((await store.list(keys.allTombstones)).kvs.length, 0);
});

t.test('a sticky pool: the holder key gets its address back, the record written with the release', async (t) => {
  const { store, ipam, driver, poolId, calls } = await driverWithIpam(t, { 'ovsnet.sticky': 'true' });
  const first = await ipam.requestAddress({ poolId, address: '', gateway: false, name: 'web-1' });
  const E = '6'.repeat(64);
  await driver.createEndpoint(ep(E, first.address));
  calls.length = 0;
  await driver.deleteEndpoint(NET, E);
  await ipam.releaseAddress(poolId, first.address);
  t.same(calls, ['txn'], 'one transaction for both calls');
  t.equal(await store.get(keys.address(poolId, plainOf(first.address))), undefined, 'freed');
  t.equal((await store.list(keys.sticky(poolId))).kvs.length, 1, 'the sticky record written');
  await ipam.requestAddress({ poolId, address: '', gateway: false, name: 'other' });
  const back = await ipam.requestAddress({ poolId, address: '', gateway: false, name: 'web-1' });
  t.equal(back.address, first.address, 'web-1 gets its address back');
});

t.test('a released pool takes its tombstones with it', async (t) => {
  const { store, ipam, driver, poolId } = await driverWithIpam(t);
  const { address } = await ipam.requestAddress({ poolId, address: '', gateway: false });
  await driver.createEndpoint(ep('7'.repeat(64), address));
  await driver.deleteEndpoint(NET, '7'.repeat(64));
  await driver.deleteNetwork(NET);
  await ipam.releasePool(poolId);
  t.same((await store.list(keys.allTombstones)).kvs, [], 'no tombstone left');
});

t.test('Tombstones: oldest first, one per take, expired ones neither taken nor kept; only this host is loaded', async (t) => {
  let now = Date.parse('2026-12-02T04:00:00Z');
  const clock = () => new Date(now);
  const ts = new Tombstones('h1', clock);
  const at = (ms: number) => new Date(ms).toISOString();
  ts.add({ poolId: 'P', address: '10.0.0.5', endpoint: 'e1', host: 'h1', at: at(now) });
  ts.add({ poolId: 'P', address: '10.0.0.5', endpoint: 'e2', host: 'h1', at: at(now + 1) });
  t.ok(ts.take('P', '10.0.0.5'), 'the first');
  t.ok(ts.take('P', '10.0.0.5'), 'the second');
  t.notOk(ts.take('P', '10.0.0.5'), 'none left: a third release is a release');
  t.equal(ts.sweepable, 2, 'both keys wait for a sweep');
  const s = ts.sweep();
  t.equal(s.ops.length, 2);
  s.failed();
  t.equal(ts.sweepable, 2, 'a failed transaction gives them back');
  ts.sweep(); // applied
  t.equal(ts.sweepable, 0);

  ts.add({ poolId: 'P', address: '10.0.0.6', endpoint: 'e3', host: 'h1', at: at(now) });
  now += TOMBSTONE_TTL_MS + 1;
  t.notOk(ts.take('P', '10.0.0.6'), 'expired: the release goes through');
  t.equal(ts.sweepable, 1, 'its key is swept');

  const { store } = await driverWithIpam(t);
  const mine = { poolId: 'P', address: '10.0.0.7', endpoint: 'e4', host: 'h1', at: at(now) };
  const theirs = { ...mine, endpoint: 'e5', host: 'h2' };
  await store.txn({ compares: [], success: [tombstoneTxn.put(mine), tombstoneTxn.put(theirs)] });
  await store.txn({ compares: [], success: [{ type: 'put', key: keys.tombstone('P', '10.0.0.8', 'e6'), value: '{"host":"h1"}' }] });
  const loaded = new Tombstones('h1', clock);
  await loaded.load(store);
  t.equal(loaded.size, 1, "this host's one (another host's left alone, a malformed record not trusted)");
  t.ok(loaded.take('P', '10.0.0.7'));
});
