/**
 * The IPAM index follows the store (src/ipam-driver/index/index-sync.ts): ready after the first
 * snapshot, other processes' writes applied from the watch, a lost watch followed again, and a
 * first load that fails retried.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import { Flaky } from '../../helpers/flaky-store.js';
import { makeIpam, pool } from '../../helpers/ipam.js';
import { waitFor } from '../../helpers/wait.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-index-sync-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
let n = 0;

/** Two processes on one store: `ipam` (through a store that fails on demand) and `other`. */
function setup(t: Test) {
  const file = path.join(dir, `i${n++}.db`);
  const inner = new SqliteStore({ file });
  const flaky = new Flaky(inner);
  const ipam = makeIpam(flaky, { host: 'h1' });
  const otherStore = new SqliteStore({ file });
  const other = makeIpam(otherStore, { host: 'h1' });
  t.teardown(async () => {
    await ipam.stop();
    await other.stop();
    await inner.close();
    await otherStore.close();
  });
  return { flaky, ipam, other };
}

const pools = (ipam: ReturnType<typeof makeIpam>) =>
  ipam
    .usage()
    .map((u) => u.pool)
    .sort();

t.test('ready after the first snapshot; later writes of another process come from the watch', async (t) => {
  const { ipam, other } = setup(t);
  await other.requestPool(pool('10.96.0.0/24'));
  t.equal(ipam.poolsHolding('10.96.0.5'), undefined, 'not loaded yet: the caller asks the store');
  ipam.start();
  await waitFor(() => ipam.poolsHolding('10.96.0.5') !== undefined, 5000, 'the first load');
  t.same(pools(ipam), ['10.96.0.0/24'], 'the snapshot has what was there');
  const { poolId } = await other.requestPool(pool('10.97.0.0/24'));
  await other.requestAddress({ poolId, address: '', gateway: false });
  await waitFor(() => ipam.usage().find((u) => u.poolId === poolId)?.reserved === 1, 2000, 'the watch');
  t.same(pools(ipam), ['10.96.0.0/24', '10.97.0.0/24']);
});

t.test('a lost watch is followed again, and what changed meanwhile is in the new snapshot', async (t) => {
  const { flaky, ipam, other } = setup(t);
  ipam.start();
  await ipam.requestPool(pool('10.98.0.0/24')); // waits for the first load
  flaky.endWatches();
  t.equal(ipam.poolsHolding('10.98.0.5'), undefined, 'not ready while the lost watch is rebuilt: requests wait for the new snapshot');
  await other.requestPool(pool('10.99.0.0/24'));
  await waitFor(() => pools(ipam).includes('10.99.0.0/24'), 5000, 'followed again');
  await other.requestPool(pool('10.100.0.0/24'));
  await waitFor(() => pools(ipam).includes('10.100.0.0/24'), 2000, 'and the new watch delivers');
});

t.test('a first load that fails is retried; requests get its error meanwhile', async (t) => {
  const { flaky, ipam } = setup(t);
  flaky.failNext('list', 1);
  await t.rejects(ipam.requestPool(pool('10.101.0.0/24')), { code: 'STORE_UNAVAILABLE' }, 'the store error, not a hang');
  await waitFor(() => ipam.poolsHolding('10.101.0.1') !== undefined, 5000, 'loaded on the retry');
  t.same((await ipam.requestPool(pool('10.101.0.0/24'))).pool, '10.101.0.0/24');
});
