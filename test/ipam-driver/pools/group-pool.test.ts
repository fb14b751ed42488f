/**
 * Endpoint groups' pools: a RequestPool with --ipam-opt ovsnet.group and the parent's exact
 * subnet gets the parent's pool; its addresses are one count (none handed out twice across the
 * networks), the gateway is shared and goes with the last network, and refusals say what to give.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import { keys } from '../../../src/store/keys.js';
import { makeIpam, pool } from '../../helpers/ipam.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-group-pool-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
let n = 0;

async function setup(t: Test) {
  const store = new SqliteStore({ file: path.join(dir, `s${n++}.db`) });
  t.teardown(() => store.close());
  const ipam = makeIpam(store);
  return { store, ipam };
}

const group = (cidr: string, name: string, sub = '') => ({ ...pool(cidr, sub), options: { 'ovsnet.group': name } });

t.test('a group shares its parent pool: one count, one gateway, gone with the last network', async (t) => {
  const { store, ipam } = await setup(t);
  const parent = await ipam.requestPool(pool('10.61.0.0/24'));
  const gw = await ipam.requestAddress({ poolId: parent.poolId, address: '', gateway: true });
  const web = await ipam.requestPool(group('10.61.0.0/24', 'web'));
  t.equal(web.poolId, parent.poolId, "the group gets the parent's PoolID");
  t.same(await ipam.requestAddress({ poolId: web.poolId, address: '', gateway: true }), gw, 'and its gateway');
  const db = await ipam.requestPool(group('10.61.0.0/24', 'db'));
  t.equal(db.poolId, parent.poolId);
  await ipam.requestAddress({ poolId: db.poolId, address: '', gateway: true });
  const got = new Set<string>();
  for (let i = 0; i < 30; i++)
    got.add((await ipam.requestAddress({ poolId: [parent, web, db][i % 3]?.poolId ?? '', address: '', gateway: false })).address);
  t.equal(got.size, 30, 'no address handed out twice across the parent and its groups');
  t.notOk(got.has(gw.address), 'nor the gateway');
  t.equal(ipam.usage().find((u) => u.poolId === parent.poolId)?.count, 31, 'one count: 30 + the gateway');
  for (const a of got) await ipam.releaseAddress(parent.poolId, a.split('/')[0] ?? '');
  // The parent goes first (Docker's order: the gateway, then the pool), then the groups.
  for (const _ of ['parent', 'web']) {
    await ipam.releaseAddress(parent.poolId, '10.61.0.1');
    await ipam.releasePool(parent.poolId);
    t.ok(await store.get(keys.pool(parent.poolId)), 'the pool stays while a network shares it');
    t.equal(ipam.usage().find((u) => u.poolId === parent.poolId)?.count, 1, 'and so does the gateway');
  }
  await ipam.releaseAddress(parent.poolId, '10.61.0.1');
  await ipam.releasePool(parent.poolId);
  t.equal(await store.get(keys.pool(parent.poolId)), undefined, 'gone with the last network');
  const again = await ipam.requestPool(pool('10.61.0.0/24'));
  t.equal(again.poolId, parent.poolId, 'and the subnet is free again');
});

t.test("a dual-stack parent's group shares its IPv6 pool too, and its IPv6 gateway", async (t) => {
  const { ipam } = await setup(t);
  const parent4 = await ipam.requestPool(pool('10.64.0.0/24'));
  const parent6 = await ipam.requestPool({ ...pool('fd00:64::/64'), v6: true });
  const gw6 = await ipam.requestAddress({ poolId: parent6.poolId, address: '', gateway: true });
  t.equal((await ipam.requestPool(group('10.64.0.0/24', 'web'))).poolId, parent4.poolId);
  const web6 = await ipam.requestPool({ ...group('fd00:64::/64', 'web'), v6: true });
  t.equal(web6.poolId, parent6.poolId, "the group gets the parent's IPv6 PoolID");
  t.same(await ipam.requestAddress({ poolId: web6.poolId, address: '', gateway: true }), gw6, 'and its IPv6 gateway');
  const a = await ipam.requestAddress({ poolId: web6.poolId, address: '', gateway: false });
  const b = await ipam.requestAddress({ poolId: parent6.poolId, address: '', gateway: false });
  t.not(a.address, b.address, 'one count across the parent and its group');
});

t.test('refusals say what to give', async (t) => {
  const { ipam } = await setup(t);
  await t.rejects(ipam.requestPool(group('10.62.0.0/24', 'web')), {
    code: 'IPAM_GROUP_NO_PARENT',
    message: /ovsnet\.group=web: this host has no ovsnet pool 10\.62\.0\.0\/24; create the parent first/,
  });
  await ipam.requestPool(pool('10.62.0.0/24', '10.62.0.0/25'));
  await t.rejects(ipam.requestPool(group('10.62.0.0/24', 'web')), {
    code: 'IPAM_POOL_INVALID',
    message: /has --ip-range 10\.62\.0\.0\/25; give the group the same/,
  });
  t.ok(await ipam.requestPool(group('10.62.0.0/24', 'web', '10.62.0.0/25')), 'the same range is taken');
  await t.rejects(ipam.requestPool({ ...group('fd00:62::/64', 'web'), v6: true }), {
    code: 'IPAM_GROUP_NO_PARENT',
    message: /this host has no ovsnet pool fd00:62::\/64; create the parent first/,
  });
  await t.rejects(ipam.requestPool({ ...pool('10.63.0.0/24'), options: { 'ovsnet.group': 'bad name' } }), {
    code: 'IPAM_OPTION_INVALID',
    message: /ovsnet\.group=bad name is not valid: expected 1-64 letters/,
  });
  await t.rejects(ipam.requestPool(pool('10.62.0.0/24')), { code: 'IPAM_POOL_OVERLAP' }, 'without the option a repeat is still an overlap');
});

t.test("groups of a logical network share its pool on each host, each host's shares its own", async (t) => {
  const file = path.join(dir, `s${n++}.db`);
  const [s1, s2] = [new SqliteStore({ file }), new SqliteStore({ file })];
  t.teardown(async () => {
    await s1.close();
    await s2.close();
  });
  const [h1, h2] = [makeIpam(s1, { host: 'h1' }), makeIpam(s2, { host: 'h2' })];
  const create = async (ipam: typeof h1) => {
    const { poolId } = await ipam.requestPool(pool('10.65.0.0/24'));
    await ipam.requestAddress({ poolId, address: '', gateway: true });
    t.equal(await ipam.bindLogical('10.65.0.0/24', 'shop'), poolId);
    return poolId;
  };
  const poolId = await create(h1);
  t.equal(await create(h2), poolId, 'one pool for the logical network');
  t.equal((await h1.requestPool(group('10.65.0.0/24', 'web'))).poolId, poolId, "h1's group gets it");
  t.equal((await h2.requestPool(group('10.65.0.0/24', 'db'))).poolId, poolId, "and h2's");
  const got = new Set<string>();
  for (let i = 0; i < 20; i++) got.add((await (i % 2 === 0 ? h1 : h2).requestAddress({ poolId, address: '', gateway: false })).address);
  t.equal(got.size, 20, 'no address twice across the hosts and their groups');
  for (const a of got) await (Number(a.split('.')[3]?.split('/')[0]) % 2 === 0 ? h1 : h2).releaseAddress(poolId, a.split('/')[0] ?? '');
  const record = async () =>
    JSON.parse((await s1.get(keys.pool(poolId)))?.value ?? '{}') as { users?: string[]; hostShares?: Record<string, number> };
  t.same((await record()).hostShares, { h1: 1, h2: 1 });
  // h1's network of the logical network leaves first, then its group: h1 stays a user until both went.
  await h1.releasePool(poolId);
  t.match(await record(), { users: ['h1', 'h2'], hostShares: { h2: 1 } }, "h1's share went, h1 still uses the pool");
  t.notOk((await record()).hostShares?.h1);
  await h1.releasePool(poolId);
  t.same((await record()).users, ['h2'], 'h1 left with its last network');
  t.same((await record()).hostShares, { h2: 1 }, "h2's share untouched");
  await h2.releasePool(poolId);
  await h2.releasePool(poolId);
  t.equal(await s1.get(keys.pool(poolId)), undefined, 'gone with the last network of the last host');
});
