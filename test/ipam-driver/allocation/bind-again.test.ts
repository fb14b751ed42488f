/**
 * A CreateEndpoint that comes after the reaper freed its address as never bound
 * (src/ipam-driver/allocation/bind-again.ts), through the driver and the IPAM wired as the daemon
 * wires them: the address is reserved again for the endpoint and bound, the count back where it
 * was, in a one-host pool and a shared one. Handed out again meanwhile, the address goes to one
 * of the two CreateEndpoints and the other is refused, saying why, its record going again, and
 * Docker's release that follows frees nothing; so too when it is taken while reserved again.
 * An address the reaper did not free keeps the old answer (not bound, nothing written); and the
 * memory of reaped addresses: taken once, an hour long, bounded.
 */
import t, { type Test } from 'tap';
import { REAPED_KEEP_MS, REAPED_LIMIT, ReapedUnbound } from '../../../src/ipam-driver/allocation/bind-again.js';
import { Reaper } from '../../../src/ipam-driver/recovery/orphan-reaper.js';
import { listReservations } from '../../../src/ipam-driver/state/ipam-reads.js';
import { holderOf } from '../../../src/ipam-driver/state/holder-keys.js';
import { createLogger } from '../../../src/lib/log.js';
import { NET, driverWithIpam, ep } from '../../helpers/driver-ipam.js';

const GRACE = 60_000;
const E1 = '1'.repeat(64);
const E2 = '2'.repeat(64);
const plainOf = (a: string) => a.split('/')[0] ?? '';

/** A driver and IPAM on pool 10.77.0.0/24 (shared when asked), and a reaper of theirs on a clock of its own. */
async function setup(t: Test, shared: boolean) {
  const w = await driverWithIpam(t);
  if (shared) await w.ipam.bindLogical('10.77.0.0/24', 'late');
  const clock = { now: Date.now() };
  const reaper = new Reaper({
    store: w.store,
    log: createLogger('silent'),
    host: 'test-host',
    graceMs: GRACE,
    endpoints: async () => {
      const ids = new Set<string>();
      const addresses = new Set<string>();
      for (const e of await w.driver.records.endpointsOf(NET)) {
        ids.add(e.endpointId);
        if (e.address !== undefined) addresses.add(plainOf(e.address));
      }
      return { ids, addresses };
    },
    driverPools: () => Promise.resolve(new Set(['10.77.0.0/24'])),
    release: (poolId, address, onlyIf, reason) => w.ipam.reap(poolId, address, onlyIf, reason === 'never bound'),
    now: () => new Date(clock.now),
  });
  /** Sweeps until the reaper frees the request's address as never bound (two sightings a grace period apart). */
  const reapUnbound = async () => {
    clock.now += GRACE + 5000; // the records' times are the real clock's
    t.same(await reaper.sweep(), [], 'first seen unbound: kept');
    clock.now += GRACE;
    return (await reaper.sweep()).map((r) => [r.address, r.reason]);
  };
  const held = async () => (await listReservations(w.store, w.poolId)).map((r) => [r.address, holderOf(r), r.endpoint ?? '']).sort();
  /** The reservations of one address: [address, holder, endpoint]. */
  const at = async (address: string) => (await held()).filter(([a]) => a === address);
  /** The pool's count and its reservation records, as the IPAM's index has them. */
  const counts = () => {
    const u = w.ipam.usage().find((x) => x.poolId === w.poolId);
    return { count: u?.count, reserved: u?.reserved };
  };
  return { ...w, reapUnbound, held, at, counts };
}

