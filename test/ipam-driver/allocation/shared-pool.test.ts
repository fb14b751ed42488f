/**
 * Pools shared by a logical network: hosts on one store share one pool, claim blocks of it,
 * allocate inside their own blocks, borrow when all are claimed, hand emptied blocks back, and
 * never hand out an address twice. Each block's count equals its reservations, always.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import type { Ipam } from '../../../src/ipam-driver/ipam.js';
import { EtcdStore } from '../../../src/store/etcd/etcd.js';
import { keys } from '../../../src/store/keys.js';
import { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import type { Store } from '../../../src/store/types.js';
import { makeIpam, pool } from '../../helpers/ipam.js';
import { etcdEndpoints } from '../../helpers/services.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-shared-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
let n = 0;

function stores(t: Test, count: number): Store[] {
  const file = path.join(dir, `s${n++}.db`);
  const list = Array.from({ length: count }, () => new SqliteStore({ file }));
  t.teardown(async () => {
    for (const s of list) await s.close();
  });
  return list;
}

/** Docker's `network create` on host i: pool, gateway, then the driver binds it to `name`. */
async function create(ipam: Ipam, cidr: string, name: string, opts: Record<string, string> = {}): Promise<string> {
  const { poolId } = await ipam.requestPool({ ...pool(cidr), options: opts });
  await ipam.requestAddress({ poolId, address: '', gateway: true });
  t.equal(await ipam.bindLogical(cidr, name), poolId);
  return poolId;
}

interface BlockView {
  host: string;
  count: number;
}

async function blocks(store: Store, poolId: string): Promise<Map<string, BlockView>> {
  const kvs = (await store.list(keys.blocks(poolId))).kvs;
  return new Map(kvs.map((kv) => [decodeURIComponent(kv.key.slice(keys.blocks(poolId).length)), JSON.parse(kv.value) as BlockView]));
}

/** Every block's count equals the reservations inside it; returns the total. */
async function consistent(t: Test, store: Store, poolId: string, blockSize: number): Promise<number> {
  const reservations = (await store.list(keys.addresses(poolId))).kvs.map((kv) => (JSON.parse(kv.value) as { address: string }).address);
  const per = new Map<string, number>();
  for (const a of reservations) {
    const last = Number(a.split('.')[3]);
    const start = `${a.split('.').slice(0, 3).join('.')}.${last - (last % blockSize)}`;
    per.set(start, (per.get(start) ?? 0) + 1);
  }
  const seen = await blocks(store, poolId);
  t.same(new Map([...seen].map(([k, v]) => [k, v.count])), per, 'each block counts exactly its reservations');
  t.equal(await store.get(keys.poolCount(poolId)), undefined, 'no per-pool count key for a shared pool');
  return reservations.length;
}

t.test('three hosts share one pool, each from blocks of its own', async (t) => {
  const [a, b, c] = stores(t, 3).map((s, i) => makeIpam(s, { host: `h${i + 1}` }));
  if (a === undefined || b === undefined || c === undefined) throw new Error('three stores');
  const poolId = await create(a, '10.60.0.0/24', 'blue');
  t.equal(await create(b, '10.60.0.0/24', 'blue'), poolId, 'the second host gets the same PoolID');
  t.equal(await create(c, '10.60.0.0/24', 'blue'), poolId);
  const got = new Map<string, string[]>();
  await Promise.all(
    [a, b, c].map(async (ipam, i) => {
      const mine: string[] = [];
      for (let k = 0; k < 30; k++)
        mine.push((await ipam.requestAddress({ poolId, address: '', gateway: false })).address.split('/')[0] ?? '');
      got.set(`h${i + 1}`, mine);
    }),
  );
  const all = [...got.values()].flat();
  t.equal(new Set(all).size, 90, '90 distinct addresses');
  t.notOk(all.includes('10.60.0.1'), 'never the gateway');
  for (const [host, list] of got) {
    const starts = new Set(list.map((x) => Math.floor(Number(x.split('.')[3]) / 64)));
    t.equal(starts.size, 1, `${host}'s 30 addresses lie in one /26 block`);
  }
});

