/**
 * Property: after any sequence of requests and releases (repeated, of taken addresses, of
 * free ones, from two ovsnet instances sharing one store), the pool's count equals its
 * reservations in the store, no address is held twice, and every answer is in the pool.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { EtcdStore } from '../../src/store/etcd/etcd.js';
import { keys } from '../../src/store/keys.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';
import type { Store } from '../../src/store/types.js';
import { makeIpam, pool } from '../helpers/ipam.js';
import { etcdEndpoints } from '../helpers/services.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-prop-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

function rng(seed: number): (n: number) => number {
  let s = seed;
  return (n) => {
    s = (s * 1103515245 + 12345) & 0x7fffffff;
    return s % n;
  };
}

async function check(t: Test, store: Store, poolId: string, held: Set<string>, label: string) {
  const count = Number((await store.get(keys.poolCount(poolId)))?.value ?? '0');
  const reservations = (await store.list(keys.addresses(poolId))).kvs.map((kv) => (JSON.parse(kv.value) as { address: string }).address);
  t.equal(count, reservations.length, `${label}: count equals reservations`);
  t.equal(reservations.length, held.size, `${label}: the store holds exactly what was granted and not released`);
}

t.test('sequences on one instance (embedded)', async (t) => {
  for (let seed = 1; seed <= 20; seed++) {
    const store = new SqliteStore({ file: path.join(dir, `p${seed}.db`) });
    const ipam = makeIpam(store);
    const { poolId } = await ipam.requestPool(pool('10.70.0.0/27', '10.70.0.0/28'));
    const r = rng(seed);
    const held = new Set<string>();
    for (let step = 0; step < 150; step++) {
      const op = r(10);
      const addr = `10.70.0.${1 + r(30)}`;
      if (op < 4) {
        const res = await ipam.requestAddress({ poolId, address: '', gateway: false }).catch((e: Error) => e);
        if (!(res instanceof Error)) {
          const a = res.address.split('/')[0] ?? '';
          if (held.has(a)) throw new Error(`seed ${seed}: ${a} handed out twice`);
          held.add(a);
        } else if (!/no free address/.test(res.message)) throw res;
      } else if (op < 6) {
        const res = await ipam.requestAddress({ poolId, address: addr, gateway: false }).catch((e: Error) => e);
        if (res instanceof Error) {
          if (!held.has(addr)) throw new Error(`seed ${seed}: ${addr} refused though free: ${res.message}`);
        } else held.add(addr);
      } else {
        const victim = op < 8 && held.size > 0 ? ([...held][r(held.size)] ?? addr) : addr;
        await ipam.releaseAddress(poolId, victim);
        held.delete(victim);
      }
    }
    await check(t, store, poolId, held, `seed ${seed}`);
    await ipam.stop();
    await store.close();
  }
});

async function twoInstances(t: Test, a: Store, b: Store, cidr: string) {
  // Two processes of one host (a one-host pool is its host's alone: test/driver/ownership.test.ts).
  const ia = makeIpam(a, { host: 'a' });
  const ib = makeIpam(b, { host: 'a' });
  const { poolId } = await ia.requestPool(pool(cidr));
  const granted: string[] = [];
  // Both instances allocate concurrently from the same pool, each with its own index.
  await Promise.all(
    [ia, ib].map(async (ipam) => {
      for (let i = 0; i < 100; i++) granted.push((await ipam.requestAddress({ poolId, address: '', gateway: false })).address);
    }),
  );
  t.equal(new Set(granted).size, 200, 'two instances sharing a store never hand out the same address');
  const held = new Set(granted.map((g) => g.split('/')[0] ?? ''));
  // And release half from the other instance than the one that allocated.
  let i = 0;
  for (const g of [...held]) {
    if (i++ % 2 === 0) {
      await (i % 4 === 1 ? ib : ia).releaseAddress(poolId, g);
      held.delete(g);
    }
  }
  await check(t, a, poolId, held, 'after cross releases');
  await ia.releasePool(poolId);
  await ia.stop();
  await ib.stop();
}

t.test('two instances on one embedded file', async (t) => {
  const file = path.join(dir, 'shared.db');
  const a = new SqliteStore({ file });
  const b = new SqliteStore({ file });
  t.teardown(async () => {
    await a.close();
    await b.close();
  });
  await twoInstances(t, a, b, '10.71.0.0/24');
});

t.test('two instances on one etcd', async (t) => {
  const endpoints = etcdEndpoints().map((e) => `http://${e}`);
  const a = new EtcdStore({ endpoints, timeoutMs: 3000 });
  const b = new EtcdStore({ endpoints, timeoutMs: 3000 });
  t.teardown(async () => {
    await a.close();
    await b.close();
  });
  // A per-run subnet so that reruns against one etcd never collide.
  const octet = 72 + (parseInt(randomUUID().slice(0, 2), 16) % 100);
  await twoInstances(t, a, b, `10.${octet}.0.0/24`);
});
