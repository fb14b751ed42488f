import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { HOT_LIMIT, RecordCache } from '../../../src/driver/records/record-cache.js';
import { DriverRecords } from '../../../src/driver/records/driver-records.js';
import type { NetworkRecord } from '../../../src/driver/model/records.js';
import { everyEndpointField } from '../../helpers/endpoint-records.js';
import { decodeRecord } from '../../../src/store/decode.js';
import { keys } from '../../../src/store/keys.js';
import { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import type { Store } from '../../../src/store/types.js';

const textCache = () => new RecordCache<string>((_key, text) => text);

t.test('a record read once is served from the copy; forget and forgetPrefix drop it', async (t) => {
  const c = textCache();
  let loads = 0;
  const load = (v: string | undefined) => async () => {
    loads++;
    return v;
  };
  t.equal(await c.read('/n/a', load('A')), 'A');
  t.equal(await c.read('/n/a', load('changed')), 'A', 'served from the copy');
  t.equal(loads, 1);
  t.equal(await c.read('/n/missing', load(undefined)), undefined);
  t.equal(await c.read('/n/missing', load(undefined)), undefined, 'an absent record is read again each time');
  t.equal(loads, 3);
  c.forget('/n/a');
  t.equal(await c.read('/n/a', load('B')), 'B');
  c.set('/e/n1/x', 'x');
  c.set('/e/n1/y', 'y');
  c.set('/e/n2/z', 'z');
  c.forgetPrefix('/e/n1/');
  t.equal(c.size, 2, 'the prefix is forgotten, the rest kept');
});

t.test('a read that overlapped a change does not keep its (maybe stale) result', async (t) => {
  const c = textCache();
  let finish: (v: string) => void = () => undefined;
  const slow = c.read('/e/x', () => new Promise<string>((r) => (finish = r)));
  c.forget('/e/x'); // e.g. DeleteEndpoint while a Join was reading
  finish('before the delete');
  t.equal(await slow, 'before the delete', 'the reader gets what it read');
  t.equal(await c.read('/e/x', async () => undefined), undefined, 'but it was not kept');
});

t.test('a record whose text does not decode is refused and not kept; a hit is shared, frozen all through', async (t) => {
  const c = new RecordCache<{ a: number; inner: { list: number[] } }>((key, text) => decodeRecord(key, text));
  await t.rejects(
    c.read('/x/bad', async () => 'not json'),
    { code: 'STORE_RECORD_INVALID' },
  );
  t.equal(c.size, 0, 'not kept');
  const first = await c.read('/x/good', async () => '{"a":1,"inner":{"list":[1,2]}}');
  const second = await c.read('/x/good', async () => '{"a":2,"inner":{"list":[3]}}');
  t.same(second, { a: 1, inner: { list: [1, 2] } }, 'from the copy');
  t.equal(first, second, 'the same object to every reader');
  t.ok(
    first !== undefined && Object.isFrozen(first) && Object.isFrozen(first.inner) && Object.isFrozen(first.inner.list),
    'frozen all through',
  );
  t.throws(() => {
    if (first !== undefined) first.inner.list.push(3);
  }, TypeError);
  t.throws(() => {
    if (first !== undefined) (first as { a: number }).a = 5;
  }, TypeError);
  t.same(await c.read('/x/good', async () => undefined), { a: 1, inner: { list: [1, 2] } }, 'no reader could change it for the others');
});

t.test('past HOT_LIMIT the oldest unpacked records go, their packed copies stay; set and forget drop the unpacked one', async (t) => {
  const c = new RecordCache<{ n: number }>((key, text) => decodeRecord(key, text));
  let loads = 0;
  const load = (n: number) => async () => {
    loads++;
    return JSON.stringify({ n });
  };
  const first = await c.read('/h/0', load(0));
  for (let i = 1; i <= HOT_LIMIT; i++) await c.read(`/h/${i}`, load(i));
  t.equal(loads, HOT_LIMIT + 1);
  const again = await c.read('/h/0', load(-1));
  t.same(again, { n: 0 }, 'from the packed copy, not the store');
  t.not(again, first, 'unpacked anew: it had left the unpacked set');
  t.ok(Object.isFrozen(again), 'and frozen again');
  t.equal(await c.read('/h/0', load(-1)), again, 'then shared again');
  t.equal(loads, HOT_LIMIT + 1, 'no load: every record stayed packed');
  c.set('/h/0', { n: 7 });
  t.same(await c.read('/h/0', load(-1)), { n: 7 }, 'a set replaces the unpacked record too');
  c.forget('/h/0');
  t.same(await c.read('/h/0', load(9)), { n: 9 }, 'a forget drops it: read from the store');
  c.forgetPrefix('/h/');
  t.same(await c.read('/h/1', load(11)), { n: 11 }, 'forgetPrefix drops the unpacked ones under it');
  const written = { n: 12 };
  c.set('/h/2', written);
  written.n = 13;
  t.same(await c.read('/h/2', load(-1)), { n: 12 }, "a writer's later change to its own object does not reach the copy");
});

const everyNetworkField: NetworkRecord = {
  networkId: 'ab'.repeat(32),
  host: 'h1',
  logical: 'blue',
  vni: 5001,
  uplink: 'eth1',
  bridge: 'ovsnet0',
  tag: 12,
  mtu: 1450,
  internal: false,
  ipv4: [{ pool: '10.1.0.0/24', gateway: '10.1.0.1/24' }],
  ipv6: [{ pool: 'fd00::/64' }],
  masquerade: false,
  hostBinding: '127.0.0.1',
  icc: false,
  infra: { port: 'ovi0', addresses: ['10.1.0.2/24'] },
  gatewayPort: 'ovgabababab',
  qos: { rateKbps: 2000 },
  groupsName: 'web',
  group: { name: 'front', parent: 'ef'.repeat(32), allow: [{ group: 'back', port: { number: 443, proto: 'tcp' } }] },
  allow: [{ group: 'front' }],
  egress: [{ cidr: '10.9.0.0/16', port: { number: 53, proto: 'udp' } }],
  ingress: [],
  createdAt: '2026-01-02T03:04:05.678Z',
};

async function withStore(t: Test, fn: (store: Store) => Promise<void>): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-record-cache-'));
  const store = new SqliteStore({ file: path.join(dir, 'state.db') });
  t.teardown(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  await fn(store);
}

t.test('every field of a network and an endpoint record round-trips through the compact copy', (t) =>
  withStore(t, async (store) => {
    const records = new DriverRecords(store, 'h1');
    t.ok(await records.createNetwork(everyNetworkField));
    await records.createBound(everyEndpointField, undefined, async (_what, fn) => fn());
    t.same(await records.network(everyNetworkField.networkId), everyNetworkField, 'the network, from the copy');
    t.same(await records.endpoint(everyEndpointField.networkId, everyEndpointField.endpointId), everyEndpointField, 'the endpoint');
    const changed = { ...everyEndpointField, ifname: 'eth9', published: [] };
    await records.updateEndpoint(changed);
    t.same(await records.endpoint(changed.networkId, changed.endpointId), changed, 'an update replaces the copy');
    // Read by a fresh process (nothing copied yet): the copy loaded from the store answers the same.
    const fresh = new DriverRecords(store, 'h1');
    t.same(await fresh.pair(changed.networkId, changed.endpointId), { network: everyNetworkField, endpoint: changed });
    t.same(await fresh.pair(changed.networkId, changed.endpointId), { network: everyNetworkField, endpoint: changed }, 'and a hit');
    await records.deleteEndpoint(changed.networkId, changed.endpointId);
    t.equal(await records.endpoint(changed.networkId, changed.endpointId), undefined, 'a deleted endpoint is gone from the copy');
    t.ok((await store.get(keys.network(everyNetworkField.networkId))) !== undefined);
  }),
);
