/**
 * Logical network membership under concurrency (vxlan/logical.ts on records/logical-records.ts):
 * hosts joining and leaving at once, the last leave racing a join, FreeNetwork racing a swarm
 * network's last node. Each race runs many rounds on one real embedded store, the hosts' calls
 * interleaved at every store round trip; after each, the store must be coherent: a record with
 * its VNI claimed whenever a member is left, and no record, VNI or member key when none is.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { readLogical } from '../../../src/driver/records/logical-records.js';
import { joinLogical, leaveLogical } from '../../../src/driver/vxlan/logical.js';
import { allocateSwarmNetwork, freeSwarmNetwork, swarmLogicalName } from '../../../src/driver/vxlan/swarm.js';
import { keys } from '../../../src/store/keys.js';
import { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import type { Store } from '../../../src/store/types.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-logical-races-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
const raw = new SqliteStore({ file: path.join(dir, 'state.db') });
t.teardown(() => raw.close());

/**
 * The store, each read and transaction after a pause of 0-2 ms (a seeded sequence): the racing
 * calls then interleave differently from round to round, as hosts' round trips to etcd would.
 */
function jittery(s: Store): Store {
  let seed = 7;
  const pause = () => new Promise((r) => setTimeout(r, (seed = (seed * 1103515245 + 12345) % 2 ** 31) % 3));
  const later = async <T>(f: () => Promise<T>): Promise<T> => {
    await pause();
    return f();
  };
  return {
    kind: s.kind,
    get: (key) => later(() => s.get(key)),
    range: (prefix, o) => s.range(prefix, o),
    list: (prefix) => later(() => s.list(prefix)),
    txn: (request) => later(() => s.txn(request)),
    watch: (prefix, from, handlers) => s.watch(prefix, from, handlers),
    grantLease: (ttl) => s.grantLease(ttl),
    keepAlive: (lease) => s.keepAlive(lease),
    revokeLease: (lease) => s.revokeLease(lease),
    revision: () => s.revision(),
    close: () => s.close(),
  };
}
const store = jittery(raw);

const ROUNDS = 25;
const join = (s: Store, name: string, host: string, extra: { swarm?: boolean; subnets?: string[] } = {}) =>
  joinLogical(s, { name, vni: undefined, subnets: [], internal: false, host, networkId: `net-${host}`, now: new Date(), ...extra });

/** What the store holds of one logical network: its members' keys and the VNIs claimed. */
async function held(name: string): Promise<{ members: string[]; vnis: string[]; record: boolean }> {
  const members = (await store.list(keys.logicalMembers(name))).kvs.map((kv) => kv.key.slice(keys.logicalMembers(name).length));
  const vnis = (await store.list(keys.clusterTags('vni'))).kvs.filter((kv) => kv.value === name).map((kv) => kv.key);
  return { members: members.sort(), vnis, record: (await store.get(keys.logicalNetwork(name))) !== undefined };
}

t.test('two hosts joining at once are both members, of one record with one VNI', async (t) => {
  for (let i = 0; i < ROUNDS; i++) {
    const name = `j${i}`;
    const [a, b] = await Promise.all([join(store, name, 'h1'), join(store, name, 'h2')]);
    t.equal(a.vni, b.vni, 'one VNI');
    t.same(await held(name), { members: ['h1', 'h2'], vnis: [keys.tag('vni', a.vni)], record: true });
    await leaveLogical(store, name, 'h1', undefined);
    await leaveLogical(store, name, 'h2', undefined);
    t.same(await held(name), { members: [], vnis: [], record: false }, 'gone with its last member');
  }
});

t.test('the two last members leaving at once: the network goes, never left with no member', async (t) => {
  for (let i = 0; i < ROUNDS; i++) {
    const name = `l${i}`;
    await join(store, name, 'h1');
    await join(store, name, 'h2');
    await join(store, name, 'h3');
    await leaveLogical(store, name, 'h3', undefined);
    await Promise.all([leaveLogical(store, name, 'h1', undefined), leaveLogical(store, name, 'h2', undefined)]);
    t.same(await held(name), { members: [], vnis: [], record: false });
  }
});

