/**
 * Property: after any sequence of requests and releases (repeated, of taken addresses, of
 * free ones, from two ovsnet instances sharing one store), the pool's count equals its
 * reservations in the store, no address is held twice, and every answer is in the pool. And
 * through the network driver: container lifecycles whose DeleteEndpoint frees the address and
 * whose ReleaseAddress comes late (after the address was handed out again), or for a request
 * that never got its endpoint, with ovsnet restarted between any two calls: the store holds
 * exactly the live containers' addresses after every step. With tombstones dropped at random
 * (lost or expired: release-guard.ts), a late release finds none and goes the usual way: the
 * guard keeps an address bound to a created container, so the same holds; without the guard it
 * does not (the last test). The one case no guard can close, a late release of an address
 * handed out again but not bound yet, is left out where tombstones were dropped (docs/ipam.md).
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
import { NET, ep, wired } from '../helpers/driver-ipam.js';
import type { Tombstones } from '../../src/ipam-driver/state/tombstones.js';
import { etcdEndpoints } from '../helpers/services.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-prop-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

function rng(seed: number): (n: number) => number {
  let s = seed;
  return (n) => {
    s = (s * 1103515245 + 12345) & 0x7fffffff;
    return (s >>> 8) % n; // the high bits: the low ones of this generator repeat with a short period
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

interface LifeOptions {
  /** Drop tombstones at random (as lost or expired). */
  readonly drop: boolean;
  /** Wire the driver's answer to the IPAM (release-guard.ts). */
  readonly guard: boolean;
  readonly seeds: number;
}

/** Counts of the cases the run went through; `failed` when the invariant broke. */
interface LifeCounts {
  lateAfterReuse: number;
  guarded: number;
  dropped: number;
  failed: boolean;
}

