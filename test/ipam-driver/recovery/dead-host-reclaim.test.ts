/**
 * Reclaiming a dead host's blocks and addresses in a shared pool: nothing before the grace
 * period, everything of that host (and nothing of others) after it; a host back in time keeps
 * all it had.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { joinLogical, leaveLogical } from '../../../src/driver/vxlan/logical.js';
import { Reclaimer } from '../../../src/ipam-driver/recovery/dead-host-reclaim.js';
import { createLogger } from '../../../src/lib/log.js';
import { keys } from '../../../src/store/keys.js';
import { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import { makeIpam, pool } from '../../helpers/ipam.js';
import { readLogical } from '../../../src/driver/records/logical-records.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-reclaim-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

t.test('a dead host is reclaimed after the grace period, not before', async (t) => {
  const file = path.join(dir, 'r.db');
  const [sa, sb] = [new SqliteStore({ file }), new SqliteStore({ file })];
  const a = makeIpam(sa, { host: 'a' });
  const b = makeIpam(sb, { host: 'b' });
  t.teardown(async () => {
    await a.stop();
    await b.stop();
    await sa.close();
    await sb.close();
  });
  const cidr = '10.66.0.0/28';
  const opts = { 'ovsnet.block-size': '30' }; // blocks of 4 addresses
  const now = new Date('2026-01-01T00:00:00Z').getTime();
  let clock = now;
  for (const [ipam, host] of [
    [a, 'a'],
    [b, 'b'],
  ] as const) {
    const { poolId } = await ipam.requestPool({ ...pool(cidr), options: opts });
    await ipam.requestAddress({ poolId, address: '', gateway: true });
    await ipam.bindLogical(cidr, 'net');
    await joinLogical(sa, {
      name: 'net',
      vni: undefined,
      subnets: [cidr],
      internal: false,
      host,
      networkId: host.repeat(64),
      now: new Date(clock),
    });
  }
  const poolId = `LocalDefault/${cidr}`;
  const fromB: string[] = [];
  for (let i = 0; i < 3; i++) fromB.push((await b.requestAddress({ poolId, address: '', gateway: false })).address.split('/')[0] ?? '');
  const fromA: string[] = [];
  for (;;) {
    const r = await a.requestAddress({ poolId, address: '', gateway: false }).catch((e: Error) => e);
    if (r instanceof Error) break;
    fromA.push(r.address.split('/')[0] ?? '');
  }
  t.equal(fromA.length + fromB.length, 13, '14 usable addresses, one the gateway');

  const alive = new Set(['a']);
  const reclaimer = new Reclaimer({
    store: sa,
    log: createLogger('silent'),
    self: 'a',
    hosts: () => alive,
    graceMs: 60_000,
    leaveLogical: (name, host) => leaveLogical(sa, name, host, undefined),
    leavePool: (poolId, host) => a.leavePool(poolId, host),
    now: () => new Date(clock),
  });
  t.same(await reclaimer.sweep(), [], 'first sighting: nothing reclaimed');
  t.match(JSON.parse((await sa.get(keys.departedHost('b')))?.value ?? '{}'), { host: 'b', since: new Date(now).toISOString() });
  clock += 59_000;
  t.same(await reclaimer.sweep(), [], 'within the grace period: nothing reclaimed');
  await t.rejects(
    a.requestAddress({ poolId, address: '', gateway: false }),
    { code: 'IPAM_POOL_EXHAUSTED' },
    "b's addresses are not handed out",
  );

  clock += 2_000;
  t.same(await reclaimer.sweep(), ['b']);
  const left = (await sa.list(keys.addresses(poolId))).kvs.map((kv) => (JSON.parse(kv.value) as { host: string }).host);
  t.notOk(left.includes('b'), "b's reservations are gone");
  t.equal(left.length, fromA.length + 1, "a's and the gateway stay");
  const blocks = (await sa.list(keys.blocks(poolId))).kvs.map((kv) => JSON.parse(kv.value) as { host: string });
  t.notOk(
    blocks.some((x) => x.host === 'b'),
    'b owns no block',
  );
  t.same((JSON.parse((await sa.get(keys.pool(poolId)))?.value ?? '{}') as { users: string[] }).users, ['a'], 'b left the pool');
  t.same(Object.keys((await readLogical(sa, 'net'))?.record.members ?? {}), ['a'], 'and the logical network');
  t.equal(await sa.get(keys.departedHost('b')), undefined);
  const again: string[] = [];
  for (let i = 0; i < 3; i++) again.push((await a.requestAddress({ poolId, address: '', gateway: false })).address.split('/')[0] ?? '');
  t.same(again.sort(), [...fromB].sort(), "now a gets b's former addresses");

  // b's Docker releasing late must not free what a now holds.
  await b.releaseAddress(poolId, fromB[0] ?? '');
  t.ok(await sa.get(keys.address(poolId, fromB[0] ?? '')), "a late release from b leaves a's reservation");
});

t.test('a host back before the grace period ends keeps everything', async (t) => {
  const store = new SqliteStore({ file: path.join(dir, 'back.db') });
  const b = makeIpam(store, { host: 'b' });
  t.teardown(async () => {
    await b.stop();
    await store.close();
  });
  const { poolId } = await b.requestPool(pool('10.67.0.0/24'));
  await b.bindLogical('10.67.0.0/24', 'n');
  await b.requestAddress({ poolId, address: '', gateway: false });
  const alive = new Set(['a']);
  let clock = 0;
  const reclaimer = new Reclaimer({
    store,
    log: createLogger('silent'),
    self: 'a',
    hosts: () => alive,
    graceMs: 1000,
    leaveLogical: async () => undefined,
    leavePool: async () => undefined,
    now: () => new Date(clock),
  });
  await reclaimer.sweep();
  t.ok(await store.get(keys.departedHost('b')));
  alive.add('b');
  clock += 5000;
  t.same(await reclaimer.sweep(), [], 'registered again: nothing reclaimed');
  t.equal(await store.get(keys.departedHost('b')), undefined, 'and its departed record is gone');
  t.equal((await store.list(keys.addresses(poolId))).kvs.length, 1);
});
