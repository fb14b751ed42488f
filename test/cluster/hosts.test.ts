/** The host registry on a real etcd: peers, expiry within the TTL, name clashes, take-over. */
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { createLogger } from '../../src/lib/log.js';
import { EtcdStore } from '../../src/store/etcd/etcd.js';
import { HostRegistry } from '../../src/cluster/hosts.js';
import { keys } from '../../src/store/keys.js';
import { etcdEndpoints } from '../helpers/services.js';
import { waitFor } from '../helpers/wait.js';

const endpoints = etcdEndpoints().map((e) => `http://${e}`);
const store = new EtcdStore({ endpoints, timeoutMs: 3000 });
t.teardown(() => store.close());
const run = randomUUID().slice(0, 8);
const reg = (name: string, machine: string, ttlSeconds = 2, onChange?: (hosts: ReadonlyMap<string, unknown>) => void) =>
  new HostRegistry({
    ...(onChange === undefined ? {} : { onChange }),
    store,
    log: createLogger('silent'),
    self: { name: `${run}-${name}`, vtepIp: '192.0.2.1', machineId: machine },
    ttlSeconds,
  });

t.test('two hosts see each other; a stopped one is gone within the TTL', async (t) => {
  const changes: number[] = [];
  let counting = false;
  const a = reg('a', 'm-a', 2, (h) => counting && changes.push(h.size));
  const b = reg('b', 'm-b');
  await a.start();
  await b.start();
  await waitFor(() => a.hosts().has(`${run}-b`) && b.hosts().has(`${run}-a`), 3000, 'peers');
  t.match(a.hosts().get(`${run}-b`), { vtepIp: '192.0.2.1', machineId: 'm-b' });
  counting = true;
  const stoppedAt = Date.now();
  await b.stop(false); // as if it crashed: no deregistration, only the lease runs out
  await waitFor(() => !a.hosts().has(`${run}-b`), 8000, 'expiry of b');
  t.ok(Date.now() - stoppedAt <= 2000 + 3000, `gone after ${Date.now() - stoppedAt} ms (TTL 2 s, etcd rounds up a little)`);
  t.ok(changes.length > 0, 'onChange told');
  await a.stop(true);
  t.equal(await store.get(keys.host(`${run}-a`)), undefined, 'stop(true) deregisters at once');
});

t.test('another machine cannot take a live name; the same machine takes its own over', async (t) => {
  const first = reg('c', 'm-1', 30);
  await first.start();
  await t.rejects(reg('c', 'm-2').start(), {
    code: 'HOST_NAME_TAKEN',
    message: /host name .*-c is registered by another machine \(m-2|m-1/,
  });
  const again = reg('c', 'm-1', 30);
  await again.start();
  t.ok(await store.get(keys.host(`${run}-c`)), 'a restart of the same machine registers at once');
  await first.stop(false);
  await again.stop(true);
  t.equal(await store.get(keys.host(`${run}-c`)), undefined);
});