async function lifecycles(t: Test, opts: LifeOptions): Promise<LifeCounts> {
  const counts: LifeCounts = { lateAfterReuse: 0, guarded: 0, dropped: 0, failed: false };
  for (let seed = 1; seed <= opts.seeds; seed++) {
    const file = path.join(dir, `life${seed}-${opts.drop ? 'd' : ''}${opts.guard ? 'g' : ''}.db`);
    const store = new SqliteStore({ file });
    const r = rng(seed * 7919);
    const wire = () => wired(store, { guard: opts.guard });
    let { ipam, driver } = wire();
    const tombstones = () => (ipam as unknown as { endpointRelease: { tombstones: Tombstones } }).endpointRelease.tombstones;
    const { poolId } = await ipam.requestPool(pool('10.73.0.0/28'));
    const gw = await ipam.requestAddress({ poolId, address: '', gateway: true });
    await driver.createNetwork({ networkId: NET, options: {}, ipv4: [{ pool: '10.73.0.0/28', gateway: gw.address }], ipv6: [] });
    // Each container: requested (an address, no endpoint), created, or deleted (its release not sent yet).
    const live = new Map<string, { address: string; state: 'requested' | 'created' | 'deleted' }>();
    // Live tombstones per address: a release of the address consumes one, whoever sends it.
    const tomb = new Map<string, number>();
    let n = 0;
    const log: string[] = [];
    const plain = (a: string) => a.split('/')[0] ?? '';
    const holder = (a: string, state: string) => [...live.values()].find((c) => c.state === state && c.address === a);
    const storedAddresses = async () =>
      (await store.list(keys.addresses(poolId))).kvs.map((kv) => (JSON.parse(kv.value) as { address: string }).address).sort();
    const pick = (state: string) =>
      [...live].filter(([, c]) => c.state === state)[0 + r(Math.max(1, live.size))] ?? [...live].find(([, c]) => c.state === state);
    let broken = false;
    for (let step = 0; step < 160 && !broken; step++) {
      const op = r(12);
      if (op < 3) {
        // Often the address of a container whose release is not sent yet (--ip, or a full pool).
        const freed = pick('deleted')?.[1].address.split('/')[0];
        const wanted = freed !== undefined && r(2) === 0 ? freed : r(3) === 0 ? `10.73.0.${2 + r(13)}` : '';
        const res = await ipam.requestAddress({ poolId, address: wanted, gateway: false }).catch((e: Error) => e);
        if (res instanceof Error) {
          if (!/no free address|is in use|already/.test(res.message)) throw res;
          continue;
        }
        const held = [...live.values()].find((c) => c.state !== 'deleted' && c.address === res.address);
        if (held !== undefined) throw new Error(`seed ${seed} step ${step}: ${res.address} handed out twice`);
        live.set((n++).toString(16).padStart(64, '0'), { address: res.address, state: 'requested' });
      } else if (op < 6) {
        const c = pick('requested');
        if (c === undefined) continue;
        await driver.createEndpoint(ep(c[0], c[1].address));
        c[1].state = 'created';
      } else if (op < 9) {
        const c = pick('created');
        if (c === undefined) continue;
        const before = tombstones().size;
        await driver.deleteEndpoint(NET, c[0]);
        c[1].state = 'deleted';
        const a = plain(c[1].address);
        if (tombstones().size > before) tomb.set(a, (tomb.get(a) ?? 0) + 1);
        // Lost or expired before Docker's release comes: the release then goes the usual way.
        if (opts.drop && (tomb.get(a) ?? 0) > 0 && r(2) === 0 && tombstones().take(poolId, a)) {
          tomb.set(a, (tomb.get(a) ?? 0) - 1);
          counts.dropped++;
        }
      } else if (op < 11) {
        // Docker's release: of a deleted endpoint, or of a request whose CreateEndpoint failed.
        const c = pick(r(4) === 0 ? 'requested' : 'deleted');
        if (c === undefined) continue;
        const a = plain(c[1].address);
        const consumes = (tomb.get(a) ?? 0) > 0;
        if (c[1].state === 'deleted' && !consumes) {
          // No tombstone: the address, if handed out again, is kept only once bound (the guard).
          if (holder(c[1].address, 'requested') !== undefined) continue; // the gap no guard closes
          if (holder(c[1].address, 'created') !== undefined) counts.guarded++;
        }
        if (c[1].state === 'deleted' && [...live.values()].some((o) => o.state !== 'deleted' && o.address === c[1].address))
          counts.lateAfterReuse++;
        await ipam.releaseAddress(poolId, a);
        if (consumes) tomb.set(a, (tomb.get(a) ?? 0) - 1);
        live.delete(c[0]);
      } else {
        await ipam.stop();
        ({ ipam, driver } = wire());
      }
      log.push(`${step}: op ${op} -> ${[...live.values()].map((c) => `${c.address}:${c.state}`).join(' ')}`);
      // Nothing a live container holds is ever free; nothing is held but what a container holds
      // or a release not sent yet may still free (when DeleteEndpoint could not free it itself).
      const stored = new Set(await storedAddresses());
      const holding = [...live.values()].filter((c) => c.state !== 'deleted').map((c) => plain(c.address));
      const pending = [...live.values()].filter((c) => c.state === 'deleted').map((c) => plain(c.address));
      const lost = holding.filter((a) => !stored.has(a));
      const extra = [...stored].filter((a) => a !== plain(gw.address) && !holding.includes(a) && !pending.includes(a));
      broken = lost.length + extra.length > 0;
      if (!opts.guard) continue; // without the guard: counted, not asserted (the caller expects a break)
      if (broken) t.comment(log.join('\n'));
      t.same({ lost, extra }, { lost: [], extra: [] }, `seed ${seed} step ${step}: held addresses stored, nothing else`, {
        diagnostic: false,
      });
    }
    if (broken) {
      counts.failed = true;
      await ipam.stop();
      await store.close();
      if (opts.guard) return counts;
      continue;
    }
    // Docker's calls for every container left: the pool is back to its gateway, no tombstone left.
    for (const [id, c] of live) {
      if (c.state === 'created') await driver.deleteEndpoint(NET, id);
      await ipam.releaseAddress(poolId, plain(c.address));
    }
    t.same(await storedAddresses(), [plain(gw.address)], `seed ${seed}: every address back once every release was sent`);
    t.equal(Number((await store.get(keys.poolCount(poolId)))?.value ?? '0'), 1, `seed ${seed}: the count agrees`);
    t.equal(tombstones().size, 0, `seed ${seed}: every tombstone consumed`);
    await tombstones().sweepNow(store);
    t.same((await store.list(keys.allTombstones)).kvs, [], `seed ${seed}: and swept`);
    await ipam.stop();
    await store.close();
  }
  return counts;
}

t.test(
  'container lifecycles through the driver, releases late and interleaved, restarts between: never held twice, never leaked',
  async (t) => {
    const counts = await lifecycles(t, { drop: false, guard: true, seeds: 12 });
    t.ok(counts.lateAfterReuse >= 5, `releases sent after their address was handed out again: ${counts.lateAfterReuse}`);
  },
);

t.test('the same with tombstones dropped at random: the guard keeps what a created container holds', async (t) => {
  const counts = await lifecycles(t, { drop: true, guard: true, seeds: 12 });
  t.ok(counts.dropped >= 10, `tombstones dropped: ${counts.dropped}`);
  t.ok(counts.guarded >= 3, `late releases, with no tombstone, of an address a created container holds: ${counts.guarded}`);
});

t.test("without the guard, the same run frees a created container's address", async (t) => {
  const counts = await lifecycles(t, { drop: true, guard: false, seeds: 12 });
  t.ok(counts.failed, 'a late release with no tombstone freed an address a live container holds');
});
