/**
 * Reservation binding (src/ipam-driver/allocation/bind-endpoint.ts): CreateEndpoint marks the reservation of each of
 * the endpoint's addresses with the endpoint, through Ipam.bindEndpoint (pools found in the IPAM
 * index) or bindReservation directly (pools read from the store when not given).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { bindReservation } from '../../../src/ipam-driver/allocation/bind-endpoint.js';
import type { Ipam } from '../../../src/ipam-driver/ipam.js';
import type { Reservation } from '../../../src/ipam-driver/state/records.js';
import { keys } from '../../../src/store/keys.js';
import { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import { put } from '../../../src/store/types.js';
import { makeIpam, pool } from '../../helpers/ipam.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-bind-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
let n = 0;

/** A store that records the prefixes listed and counts transactions, and an Ipam on it. */
function setup(t: Test): { store: SqliteStore; ipam: Ipam; listed: string[]; txns: () => number } {
  const store = new SqliteStore({ file: path.join(dir, `b${n++}.db`) });
  const ipam = makeIpam(store);
  t.teardown(async () => {
    await ipam.stop();
    await store.close();
  });
  const listed: string[] = [];
  const list = store.list.bind(store);
  store.list = (prefix) => (listed.push(prefix), list(prefix));
  let count = 0;
  const txn = store.txn.bind(store);
  store.txn = (req) => (count++, txn(req));
  return { store, ipam, listed, txns: () => count };
}

/** A pool with one dynamic address reserved: the address (plain) and the pool's ID. */
async function reserved(ipam: Ipam, cidr: string, v6 = false): Promise<{ poolId: string; address: string; cidrForm: string }> {
  const { poolId } = await ipam.requestPool(pool(cidr, '', v6));
  const { address } = await ipam.requestAddress({ poolId, address: '', gateway: false });
  return { poolId, address: address.split('/')[0] ?? '', cidrForm: address };
}

async function record(store: SqliteStore, poolId: string, address: string): Promise<Reservation & { modRevision: number }> {
  const kv = await store.get(keys.address(poolId, address));
  if (kv === undefined) throw new Error(`no reservation of ${address}`);
  return { ...(JSON.parse(kv.value) as Reservation), modRevision: kv.modRevision };
}

for (const [family, cidr, v6] of [
  ['IPv4', '10.91.0.0/24', false],
  ['IPv6', 'fd00:91::/64', true],
] as const) {
  t.test(`${family}: Ipam.bindEndpoint marks the reservation with the endpoint, once`, async (t) => {
    const { store, ipam, txns } = setup(t);
    const { poolId, address, cidrForm } = await reserved(ipam, cidr, v6);
    const before = await record(store, poolId, address);
    t.equal(await ipam.bindEndpoint(cidrForm, 'ep1'), true, 'the CIDR form Docker sends is accepted');
    const bound = await record(store, poolId, address);
    t.equal(bound.endpoint, 'ep1', 'the reservation names its endpoint');
    t.same(
      { ...bound, endpoint: undefined, modRevision: 0 },
      { ...before, endpoint: undefined, modRevision: 0 },
      'and nothing else of it changed',
    );

    const writes = txns();
    t.equal(await ipam.bindEndpoint(address, 'ep1'), true, 'binding again (plain form) is done already');
    t.equal(txns(), writes, 'without writing');
    t.equal((await record(store, poolId, address)).modRevision, bound.modRevision, 'the record is untouched');
  });

  t.test(`${family}: the pool comes from the IPAM index, not from every pool record`, async (t) => {
    const { ipam, listed } = setup(t);
    for (let i = 0; i < 5; i++) await ipam.requestPool(pool(v6 ? `fd00:92:${i}::/64` : `10.92.${i}.0/24`, '', v6)); // other pools
    const { address } = await reserved(ipam, cidr, v6);
    listed.length = 0;
    t.equal(await ipam.bindEndpoint(address, 'ep1'), true);
    t.same(listed, [], 'no pool record read');
  });
}

t.test('an address no ovsnet reservation holds is not bound (Docker default IPAM gave it)', async (t) => {
  const { store, ipam, txns } = setup(t);
  const { poolId, address } = await reserved(ipam, '10.93.0.0/24');
  const writes = txns();
  t.equal(await ipam.bindEndpoint('10.93.0.200', 'ep1'), false, 'in an ovsnet pool, but not reserved');
  t.equal(await ipam.bindEndpoint('192.168.93.5/24', 'ep1'), false, 'in no ovsnet pool');
  t.equal(await ipam.bindEndpoint('fd00:93::5', 'ep1'), false, 'IPv6 in no ovsnet pool');
  t.equal(txns(), writes, 'nothing written');
  t.equal((await record(store, poolId, address)).endpoint, undefined, 'the reservation there is left alone');
});

t.test('a reservation changed between the read and the write is read again, its change kept', async (t) => {
  const { store, ipam, txns } = setup(t);
  const { poolId, address } = await reserved(ipam, '10.94.0.0/24');
  const key = keys.address(poolId, address);
  // Another writer changes the record right after bind reads it: its modRevision moves.
  const get = store.get.bind(store);
  let raced = false;
  store.get = async (k) => {
    const kv = await get(k);
    if (k === key && kv !== undefined && !raced) {
      raced = true;
      await store.txn({ compares: [], success: [put(key, JSON.stringify({ ...(JSON.parse(kv.value) as Reservation), name: 'renamed' }))] });
    }
    return kv;
  };
  const writes = txns();
  t.equal(await ipam.bindEndpoint(address, 'ep1'), true);
  t.equal(txns() - writes, 3, "the other writer's change, the write that lost to it, the write after reading again");
  const bound = await record(store, poolId, address);
  t.equal(bound.endpoint, 'ep1', 'bound');
  t.equal(bound.name, 'renamed', "the other writer's change is not overwritten");
});

t.test('bindReservation on its own: pools given by the caller, or read from the store', async (t) => {
  const { store, ipam, listed } = setup(t);
  const a = await reserved(ipam, '10.95.0.0/24');
  const b = await reserved(ipam, 'fd00:95::/64', true);

  listed.length = 0;
  t.same(await bindReservation(store, a.cidrForm, 'ep-a', [a.poolId]), { bound: true }, 'pools given: bound');
  t.same(listed, [], 'no pool record read');
  t.equal((await record(store, a.poolId, a.address)).endpoint, 'ep-a');

  t.same(await bindReservation(store, b.address, 'ep-b'), { bound: true }, 'pools not given: found from the pool records');
  t.same(listed, [keys.pools], 'every pool record read once');
  t.equal((await record(store, b.poolId, b.address)).endpoint, 'ep-b');

  t.same(await bindReservation(store, a.address, 'ep-a', []), { bound: false, unreserved: [] }, 'no pool holds it: not bound');
  t.same(
    await bindReservation(store, '10.95.0.77', 'ep-x'),
    { bound: false, unreserved: [a.poolId] },
    'not reserved: not bound, its pool said',
  );
  t.same(await bindReservation(store, a.address, 'ep-a'), { bound: true }, 'bound already: idempotent');
});
