/**
 * The store contract: one suite, run against every backend (sqlite.test.ts, etcd.test.ts).
 * Each run works under a fresh prefix and deletes it afterwards, so a shared etcd stays clean.
 */
import { randomUUID } from 'node:crypto';
import type { Test } from 'tap';
import { isOvsnetError } from '../../src/lib/errors.js';
import { absent, del, get, modRevisionIs, put, type Store, type WatchEvent } from '../../src/store/types.js';
import { waitFor } from '../helpers/wait.js';

export function storeContract(t: Test, open: () => Store): void {
  let store: Store;
  let p: string;

  t.beforeEach(() => {
    store = open();
    p = `/ovsnet-test/${randomUUID()}/`;
  });
  t.afterEach(async () => {
    await store.txn({ compares: [], success: [{ type: 'deletePrefix', prefix: p }] });
    await store.close();
  });

  t.test('put, get, versions and revisions', async (t) => {
    t.equal(await store.get(`${p}a`), undefined, 'a missing key reads as undefined');
    const r1 = await store.txn({ compares: [], success: [put(`${p}a`, 'one')] });
    t.ok(r1.succeeded);
    const a1 = await store.get(`${p}a`);
    t.match(a1, { key: `${p}a`, value: 'one', version: 1, createRevision: r1.revision, modRevision: r1.revision, lease: '0' });
    const r2 = await store.txn({ compares: [], success: [put(`${p}a`, 'two')] });
    t.equal(r2.revision, r1.revision + 1, 'each writing transaction moves the revision by one');
    t.match(await store.get(`${p}a`), { value: 'two', version: 2, createRevision: r1.revision, modRevision: r2.revision });
    t.equal(await store.revision(), r2.revision);
    const noop = await store.txn({ compares: [], success: [del(`${p}missing`)] });
    t.equal(noop.revision, r2.revision, 'deleting a missing key writes nothing');
    await store.txn({ compares: [], success: [del(`${p}a`)] });
    t.equal(await store.get(`${p}a`), undefined);
    const r4 = await store.txn({ compares: [], success: [put(`${p}a`, 'again')] });
    t.match(await store.get(`${p}a`), { version: 1, createRevision: r4.revision }, 'a re-created key starts over');
  });

  t.test('transactions compare on absence, value, version and mod revision', async (t) => {
    const k = `${p}k`;
    const create = { compares: [absent(k)], success: [put(k, 'mine')], failure: [get(k)] };
    const first = await store.txn(create);
    t.ok(first.succeeded, 'create-if-absent succeeds on an absent key');
    t.same(first.gets, []);
    const second = await store.txn(create);
    t.notOk(second.succeeded, 'and answers "taken" the second time');
    t.match(second.gets[0], { value: 'mine' }, 'the failure branch reads who holds it');

    const kv = await store.get(k);
    if (kv === undefined) throw new Error('k vanished');
    t.ok((await store.txn({ compares: [modRevisionIs(k, kv.modRevision)], success: [put(k, 'v2')] })).succeeded);
    t.notOk(
      (await store.txn({ compares: [modRevisionIs(k, kv.modRevision)], success: [put(k, 'v3')] })).succeeded,
      'a stale mod revision loses',
    );
    t.ok((await store.txn({ compares: [{ key: k, target: 'value', op: '==', value: 'v2' }], success: [] })).succeeded);
    t.notOk((await store.txn({ compares: [{ key: k, target: 'value', op: '!=', value: 'v2' }], success: [] })).succeeded);
    t.notOk(
      (await store.txn({ compares: [{ key: `${p}none`, target: 'value', op: '!=', value: 'x' }], success: [] })).succeeded,
      'a value compare on a missing key is false, as in etcd',
    );
    t.ok((await store.txn({ compares: [{ key: k, target: 'version', op: '==', version: 2 }], success: [] })).succeeded);
    t.ok((await store.txn({ compares: [{ key: k, target: 'version', op: '>', version: 1 }], success: [] })).succeeded);
    t.ok((await store.txn({ compares: [{ key: k, target: 'version', op: '<', version: 3 }], success: [] })).succeeded);
    t.ok((await store.txn({ compares: [{ key: k, target: 'present' }], success: [] })).succeeded);

    const multi = await store.txn({
      compares: [absent(`${p}x`), { key: k, target: 'present' }],
      success: [put(`${p}x`, '1'), put(`${p}y`, '2'), del(k), get(`${p}x`)],
    });
    t.ok(multi.succeeded);
    t.match(multi.gets[0], { value: '1', modRevision: multi.revision }, 'a get sees the writes before it');
    t.equal((await store.get(`${p}x`))?.modRevision, (await store.get(`${p}y`))?.modRevision, 'all ops share one revision');
    t.equal(await store.get(k), undefined);
  });

  t.test('ranges are paged, ordered, and bounded by the prefix', async (t) => {
    const names = Array.from({ length: 25 }, (_, i) => `${p}r/${String(i).padStart(2, '0')}`);
    await store.txn({ compares: [], success: [...names.map((n) => put(n, n)), put(`${p}r0`, 'outside'), put(`${p}q`, 'outside')] });
    const seen: string[] = [];
    let after: string | undefined;
    let pages = 0;
    for (;;) {
      const page = await store.range(`${p}r/`, after === undefined ? { limit: 10 } : { limit: 10, after });
      pages++;
      seen.push(...page.kvs.map((kv) => kv.key));
      after = page.kvs[page.kvs.length - 1]?.key;
      if (!page.more) break;
    }
    t.equal(pages, 3);
    t.same(seen, names, 'every key once, in order, none outside the prefix');
    const all = await store.list(`${p}r/`);
    t.same(
      all.kvs.map((kv) => kv.key),
      names,
    );
    t.equal(all.revision, await store.revision());
    t.same((await store.list(`${p}nothing/`)).kvs, []);
    await store.txn({ compares: [], success: [{ type: 'deletePrefix', prefix: `${p}r/` }] });
    t.same((await store.list(`${p}r/`)).kvs, []);
    t.equal((await store.get(`${p}r0`))?.value, 'outside', 'deletePrefix stays inside its prefix');
  });

  t.test('a watch from a read revision + 1 sees every later change exactly once, in order', async (t) => {
    await store.txn({ compares: [], success: [put(`${p}w/seed`, 's')] });
    const read = await store.list(`${p}w/`);
    const events: WatchEvent[] = [];
    const batches: number[] = [];
    // Writes made between the read and the watch must be delivered too.
    await store.txn({ compares: [], success: [put(`${p}w/early`, 'e')] });
    const w = await store.watch(`${p}w/`, read.revision + 1, {
      onEvents: (evs) => {
        batches.push(evs.length);
        events.push(...evs);
      },
    });
    const expected: string[] = ['put w/early'];
    for (let i = 0; i < 40; i++) {
      await store.txn({ compares: [], success: [put(`${p}w/${i % 7}`, String(i)), put(`${p}outside`, String(i))] });
      expected.push(`put w/${i % 7}`);
      if (i % 10 === 9) {
        await store.txn({ compares: [], success: [del(`${p}w/${i % 7}`)] });
        expected.push(`delete w/${i % 7}`);
      }
    }
    await waitFor(() => events.length >= expected.length, 5000, 'watch events');
    await new Promise((r) => setTimeout(r, 100)); // anything extra would arrive now
    await w.close();
    t.same(
      events.map((e) => `${e.type} ${e.kv.key.slice(p.length)}`),
      expected,
    );
    const revs = events.map((e) => e.kv.modRevision);
    t.same(
      revs,
      [...revs].sort((a, b) => a - b),
      'in revision order',
    );
    t.equal(new Set(revs).size, revs.length, 'no revision twice');
    t.equal(batches.length, events.length, 'one batch per revision');
  });

  t.test('a watch can replay history from an earlier revision', async (t) => {
    const r = await store.txn({ compares: [], success: [put(`${p}h/a`, '1')] });
    await store.txn({ compares: [], success: [put(`${p}h/b`, '2'), put(`${p}h/c`, '3')] });
    const events: WatchEvent[] = [];
    const w = await store.watch(`${p}h/`, r.revision, { onEvents: (evs) => events.push(...evs) });
    await waitFor(() => events.length >= 3, 5000, 'replayed events');
    await w.close();
    t.same(
      events.map((e) => e.kv.value),
      ['1', '2', '3'],
    );
  });

  t.test('leases: keys vanish with the lease; keep-alive holds them', async (t) => {
    const lease = await store.grantLease(2);
    await store.txn({ compares: [], success: [put(`${p}l/held`, 'x', lease), put(`${p}l/free`, 'y')] });
    t.equal((await store.get(`${p}l/held`))?.lease, lease);
    const deletes: string[] = [];
    const w = await store.watch(`${p}l/`, (await store.revision()) + 1, {
      onEvents: (evs) => evs.forEach((e) => e.type === 'delete' && deletes.push(e.kv.key)),
    });
    const started = Date.now();
    while (Date.now() - started < 3500) {
      await store.keepAlive(lease);
      await new Promise((r) => setTimeout(r, 500));
    }
    t.ok(await store.get(`${p}l/held`), 'kept alive past its TTL');
    await waitFor(async () => (await store.get(`${p}l/held`)) === undefined, 10_000, 'lease expiry');
    t.ok(await store.get(`${p}l/free`), 'a key without a lease stays');
    await waitFor(() => deletes.length > 0, 3000, 'delete event');
    t.same(deletes, [`${p}l/held`], 'the expiry is a delete event');
    await w.close();
    await t.rejects(store.keepAlive(lease), { code: 'STORE_LEASE_NOT_FOUND' });
    await t.rejects(store.txn({ compares: [], success: [put(`${p}l/late`, 'z', lease)] }), { code: 'STORE_LEASE_NOT_FOUND' });
  });

  t.test('revoking a lease deletes its keys at once; revoking twice is fine', async (t) => {
    const lease = await store.grantLease(30);
    await store.txn({ compares: [], success: [put(`${p}v/1`, 'a', lease), put(`${p}v/2`, 'b', lease)] });
    await store.revokeLease(lease);
    t.same((await store.list(`${p}v/`)).kvs, []);
    await store.revokeLease(lease);
    t.pass('second revoke is a no-op');
  });

  t.test('errors are store errors with a kind', async (t) => {
    await store.close();
    const err: unknown = await store.get(`${p}a`).then(
      () => undefined,
      (e: unknown) => e,
    );
    t.ok(isOvsnetError(err), 'a closed store rejects with an OvsnetError');
    store = open(); // afterEach cleans up through a live store
  });
}
