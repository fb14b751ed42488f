/**
 * A host whose lease was lost registers again (src/cluster/hosts.ts) as soon as the store answers:
 * its retries come every TTL/3 at most, not after the usual backoff's growing waits (30 s at
 * most), since meanwhile its peers have dropped its tunnels and the reclaim grace period runs.
 * An embedded store behind a wrapper that refuses every transaction while the test says so.
 */
import t from 'tap';
import { HostRegistry } from '../../src/cluster/hosts.js';
import { createLogger } from '../../src/lib/log.js';
import { keys } from '../../src/store/keys.js';
import { Flaky } from '../helpers/flaky-store.js';
import { tempStore } from '../helpers/temp-store.js';
import { waitFor } from '../helpers/wait.js';

const TTL = 2;

t.test('a lost registration comes back within TTL/3 of the store answering again, however long it was away', async (t) => {
  const inner = tempStore(t);
  const store = new Flaky(inner);
  const registry = new HostRegistry({
    store,
    log: createLogger('silent'),
    self: { name: 'h1', vtepIp: '192.0.2.1', machineId: 'm-1' },
    ttlSeconds: TTL,
  });
  await registry.start();
  t.teardown(() => registry.stop(true));
  const registered = async () => (await inner.get(keys.host('h1'))) !== undefined;
  t.ok(await registered(), 'registered');

  // The store stops answering and the lease goes (as etcd expires it while the host cannot reach it).
  store.mode = 'refused';
  const lease = (await inner.list(keys.hosts)).kvs[0]?.lease;
  if (lease !== undefined) await inner.revokeLease(lease);
  t.notOk(await registered(), 'its registration went with the lease');
  // Away for 4.5 s: the usual backoff (1, 2, 4 s...) would wait until 7 s for its next attempt.
  await new Promise((r) => setTimeout(r, 4500));
  t.notOk(await registered(), 'not registered while the store refuses');
  store.mode = 'ok';
  const back = Date.now();
  // A bound on a hang, with a margin: TTL/3 plus one attempt.
  await waitFor(registered, TTL * 1000, 'registered again');
  t.ok(
    Date.now() - back <= TTL * 1000,
    `registered again ${Date.now() - back} ms after the store answered (TTL/3 is ${Math.round((TTL * 1000) / 3)} ms)`,
  );
});
