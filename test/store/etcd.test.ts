import net from 'node:net';
import t from 'tap';
import { EtcdStore } from '../../src/store/etcd.js';
import { etcdEndpoints } from '../helpers/services.js';
import { storeContract } from './contract.js';

const endpoints = etcdEndpoints().map((e) => `http://${e}`);
storeContract(t, () => new EtcdStore({ endpoints, timeoutMs: 3000 }));

t.test('an unreachable etcd fails fast as unavailable, never hangs', async (t) => {
  // A port that accepts nothing: listen, note the port, close.
  const port = await new Promise<number>((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const a = srv.address();
      srv.close(() => resolve(typeof a === 'object' && a !== null ? a.port : 0));
    });
  });
  const store = new EtcdStore({ endpoints: [`http://127.0.0.1:${port}`], timeoutMs: 500 });
  t.teardown(() => store.close());
  const started = Date.now();
  await t.rejects(store.get('/x'), { code: /^STORE_(UNAVAILABLE|TIMEOUT)$/, message: /127\.0\.0\.1/ });
  t.ok(Date.now() - started < 1500, `failed within the bound (${Date.now() - started} ms)`);
  await t.rejects(store.txn({ compares: [], success: [{ type: 'put', key: '/x', value: '1' }] }), { code: /^STORE_(UNAVAILABLE|TIMEOUT)$/ });
});

t.test('a silent peer (accepts, never answers) times out within the bound', async (t) => {
  const sockets: net.Socket[] = [];
  const srv = net.createServer((s) => sockets.push(s));
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const a = srv.address();
  const port = typeof a === 'object' && a !== null ? a.port : 0;
  const store = new EtcdStore({ endpoints: [`http://127.0.0.1:${port}`], timeoutMs: 500 });
  t.teardown(async () => {
    await store.close();
    sockets.forEach((s) => s.destroy());
    srv.close();
  });
  const started = Date.now();
  await t.rejects(store.get('/x'), { code: /^STORE_(UNAVAILABLE|TIMEOUT)$/ });
  t.ok(Date.now() - started < 1500, `failed within the bound (${Date.now() - started} ms)`);
});