async function sharedOn(t: Test, [sa, sb]: Store[]) {
  if (sa === undefined || sb === undefined) throw new Error('two stores');
  const a = makeIpam(sa, { host: 'a' });
  const b = makeIpam(sb, { host: 'b' });
  t.teardown(async () => {
    await a.stop();
    await b.stop();
  });
  const octet = 100 + (parseInt(randomUUID().slice(0, 2), 16) % 100);
  const cidr = `10.${octet}.0.0/26`;
  const poolId = await create(a, cidr, `net-${octet}-${n}`, { 'ovsnet.block-size': '28' });
  await create(b, cidr, `net-${octet}-${n}`, { 'ovsnet.block-size': '28' });
  const at = (x: number) => `10.${octet}.0.${x}`;

  // The gateway is shared: the second host's request for it succeeds and moves no count.
  t.equal(await consistent(t, sa, poolId, 16), 1, 'only the gateway so far');
  const fromA: string[] = [];
  for (let i = 0; i < 10; i++) fromA.push((await a.requestAddress({ poolId, address: '', gateway: false })).address);
  t.match((await blocks(sa, poolId)).get(at(0)), { host: 'a', count: 11 }, 'a claimed the block holding the gateway');

  // --ip anywhere is checked against every host's reservations.
  const taken = fromA[3]?.split('/')[0] ?? '';
  await t.rejects(b.requestAddress({ poolId, address: taken, gateway: false }), { code: 'IPAM_ADDRESS_TAKEN', message: /host a/ });

  // b takes the rest: its own block, then borrows from a's; 61 usable addresses in all.
  const fromB: string[] = [];
  for (;;) {
    const r = await b.requestAddress({ poolId, address: '', gateway: false }).catch((e: Error) => e);
    if (r instanceof Error) {
      t.match(r.message, /no free address in pool/);
      break;
    }
    fromB.push(r.address);
  }
  t.equal(new Set([...fromA, ...fromB]).size, fromA.length + fromB.length, 'no address twice');
  t.equal(fromA.length + fromB.length, 61, 'every usable address but the gateway handed out, borrowing included');
  t.equal(await consistent(t, sa, poolId, 16), 62);

  // Releases: a block emptied by its owner goes back; a second release moves nothing.
  for (const x of fromB) await b.releaseAddress(poolId, x.split('/')[0] ?? '');
  await b.releaseAddress(poolId, fromB[0]?.split('/')[0] ?? '');
  t.notOk(
    [...(await blocks(sa, poolId)).values()].some((v) => v.host === 'b'),
    "b's emptied blocks went back",
  );
  t.equal(await consistent(t, sa, poolId, 16), 11);
  t.match((await blocks(sa, poolId)).get(at(0)), { host: 'a', count: 11 }, "borrowed addresses went back to the owner's block");

  // The pool outlives one host's network, and goes with the last; the gateway likewise.
  await b.releaseAddress(poolId, at(1));
  await b.releasePool(poolId);
  t.ok(await sa.get(keys.pool(poolId)), 'still used by a');
  t.ok(await sa.get(keys.address(poolId, at(1))), 'the gateway stays while a uses the pool');
  await b.releasePool(poolId); // again: idempotent
  await a.releasePool(poolId);
  t.equal(await sa.get(keys.pool(poolId)), undefined);
  t.equal((await sa.list(keys.blocks(poolId))).kvs.length, 0, 'no block left');
}

t.test('claim, borrow, release and share on one embedded file', async (t) => sharedOn(t, stores(t, 2)));

t.test('claim, borrow, release and share on one etcd', async (t) => {
  const endpoints = etcdEndpoints().map((e) => `http://${e}`);
  const list = [new EtcdStore({ endpoints, timeoutMs: 3000 }), new EtcdStore({ endpoints, timeoutMs: 3000 })];
  t.teardown(async () => {
    for (const s of list) await s.close();
  });
  await sharedOn(t, list);
});

t.test('a logical pool is refused twice on one host, and a pool is bound to one logical network', async (t) => {
  const [sa, sb] = stores(t, 2);
  if (sa === undefined || sb === undefined) throw new Error('two stores');
  const a = makeIpam(sa, { host: 'a' });
  const b = makeIpam(sb, { host: 'b' });
  const poolId = await create(a, '10.61.0.0/24', 'red');
  await t.rejects(a.requestPool(pool('10.61.0.0/24')), {
    code: 'IPAM_POOL_OVERLAP',
    message: /already used on this host by logical network red/,
  });
  await t.rejects(b.bindLogical('10.61.0.0/24', 'green'), { code: 'LOGICAL_NETWORK_MISMATCH', message: /belongs to logical network red/ });
  t.equal(await b.bindLogical('10.99.0.0/24', 'green'), undefined, 'no ovsnet pool: undefined');
  await t.rejects(a.requestPool({ ...pool('10.62.0.0/24'), options: { 'ovsnet.block-size': '40' } }), {
    code: 'IPAM_OPTION_INVALID',
    message: /16 to 32/,
  });
  t.ok(poolId);
});
