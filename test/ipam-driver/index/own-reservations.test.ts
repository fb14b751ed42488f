/**
 * The watch's events of this process's own reservations (src/ipam-driver/index/own-reservations.ts
 * and index-sync.ts): an event whose value is the text this process wrote is applied from the
 * record it wrote, not decoded; another host's record at the key, a later write of it, or the
 * same text a second time is decoded and applied.
 *
 * To see which way an event went, the record noted is not the one its text decodes to (holder
 * "noted" where the text says "stored"): the holder index then names the one that was applied.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { parseAddress } from '../../../src/lib/cidr.js';
import { createLogger } from '../../../src/lib/log.js';
import { HolderIndex } from '../../../src/ipam-driver/index/holder-index.js';
import { IndexSync } from '../../../src/ipam-driver/index/index-sync.js';
import { PoolIndex } from '../../../src/ipam-driver/index/pool-index.js';
import type { Reservation } from '../../../src/ipam-driver/state/records.js';
import { reservationTxn } from '../../../src/ipam-driver/state/ipam-txn.js';
import { EtcdStore } from '../../../src/store/etcd/etcd.js';
import { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import type { Store } from '../../../src/store/types.js';
import { etcdEndpoints } from '../../helpers/services.js';
import { makeIpam, pool } from '../../helpers/ipam.js';
import { waitFor } from '../../helpers/wait.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-own-reservations-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
let n = 0;

/** A pool made by an IPAM on a fresh store, and an index following that store. */
async function setup(t: Test) {
  const store = new SqliteStore({ file: path.join(dir, `o${n++}.db`) });
  const ipam = makeIpam(store, { host: 'h1' });
  const { poolId } = await ipam.requestPool(pool('10.99.0.0/24'));
  const index = new PoolIndex();
  const holders = new HolderIndex();
  const sync = new IndexSync(index, { store, log: createLogger('silent'), readyTimeoutMs: 5000 }, holders);
  sync.start();
  await sync.ready();
  t.teardown(async () => {
    await sync.stop();
    await ipam.stop();
    await store.close();
  });
  const reservation = (address: string, holder: string, host = 'h1'): Reservation => ({
    address,
    poolId,
    kind: 'dynamic',
    host,
    reservedAt: '2026-12-02T07:00:00.000Z',
    holder,
  });
  const write = (r: Reservation) => store.txn({ compares: [], success: [reservationTxn.put(r)] });
  const marked = (address: string) => index.pools.get(poolId)?.isMarked(parseAddress(address).value);
  return { store, sync, holders, poolId, reservation, write, marked };
}

t.test("this process's record comes back: applied from the record noted, not decoded", async (t) => {
  const { sync, holders, poolId, reservation, write, marked } = await setup(t);
  const stored = reservation('10.99.0.7', 'ep/stored');
  sync.own.wrote(reservation('10.99.0.7', 'ep/noted'), JSON.stringify(stored));
  await write(stored);
  await waitFor(() => holders.holderAt(poolId, '10.99.0.7') !== undefined, 2000, 'the event');
  t.equal(holders.holderAt(poolId, '10.99.0.7'), 'ep/noted', 'the noted record was applied: the text was not decoded');
  t.equal(marked('10.99.0.7'), true, 'the pool index marks the address');
  t.equal(sync.own.size, 0, 'each noted record serves one event');
});

t.test("another host's record at the key is decoded and applied", async (t) => {
  const { sync, holders, poolId, reservation, write } = await setup(t);
  sync.own.wrote(reservation('10.99.0.8', 'ep/noted'));
  await write(reservation('10.99.0.8', 'ep/theirs', 'h2'));
  await waitFor(() => holders.holderAt(poolId, '10.99.0.8') !== undefined, 2000, 'the event');
  t.equal(holders.holderAt(poolId, '10.99.0.8'), 'ep/theirs', "the stored record is applied, not this process's");
});

