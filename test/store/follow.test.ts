/**
 * Following a prefix through lost watches and an unreachable store, and the host registry
 * coming back after its lease was lost: on the embedded store, failures injected around it.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { createLogger } from '../../src/lib/log.js';
import { Follower } from '../../src/store/follow.js';
import { HostRegistry } from '../../src/cluster/hosts.js';
import { keys } from '../../src/store/keys.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';
import { put } from '../../src/store/types.js';
import { Flaky } from '../helpers/flaky-store.js';
import { waitFor } from '../helpers/wait.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-follow-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
let n = 0;
const log = createLogger('silent');

function stores(t: Test) {
  const inner = new SqliteStore({ file: path.join(dir, `f${n++}.db`), pollMs: 5, sweepMs: 50 });
  t.teardown(() => inner.close());
  return { inner, flaky: new Flaky(inner) };
}

t.test('a lost watch is followed again, through a store that refuses for a while, and misses nothing', async (t) => {
  const { inner, flaky } = stores(t);
  const known = new Map<string, string>();
  let snapshots = 0;
  const f = new Follower({
    store: flaky,
    prefix: '/p/',
    log,
    what: 'test keys',
    onSnapshot: (kvs) => {
      snapshots++;
      known.clear();
      for (const kv of kvs) known.set(kv.key, kv.value);
    },
    onEvents: (events) => {
      for (const e of events) {
        if (e.type === 'put') known.set(e.kv.key, e.kv.value);
        else known.delete(e.kv.key);
      }
    },
  });
  t.teardown(() => f.stop());
  await inner.txn({ compares: [], success: [put('/p/a', '1')] });
  await f.start();
  t.same([...known], [['/p/a', '1']]);
  await inner.txn({ compares: [], success: [put('/p/b', '2')] });
  await waitFor(() => known.has('/p/b'), 2000, 'an event');
  flaky.failNext('list', 1); // the first attempt to follow again fails
  flaky.endWatches();
  // Changes while nobody watches: the next snapshot has them.
  await inner.txn({ compares: [], success: [put('/p/c', '3')] });
  await waitFor(() => known.get('/p/c') === '3', 6000, 'followed again after 1 s, then 2 s');
  t.equal(snapshots, 2, 'one failed attempt, then a new snapshot');
  await inner.txn({ compares: [], success: [put('/p/d', '4')] });
  await waitFor(() => known.has('/p/d'), 2000, 'and the new watch delivers');
  await f.stop();
  await inner.txn({ compares: [], success: [put('/p/e', '5')] });
  await new Promise((r) => setTimeout(r, 100));
  t.notOk(known.has('/p/e'), 'nothing after stop');
});

t.test('a host whose lease was lost registers again, retrying while the store refuses', async (t) => {
  const { inner, flaky } = stores(t);
  const reg = new HostRegistry({ store: flaky, log, self: { name: 'h1', vtepIp: '192.0.2.1', machineId: 'm1' }, ttlSeconds: 2 });
  t.teardown(() => reg.stop(false));
  await reg.start();
  const record = await inner.get(keys.host('h1'));
  if (record === undefined) throw new Error('registered');
  flaky.failNext('grantLease', 2); // the first two attempts to register again fail
  await inner.revokeLease(record.lease); // as if the store had been unreachable longer than the TTL
  t.equal(await inner.get(keys.host('h1')), undefined, 'the registration went with the lease');
  await waitFor(async () => (await inner.get(keys.host('h1'))) !== undefined, 8000, 'registered again after two failures');
  t.ok(reg.hosts().has('h1'), 'and its own view follows');
});

t.test('the registry tells which hosts came, changed or went (the tunnels sync only theirs); a snapshot, that any may have', async (t) => {
  const { inner } = stores(t);
  const told: (readonly string[] | undefined)[] = [];
  const self = { vtepIp: '192.0.2.1', machineId: 'm1' };
  const a = new HostRegistry({
    store: inner,
    log,
    self: { name: 'h1', ...self },
    ttlSeconds: 5,
    onChange: (_, changed) => told.push(changed),
  });
  t.teardown(() => a.stop(true));
  await a.start();
  t.same(told, [undefined], 'the first snapshot');
  const b = new HostRegistry({ store: inner, log, self: { name: 'h2', vtepIp: '192.0.2.2', machineId: 'm2' }, ttlSeconds: 5 });
  await b.start();
  await waitFor(() => told.length === 2, 2000, "h2's registration");
  await b.stop(true);
  await waitFor(() => told.length === 3, 2000, "h2's leaving");
  t.same(told.slice(1), [['h2'], ['h2']], 'h2 alone, as it came and as it went');
});