for (const shared of [false, true]) {
  const kind = shared ? 'a shared pool' : 'a one-host pool';

  t.test(`${kind}: CreateEndpoint after the reaper freed its address reserves it again and binds it`, async (t) => {
    const w = await setup(t, shared);
    const { address } = await w.ipam.requestAddress({ poolId: w.poolId, address: '', gateway: false });
    const A = plainOf(address);
    const before = w.counts();
    t.same(await w.reapUnbound(), [[A, 'never bound']], 'reaped as never bound');
    t.notOk(
      (await w.held()).some(([a]) => a === A),
      'its reservation is gone',
    );

    await w.driver.createEndpoint(ep(E1, address)); // Docker's CreateEndpoint, late
    t.same(await w.at(A), [[A, `docker/endpoint/${E1}`, E1]], 'reserved again, held by and bound to the endpoint');
    t.same(w.counts(), before, 'the count is back where it was');
    const other = await w.ipam.requestAddress({ poolId: w.poolId, address: '', gateway: false });
    t.not(plainOf(other.address), A, 'the next container gets another address');

    // The rest of its life as usual: DeleteEndpoint, then Docker's release.
    await w.driver.deleteEndpoint(NET, E1);
    await w.ipam.releaseAddress(w.poolId, address);
    t.notOk(
      (await w.held()).some(([a]) => a === A),
      'freed once its container is gone',
    );
  });

  t.test(`${kind}: handed out again meanwhile, the address goes to one of the two CreateEndpoints, never both`, async (t) => {
    const w = await setup(t, shared);
    const { address } = await w.ipam.requestAddress({ poolId: w.poolId, address: '', gateway: false });
    const A = plainOf(address);
    t.same(await w.reapUnbound(), [[A, 'never bound']]);
    const second = await w.ipam.requestAddress({ poolId: w.poolId, address: A, gateway: false }); // another container's --ip
    const before = w.counts();
    // Nothing tells the late CreateEndpoint from the second request's: the first one to come binds it.
    await w.driver.createEndpoint(ep(E1, address));
    await t.rejects(
      w.driver.createEndpoint(ep(E2, second.address)),
      {
        code: 'IPAM_ADDRESS_TAKEN',
        message: new RegExp(
          `^endpoint 222222222222: address ${A.replaceAll('.', '\\.')} is bound to endpoint 111111111111, whose record exists .*Docker was handed it twice.*start the container again`,
        ),
      },
      'the other is refused, saying why and what to do',
    );
    t.same(
      (await w.driver.records.endpointsOf(NET)).map((e) => e.endpointId),
      [E1],
      "the refused endpoint's record went again",
    );
    await w.ipam.releaseAddress(w.poolId, second.address); // Docker releases the address of a failed CreateEndpoint
    t.same(
      await w.at(A),
      [[A, `docker/endpoint/${E1}`, E1]],
      "the bound endpoint keeps it: Docker's release of the refused one's frees nothing",
    );
    t.same(w.counts(), before, 'count unchanged');
  });

  t.test(`${kind}: reserved again but taken in between: refused, and Docker's release that follows frees nothing`, async (t) => {
    const w = await setup(t, shared);
    const { address } = await w.ipam.requestAddress({ poolId: w.poolId, address: '', gateway: false });
    const A = plainOf(address);
    t.same(await w.reapUnbound(), [[A, 'never bound']]);
    // The late CreateEndpoint reads the reservation gone; another request takes the address before it reserves it again.
    const { store } = w;
    const get = store.get.bind(store);
    let raced = false;
    store.get = async (k) => {
      const kv = await get(k);
      if (!raced && k.endsWith(`/${A}`) && kv === undefined) {
        raced = true;
        await w.ipam.requestAddress({ poolId: w.poolId, address: A, gateway: false });
      }
      return kv;
    };
    await t.rejects(
      w.driver.createEndpoint(ep(E1, address)),
      {
        code: 'IPAM_ADDRESS_TAKEN',
        message: new RegExp(
          `^endpoint 111111111111: its address ${A.replaceAll('.', '\\.')} was freed before Docker's CreateEndpoint came .*OVSNET_REAP_GRACE.* is now held by a request for this exact address .*start the container again`,
        ),
      },
      'refused, saying why and what to do',
    );
    t.ok(raced, 'the race was run');
    const held = await w.at(A);
    const before = w.counts();
    t.same(await w.driver.records.endpointsOf(NET), [], 'its endpoint record went again');
    await w.ipam.releaseAddress(w.poolId, address); // Docker releases the address of a failed CreateEndpoint
    t.same(await w.at(A), held, "the other holder keeps it: the refused endpoint's release took a tombstone");
    t.same(w.counts(), before, 'count unchanged');
  });
}

