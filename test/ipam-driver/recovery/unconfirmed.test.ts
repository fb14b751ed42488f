/**
 * Unconfirmed outcomes: a store that applies a transaction but loses its answer (a frozen etcd
 * that resumes), or never applies it. No address leaks either way once the store answers again.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { keys } from '../../../src/store/keys.js';
import { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import type { Store } from '../../../src/store/types.js';
import { Flaky } from '../../helpers/flaky-store.js';
import { createLogger } from '../../../src/lib/log.js';
import { makeIpam, pool } from '../../helpers/ipam.js';
import { waitFor } from '../../helpers/wait.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-doubts-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
let n = 0;

function setup(t: Test, journal?: string, doubtConfirmMs?: number) {
  const inner = new SqliteStore({ file: path.join(dir, `d${n++}.db`) });
  const store = new Flaky(inner);
  const ipam = makeIpam(store, {
    host: 'h1',
    ...(journal === undefined ? {} : { journal }),
    ...(doubtConfirmMs === undefined ? {} : { doubtConfirmMs }),
  });
  t.teardown(async () => {
    await ipam.stop();
    await inner.close();
  });
  return { inner, store, ipam };
}

async function held(store: Store, poolId: string): Promise<string[]> {
  return (await store.list(keys.addresses(poolId))).kvs.map((kv) => (JSON.parse(kv.value) as { address: string }).address).sort();
}

for (const shared of [false, true]) {
  const label = shared ? 'a shared pool' : 'a one-host pool';
  const create = async (ipam: ReturnType<typeof setup>['ipam'], cidr: string) => {
    const { poolId } = await ipam.requestPool(pool(cidr));
    if (shared) await ipam.bindLogical(cidr, `n${n}`);
    return poolId;
  };

  t.test(`${label}: a reservation applied but unconfirmed is released once the store answers`, async (t) => {
    const { store, ipam } = setup(t);
    const poolId = await create(ipam, '10.77.0.0/24');
    await ipam.requestAddress({ poolId, address: '', gateway: false });
    store.mode = 'lost';
    await t.rejects(ipam.requestAddress({ poolId, address: '', gateway: false }), { code: 'STORE_TIMEOUT' });
    await t.rejects(ipam.requestAddress({ poolId, address: '10.77.0.50', gateway: false }), { code: 'STORE_TIMEOUT' });
    t.same(await held(store, poolId), ['10.77.0.1', '10.77.0.2', '10.77.0.50'], 'the store applied both: Docker thinks they failed');
    t.equal(ipam.unsettled, 2);
    store.mode = 'refused';
    await ipam.settle();
    t.equal(ipam.unsettled, 2, 'still unsettled while the store is unreachable');
    store.mode = 'ok';
    await ipam.settle();
    t.equal(ipam.unsettled, 0);
    t.same(await held(store, poolId), ['10.77.0.1'], 'both released: no leak');
    t.equal(ipam.usage().find((u) => u.poolId === poolId)?.count, 1, 'and the count with them');
  });

  t.test(`${label}: a reservation the store applies only after a first look found nothing is still released`, async (t) => {
    const { store, ipam } = setup(t);
    const poolId = await create(ipam, '10.75.0.0/24');
    await ipam.requestAddress({ poolId, address: '', gateway: false });
    store.mode = 'late';
    await t.rejects(ipam.requestAddress({ poolId, address: '', gateway: false }), { code: 'STORE_TIMEOUT' });
    store.mode = 'ok';
    await ipam.settle();
    t.equal(ipam.unsettled, 1, 'one empty look is no proof: the request may still be on its way');
    await store.applyLate(); // etcd, resumed, applies it after that look
    t.same(await held(store, poolId), ['10.75.0.1', '10.75.0.2'], 'applied after all');
    await ipam.settle();
    t.equal(ipam.unsettled, 0);
    t.same(await held(store, poolId), ['10.75.0.1'], 'found at the next look and released: no leak');
  });

  t.test(`${label}: a request that never reached the store is dropped after a second empty look`, async (t) => {
    const { store, ipam } = setup(t, undefined, 50);
    const poolId = await create(ipam, '10.74.0.0/24');
    store.mode = 'refused';
    await t.rejects(ipam.requestAddress({ poolId, address: '', gateway: false }));
    store.mode = 'ok';
    await ipam.settle();
    t.equal(ipam.unsettled, 1, 'kept after the first empty look');
    await ipam.settle();
    t.equal(ipam.unsettled, 1, 'and at a second one too soon after it');
    await new Promise((r) => setTimeout(r, 60));
    await ipam.settle();
    t.equal(ipam.unsettled, 0, 'dropped at a look the confirmation time after the first');
    t.same(await held(store, poolId), []);
  });

  t.test(`${label}: a release that never reached the store is done again, and only that one`, async (t) => {
    const { store, ipam } = setup(t);
    const poolId = await create(ipam, '10.78.0.0/24');
    const a = (await ipam.requestAddress({ poolId, address: '', gateway: false })).address.split('/')[0] ?? '';
    store.mode = 'refused';
    await t.rejects(ipam.releaseAddress(poolId, a), { code: 'STORE_UNAVAILABLE' });
    store.mode = 'ok';
    t.same(await held(store, poolId), [a], 'the release did not happen');
    await ipam.settle();
    t.same(await held(store, poolId), [], 'done again once the store answers');

    // A release lost, then the same address reserved anew: settling leaves the new holder.
    const b = (await ipam.requestAddress({ poolId, address: a, gateway: false })).address.split('/')[0] ?? '';
    store.mode = 'lost';
    await t.rejects(ipam.releaseAddress(poolId, b));
    store.mode = 'ok';
    await new Promise((r) => setTimeout(r, 5));
    await ipam.requestAddress({ poolId, address: b, gateway: false });
    await ipam.settle();
    t.same(await held(store, poolId), [b], 'the new reservation of the address stays');
  });
}

t.test('a pool created but unconfirmed is released, so the subnet can be asked for again', async (t) => {
  const { store, ipam } = setup(t);
  store.mode = 'lost';
  await t.rejects(ipam.requestPool(pool('10.79.0.0/24')), { code: 'STORE_TIMEOUT' });
  store.mode = 'ok';
  await t.rejects(
    ipam.requestPool(pool('10.79.0.0/24')),
    { code: 'IPAM_POOL_OVERLAP' },
    'the unconfirmed pool blocks the subnet meanwhile',
  );
  await ipam.settle();
  t.same((await ipam.requestPool(pool('10.79.0.0/24'))).pool, '10.79.0.0/24', 'free again once settled');
});

t.test('unconfirmed changes outlive a restart during the outage, through the journal', async (t) => {
  const journal = path.join(dir, `j${n}`, 'unconfirmed.json');
  const { inner, store, ipam } = setup(t, journal);
  const { poolId } = await ipam.requestPool(pool('10.76.0.0/24'));
  const kept = (await ipam.requestAddress({ poolId, address: '', gateway: false })).address.split('/')[0] ?? '';
  const gone = (await ipam.requestAddress({ poolId, address: '', gateway: false })).address.split('/')[0] ?? '';
  t.notOk(fs.existsSync(journal), 'nothing written while the store answers');
  store.mode = 'lost';
  await t.rejects(ipam.requestAddress({ poolId, address: '', gateway: false }), { code: 'STORE_TIMEOUT' });
  store.mode = 'refused';
  await t.rejects(ipam.releaseAddress(poolId, gone), { code: 'STORE_UNAVAILABLE' });
  // Written off the request path: shortly after the failures.
  await waitFor(
    () => fs.existsSync(journal) && (JSON.parse(fs.readFileSync(journal, 'utf8')) as unknown[]).length === 2,
    2000,
    'both doubts in the journal',
  );
  t.pass('both doubts in the journal');
  await ipam.stop(); // ovsnet restarted while the store is still unreachable

  const again = makeIpam(new Flaky(inner), { host: 'h1', journal });
  t.teardown(() => again.stop());
  again.start();
  await again.settle();
  t.equal(again.unsettled, 0, 'the new process settled what the old one could not');
  t.same(await held(inner, poolId), [kept], 'the unconfirmed reservation and the failed release are both undone: no leak');
  t.equal(again.usage().find((u) => u.poolId === poolId)?.count, 1);
  t.notOk(fs.existsSync(journal), 'the journal is removed once nothing is pending');
});

t.test('an unreadable journal is moved aside, named in the log, and ovsnet starts anyway', async (t) => {
  const journal = path.join(dir, `bad${n++}.json`);
  fs.writeFileSync(journal, '{not json');
  const lines: string[] = [];
  const log = createLogger('info', { write: (l: string) => void lines.push(l) });
  const ipam = makeIpam(new SqliteStore({ file: path.join(dir, `d${n++}.db`) }), { journal, log });
  t.teardown(() => ipam.stop());
  ipam.start();
  t.notOk(fs.existsSync(journal));
  t.equal(fs.readdirSync(dir).filter((f) => f.startsWith(`${path.basename(journal)}.unreadable-`)).length, 1, 'kept for inspection');
  t.match(lines.join(''), /cannot read the journal .* moved to .*unreadable/);
  t.same((await ipam.requestPool(pool('10.75.0.0/24'))).pool, '10.75.0.0/24', 'and it serves requests');
});
