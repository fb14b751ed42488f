/**
 * Docker's ReleaseAddress never frees an address bound to an endpoint whose record exists
 * (release-guard.ts), when no tombstone answers it: a release sent again after DeleteEndpoint
 * deleted its record alone, a tombstone expired, or lost. Without the guard (wired without the
 * driver's answer) the same late release frees the new holder's address: each case is run both
 * ways. A binding whose endpoint record is gone is freed, with no store call for the guard when
 * this process deleted the record; a binding that changes between the guard's test and the
 * release's transaction fails its compare and is tested again. And a reservation is noted
 * (RecentReservations) only once written: a failed try at a held address leaves the note of the
 * stored one, so DeleteEndpoint still frees it in its own transaction.
 */
import t, { type Test } from 'tap';
import { keys } from '../../../src/store/keys.js';
import { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import { put, type Store } from '../../../src/store/types.js';
import { TOMBSTONE_TTL_MS } from '../../../src/ipam-driver/state/tombstones.js';
import type { Ipam } from '../../../src/ipam-driver/ipam.js';
import type { NetworkDriver } from '../../../src/driver/network-driver.js';
import { NET, driverWithIpam, ep, wired, type Wiring } from '../../helpers/driver-ipam.js';

const plainOf = (a: string) => a.split('/')[0] ?? '';
const E1 = '1'.repeat(64);
const E2 = '2'.repeat(64);

/** How Docker's late release of E1's address comes to find no tombstone. */
type Missing = 'retried' | 'expired' | 'lost';

/** A restart of ovsnet on the same file: a new store, IPAM and driver (nothing cached). */
async function restart(
  t: Test,
  file: string,
  wiring: Wiring,
  before: { ipam: Ipam },
): Promise<{ store: Store; ipam: Ipam; driver: NetworkDriver }> {
  await before.ipam.stop();
  const store = new SqliteStore({ file });
  const { ipam, driver } = wired(store, wiring);
  t.teardown(async () => {
    await ipam.stop();
    await store.close();
  });
  return { store, ipam, driver };
}

async function lateRelease(t: Test, missing: Missing, guard: boolean, shared: boolean) {
  const first = await driverWithIpam(t, {}, { guard });
  const { file, poolId } = first;
  let { ipam, driver } = first;
  if (shared) await ipam.bindLogical('10.77.0.0/24', 'guarded');
  const { address } = await ipam.requestAddress({ poolId, address: '', gateway: false });
  const A = plainOf(address);
  await driver.createEndpoint(ep(E1, address));
  if (missing === 'retried') {
    // DeleteEndpoint deleted its record alone (its release could not ride); Docker's release
    // freed the address; the same release comes again later (Docker's plugin client retries a
    // call whose answer it did not get).
    await driver.records.deleteEndpoint(NET, E1);
    await ipam.releaseAddress(poolId, address);
    t.equal(await first.store.get(keys.address(poolId, A)), undefined, 'the first release freed it');
  } else {
    await driver.deleteEndpoint(NET, E1);
    const [tomb] = (await first.store.list(keys.tombstones(poolId))).kvs;
    t.ok(tomb, 'DeleteEndpoint freed the address and left a tombstone');
    if (tomb === undefined) throw new Error('no tombstone');
    if (missing === 'expired') {
      const at = new Date(Date.now() - TOMBSTONE_TTL_MS - 60_000).toISOString();
      await first.store.txn({ compares: [], success: [put(tomb.key, JSON.stringify({ ...JSON.parse(tomb.value), at }))] });
    } else await first.store.txn({ compares: [], success: [{ type: 'delete', key: tomb.key }] });
    ({ ipam, driver } = await restart(t, file, { guard }, { ipam }));
  }
  // The address goes to another container, whose CreateEndpoint binds it.
  const again = await ipam.requestAddress({ poolId, address: A, gateway: false });
  await driver.createEndpoint(ep(E2, again.address));
  // 'lost': ovsnet restarted once more, so E2's record is known from the store only.
  let store: Store = first.store;
  if (missing === 'lost') ({ store, ipam, driver } = await restart(t, file, { guard }, { ipam }));
  const count = async () => Number((await store.get(keys.poolCount(poolId)))?.value ?? '0');
  const before = shared ? 0 : await count();

  await ipam.releaseAddress(poolId, address); // the late one, E1's
  const stored = await store.get(keys.address(poolId, A));
  const label = `${missing}, ${shared ? 'shared' : 'one-host'} pool`;
  if (guard) {
    t.equal(
      stored === undefined ? undefined : (JSON.parse(stored.value) as { endpoint?: string }).endpoint,
      E2,
      `${label}: A stays with E2`,
    );
    if (!shared) t.equal(await count(), before, `${label}: the count did not move`);
  } else t.equal(stored, undefined, `${label}, without the guard: the late release frees E2's address`);
  return { ipam, driver, poolId, address, store };
}

for (const guard of [true, false]) {
  t.test(
    `a late release after the address was handed out again, no tombstone: ${guard ? 'kept' : 'freed without the guard'}`,
    async (t) => {
      for (const missing of ['retried', 'expired', 'lost'] as const) await lateRelease(t, missing, guard, false);
      await lateRelease(t, 'retried', guard, true);
    },
  );
}

t.test("E2's own release, after its DeleteEndpoint, frees the address the guard kept", async (t) => {
  const { ipam, driver, poolId, address, store } = await lateRelease(t, 'lost', true, false);
  await driver.deleteEndpoint(NET, E2);
  await ipam.releaseAddress(poolId, address);
  t.equal(await store.get(keys.address(poolId, plainOf(address))), undefined, 'freed');
  t.equal(Number((await store.get(keys.poolCount(poolId)))?.value), 1, 'the count: the gateway alone');
});

t.test('a binding whose endpoint record is gone is freed: no store call for the guard when this process deleted it', async (t) => {
  const { store, file, ipam, driver, poolId, calls } = await driverWithIpam(t);
  const { address } = await ipam.requestAddress({ poolId, address: '', gateway: false });
  await driver.createEndpoint(ep(E1, address));
  await driver.records.deleteEndpoint(NET, E1);
  calls.length = 0;
  await ipam.releaseAddress(poolId, address);
  t.same(calls, ['txn'], 'one transaction: the reservation compared as written, the endpoint known gone');
  t.equal(await store.get(keys.address(poolId, plainOf(address))), undefined, 'freed');

  // After a restart the driver knows neither endpoint: the guard reads.
  const second = await ipam.requestAddress({ poolId, address: '', gateway: false });
  await driver.createEndpoint(ep(E2, second.address));
  await driver.records.deleteEndpoint(NET, E2);
  const after = await restart(t, file, {}, { ipam });
  await after.ipam.releaseAddress(poolId, second.address);
  t.equal(await after.store.get(keys.address(poolId, plainOf(second.address))), undefined, 'freed after a restart too');
  t.equal(Number((await after.store.get(keys.poolCount(poolId)))?.value), 1, 'the count: the gateway alone');
});

t.test('the binding changes between the guard and the transaction: the compare fails, the new binding is tested, kept', async (t) => {
  for (const restarted of [false, true]) {
    // As the guard answers for E1 (gone), E2 takes the address: its CreateEndpoint binds it.
    let armed = false;
    let asked: string[] = [];
    let driver: NetworkDriver | undefined;
    let address = '';
    const hook = async (id: string) => {
      asked.push(id);
      if (!armed || id !== E1) return;
      armed = false;
      await driver?.createEndpoint(ep(E2, address));
    };
    const first = await driverWithIpam(t, {}, { hook });
    const { poolId } = first;
    let store: Store = first.store;
    let ipam = first.ipam;
    driver = first.driver;
    ({ address } = await ipam.requestAddress({ poolId, address: '', gateway: false }));
    await driver.createEndpoint(ep(E1, address));
    await driver.records.deleteEndpoint(NET, E1);
    // Without a restart the release compares the value this process wrote; after one, the revision it read.
    if (restarted) ({ store, ipam, driver } = await restart(t, first.file, { hook }, { ipam }));
    armed = true;
    asked = [];
    await ipam.releaseAddress(poolId, address);
    const stored = await store.get(keys.address(poolId, plainOf(address)));
    t.same(
      asked,
      [E1, E1, E2],
      `${restarted ? 'by revision' : 'by value'}: E1 tested (by the release, then by E2's CreateEndpoint before it takes E1's binding), then (the compare failed) E2`,
    );
    t.equal(stored === undefined ? undefined : (JSON.parse(stored.value) as { endpoint?: string }).endpoint, E2, 'kept: bound to E2');
    t.ok(await driver.records.endpoint(NET, E2), "E2's record exists");
  }
});

t.test("a failed try at a held address leaves the note of the stored reservation: DeleteEndpoint's release still rides", async (t) => {
  const { store, ipam, driver, poolId, calls } = await driverWithIpam(t);
  const { address } = await ipam.requestAddress({ poolId, address: '', gateway: false });
  await driver.createEndpoint(ep(E1, address));
  // --ip of an address in use: refused; its record was made for the try, never written.
  const refused = await ipam.requestAddress({ poolId, address: plainOf(address), gateway: false }).catch((e: Error) => e);
  t.match(refused, { message: /already in use/ });
  calls.length = 0;
  await driver.deleteEndpoint(NET, E1);
  t.same(calls, ['txn'], 'one transaction: the release rode with the record');
  t.equal(await store.get(keys.address(poolId, plainOf(address))), undefined, 'freed by DeleteEndpoint');
  t.equal((await store.list(keys.tombstones(poolId))).kvs.length, 1, 'with its tombstone');
});