t.test('a reservation bound to an endpoint whose record is gone is bound to the new one', async (t) => {
  const w = await setup(t, false);
  const { address } = await w.ipam.requestAddress({ poolId: w.poolId, address: '', gateway: false });
  await w.driver.createEndpoint(ep(E1, address));
  await w.driver.records.deleteEndpoint(NET, E1); // its record went alone (DeleteEndpoint's release could not ride)
  await w.driver.createEndpoint(ep(E2, address));
  t.same(await w.at(plainOf(address)), [[plainOf(address), `docker/endpoint/${E2}`, E2]]);
});

t.test('an address the reaper did not free as never bound: not bound, nothing reserved (the old answer)', async (t) => {
  const w = await setup(t, false);
  const { address } = await w.ipam.requestAddress({ poolId: w.poolId, address: '', gateway: false });
  const A = plainOf(address);
  // The reaper judged it, but its release did not happen (the record changed meanwhile): not remembered.
  t.equal(await w.ipam.reap(w.poolId, A, () => false, true), false, 'not released');
  await w.ipam.releaseIf(w.poolId, A); // freed another way (Docker's release)
  t.equal(await w.ipam.bindEndpoint(address, E1), false, 'not bound');
  t.notOk(
    (await w.held()).some(([a]) => a === A),
    'and not reserved again',
  );
  // Freed as never bound, then asked for once: a second CreateEndpoint of the address finds no note.
  const again = await w.ipam.requestAddress({ poolId: w.poolId, address: A, gateway: false });
  t.equal(await w.ipam.reap(w.poolId, A, () => true, true), true);
  t.equal(await w.ipam.bindEndpoint(again.address, E1), true, 'reserved again for the first');
  await w.driver.records.deleteEndpoint(NET, E1);
  await w.ipam.releaseIf(w.poolId, A);
  t.equal(await w.ipam.bindEndpoint(again.address, E2), false, 'not for a second');
});

t.test('the memory of reaped addresses: taken once, for an hour, the oldest going past its bound', async (t) => {
  const clock = { now: 1_000_000 };
  const reaped = new ReapedUnbound(() => new Date(clock.now));
  reaped.note('p1', '10.0.0.5');
  t.equal(reaped.take(['p0'], '10.0.0.5'), undefined, 'another pool: no');
  t.equal(reaped.take(['p0', 'p1'], '10.0.0.6'), undefined, 'another address: no');
  t.equal(reaped.take(['p0', 'p1'], '10.0.0.5'), 'p1', 'its pool');
  t.equal(reaped.take(['p1'], '10.0.0.5'), undefined, 'once');
  reaped.note('p1', '10.0.0.5');
  reaped.drop('p1', '10.0.0.5');
  t.equal(reaped.take(['p1'], '10.0.0.5'), undefined, 'dropped');
  reaped.note('p1', '10.0.0.7');
  clock.now += REAPED_KEEP_MS;
  t.equal(reaped.take(['p1'], '10.0.0.7'), 'p1', 'an hour old: still');
  reaped.note('p1', '10.0.0.7');
  clock.now += REAPED_KEEP_MS + 1;
  t.equal(reaped.take(['p1'], '10.0.0.7'), undefined, 'older: forgotten');
  for (let i = 0; i <= REAPED_LIMIT; i++) reaped.note('p2', `10.1.${i >> 8}.${i & 255}`);
  t.equal(reaped.take(['p2'], '10.1.0.0'), undefined, 'the oldest went past the bound');
  t.equal(reaped.take(['p2'], '10.1.0.1'), 'p2', 'the next is kept');
});