t.test('the last leave racing a join: the joiner is a member of a whole network either way', async (t) => {
  let deleted = 0;
  for (let i = 0; i < ROUNDS; i++) {
    const name = `r${i}`;
    const first = await join(store, name, 'h1');
    const [, joined] = await Promise.all([leaveLogical(store, name, 'h1', undefined), join(store, name, 'h2')]);
    const now = await readLogical(store, name);
    t.same(Object.keys(now?.record.members ?? {}), ['h2'], 'h2 alone is a member');
    t.same(await held(name), { members: ['h2'], vnis: [keys.tag('vni', joined.vni)], record: true }, 'its VNI claimed');
    t.equal(now?.record.closing, undefined, 'no closing mark left');
    if (joined.vni !== first.vni || now?.record.createdBy === 'h2') deleted++;
    await leaveLogical(store, name, 'h2', undefined);
    t.same(await held(name), { members: [], vnis: [], record: false });
  }
  t.comment(`${deleted} of ${ROUNDS} rounds saw the network deleted and made again`);
});

t.test("a leaver's closing mark left behind (it stopped): the next join clears it, the last leave still deletes", async (t) => {
  await join(store, 'm', 'h1');
  const read = await readLogical(store, 'm');
  if (read === undefined) throw new Error('the record');
  const { members: _members, ...record } = read.record;
  await store.txn({
    compares: [],
    success: [{ type: 'put', key: keys.logicalNetwork('m'), value: JSON.stringify({ ...record, closing: 'h1' }) }],
  });
  await join(store, 'm', 'h2');
  const after = await readLogical(store, 'm');
  t.equal(after?.record.closing, undefined, 'the mark is gone');
  t.same(Object.keys(after?.record.members ?? {}).sort(), ['h1', 'h2']);
  await Promise.all([leaveLogical(store, 'm', 'h1', undefined), leaveLogical(store, 'm', 'h2', undefined)]);
  t.same(await held('m'), { members: [], vnis: [], record: false });
});

t.test("FreeNetwork racing a swarm network's last node: freed and gone, or kept with the node", async (t) => {
  for (let i = 0; i < ROUNDS; i++) {
    const networkId = `${i}`.padStart(25, 'a');
    const name = swarmLogicalName(networkId);
    await allocateSwarmNetwork(store, { networkId, options: {}, subnets: ['10.60.0.0/24'], host: 'm1', now: new Date() }, 'global');
    await join(store, name, 'w1', { swarm: true, subnets: ['10.60.0.0/24'] });
    await Promise.all([freeSwarmNetwork(store, networkId, new Date()), leaveLogical(store, name, 'w1', undefined)]);
    t.same(await held(name), { members: [], vnis: [], record: false }, 'no record, VNI or member left');
  }
  // A node leaving while the network stays allocated: the record stays, with no member.
  const networkId = 'b'.repeat(25);
  const name = swarmLogicalName(networkId);
  await allocateSwarmNetwork(store, { networkId, options: {}, subnets: ['10.61.0.0/24'], host: 'm1', now: new Date() }, 'global');
  const on = { swarm: true, subnets: ['10.61.0.0/24'] };
  await Promise.all([join(store, name, 'w1', on), join(store, name, 'w2', on)]);
  await Promise.all([leaveLogical(store, name, 'w1', undefined), leaveLogical(store, name, 'w2', undefined)]);
  const kept = await held(name);
  t.same({ members: kept.members, record: kept.record, vnis: kept.vnis.length }, { members: [], record: true, vnis: 1 }, 'allocated still');
  await freeSwarmNetwork(store, networkId, new Date());
  t.same(await held(name), { members: [], vnis: [], record: false }, 'freed at once with no member');
});