t.test('a later write of the key, and the same text again, are decoded and applied', async (t) => {
  const { store, sync, holders, poolId, reservation, write, marked } = await setup(t);
  const stored = reservation('10.99.0.9', 'ep/stored');
  sync.own.wrote(reservation('10.99.0.9', 'ep/noted'), JSON.stringify(stored));
  await write(stored);
  await waitFor(() => holders.holderAt(poolId, '10.99.0.9') === 'ep/noted', 2000, 'the own event');
  await write(stored); // the same text, a later revision: the noted record was used up
  await waitFor(() => holders.holderAt(poolId, '10.99.0.9') === 'ep/stored', 2000, 'the second event, decoded');
  await write(reservation('10.99.0.9', 'ep/later', 'h2'));
  await waitFor(() => holders.holderAt(poolId, '10.99.0.9') === 'ep/later', 2000, 'the later record');
  await store.txn({ compares: [], success: [reservationTxn.del(poolId, '10.99.0.9')] });
  await waitFor(() => marked('10.99.0.9') === false, 2000, 'the delete');
  t.equal(holders.holderAt(poolId, '10.99.0.9'), undefined);
});

/** Through an IPAM on `store`: its own reservation and binding come back unparsed, another process's are parsed. */
async function ownThroughIpam(t: Test, store: Store, other: Store) {
  const ipam = makeIpam(store, { host: 'h1' });
  const peer = makeIpam(other, { host: 'h2' });
  t.teardown(async () => {
    await ipam.stop();
    await peer.stop();
    await store.close();
    await other.close();
  });
  const { poolId } = await ipam.requestPool(pool('10.98.0.0/24'));
  const parse = JSON.parse;
  const parsed: string[] = [];
  t.teardown(() => void (JSON.parse = parse));
  /** The reservation texts of `plain` parsed while `step` runs and the watch delivers what it wrote. */
  const parsedDuring = async (plain: () => string, step: () => Promise<unknown>) => {
    parsed.length = 0;
    JSON.parse = ((text: string) => (parsed.push(text), parse(text) as unknown)) as typeof JSON.parse;
    try {
      await step();
      await new Promise((r) => setTimeout(r, 100));
    } finally {
      JSON.parse = parse;
    }
    return parsed.filter((s) => s.includes(`"address":"${plain()}"`) && s.includes('"reservedAt"'));
  };
  let address = '';
  const plain = () => address.split('/')[0] ?? '';
  t.same(
    await parsedDuring(plain, async () => ({ address } = await ipam.requestAddress({ poolId, address: '', gateway: false }))),
    [],
    'the reservation',
  );
  const bind = ipam.bindOps(address, 'e'.repeat(64));
  if (bind === undefined) throw new Error('the binding should ride in a transaction');
  t.same(await parsedDuring(plain, () => store.txn({ compares: [...bind.compares], success: [...bind.success] })), [], 'its binding');
  t.equal(ipam.usage().find((u) => u.poolId === poolId)?.reserved, 1);
  await ipam.releaseAddress(poolId, plain());
  // Another host's reservation (in its own pool): parsed, and in this one's index.
  const theirPool = await peer.requestPool(pool('10.97.0.0/24'));
  let theirs = '';
  const parsedTheirs = await parsedDuring(
    () => theirs.split('/')[0] ?? '',
    async () => ({ address: theirs } = await peer.requestAddress({ poolId: theirPool.poolId, address: '', gateway: false })),
  );
  t.ok(parsedTheirs.length > 0, "another host's reservation is parsed");
  await waitFor(
    () => ipam.usage().find((u) => u.poolId === theirPool.poolId)?.reserved === 1,
    2000,
    "the other host's reservation in the index",
  );
  await peer.releaseAddress(theirPool.poolId, theirs.split('/')[0] ?? '');
  await peer.releasePool(theirPool.poolId);
  await ipam.releasePool(poolId);
  t.same(
    (await store.list('/ovsnet/ipam/')).kvs.map((kv) => kv.key),
    [],
    'nothing left',
  );
}

t.test("an IPAM's own reservation and its binding come back without their text parsed (embedded store)", async (t) => {
  const file = path.join(dir, `o${n++}.db`);
  await ownThroughIpam(t, new SqliteStore({ file }), new SqliteStore({ file }));
});

t.test("an IPAM's own reservation and its binding come back without their text parsed (etcd)", async (t) => {
  const endpoints = etcdEndpoints().map((e) => `http://${e}`);
  await ownThroughIpam(t, new EtcdStore({ endpoints, timeoutMs: 3000 }), new EtcdStore({ endpoints, timeoutMs: 3000 }));
});
