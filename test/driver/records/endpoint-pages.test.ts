/**
 * pickEndpoints: every endpoint record of every network, a page at a time, each kept as the
 * pick makes it; malformed records skipped as listEndpoints skips them; the same answer as
 * listEndpoints whatever the page size.
 */
import t from 'tap';
import { listEndpoints } from '../../../src/driver/records/driver-records.js';
import { pickEndpoints } from '../../../src/driver/records/endpoint-pages.js';
import type { EndpointRecord } from '../../../src/driver/model/records.js';
import { keys } from '../../../src/store/keys.js';
import { put } from '../../../src/store/types.js';
import { tempStore } from '../../helpers/temp-store.js';

const record = (networkId: string, i: number): EndpointRecord => ({
  networkId,
  endpointId: i.toString(16).padStart(64, '0'),
  mac: '',
  hostVeth: `ovh${i}`,
  containerVeth: `ovc${i}`,
  address: `10.0.${i >> 8}.${i & 255}/16`,
  portmap: [],
  createdAt: '',
});

t.test('every record of every network, across pages, in key order, as picked', async (t) => {
  const store = tempStore(t);
  const nets = ['a'.repeat(64), 'b'.repeat(64)];
  const written: EndpointRecord[] = [];
  for (const [n, networkId] of nets.entries())
    for (let i = 0; i < 23; i++) {
      const r = record(networkId, n * 100 + i);
      written.push(r);
      await store.txn({ compares: [], success: [put(keys.endpoint(networkId, r.endpointId), JSON.stringify(r))] });
    }
  const all = await listEndpoints(store);
  t.equal(all.length, 46);
  for (const limit of [1, 5, 23, 46, 1000]) {
    const ids = await pickEndpoints(store, (e) => e.endpointId, limit);
    t.same(
      ids,
      all.map((e) => e.endpointId),
      `pages of ${limit}: every record once, in the store's order`,
    );
  }
  const picked = await pickEndpoints(store, (e) => [e.containerVeth, e.address], 7);
  t.same(picked.map(([veth]) => veth).sort(), written.map((r) => r.containerVeth).sort(), 'what the pick returns is what is kept');
  t.same(await pickEndpoints(tempStore(t), (e) => e), [], 'no records: none');
});

t.test('a malformed record is skipped, as listEndpoints skips it; the rest are read', async (t) => {
  const store = tempStore(t);
  const net = 'c'.repeat(64);
  for (let i = 0; i < 6; i++) {
    const r = record(net, i);
    await store.txn({ compares: [], success: [put(keys.endpoint(net, r.endpointId), i === 3 ? '{"networkId": 7' : JSON.stringify(r))] });
  }
  const ids = await pickEndpoints(store, (e) => e.endpointId, 2);
  t.equal(ids.length, 5, 'five of six');
  t.same(
    ids,
    (await listEndpoints(store)).map((e) => e.endpointId),
    'the same as listEndpoints',
  );
});
