import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { EtcdStore } from '../../../src/store/etcd/etcd.js';
import { etcdEndpoints } from '../../helpers/services.js';
import { storeContract } from '../contract.js';

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
  await t.rejects(store.txn({ compares: [], success: [{ type: 'put', key: '/x', value: '1' }] }), {
    code: /^STORE_(UNAVAILABLE|TIMEOUT)$/,
  });
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

t.test('an answer that arrived while the event loop was busy past the bound is taken, not timed out', async (t) => {
  // Under CPU starvation the answer can sit in the socket while the timer expires; both are
  // then due in the same loop turn, and timers run before I/O. The answer must win.
  const store = new EtcdStore({ endpoints, timeoutMs: 300 });
  t.teardown(() => store.close());
  await store.get('/busy/warm'); // connected
  for (let i = 0; i < 5; i++) {
    const pending = store.txn({ compares: [], success: [{ type: 'put', key: `/busy/${i}`, value: 'v' }] });
    // Busy in the check phase, as after an I/O callback: the next turn runs timers, then I/O.
    await new Promise<void>((r) =>
      setImmediate(() => {
        const until = Date.now() + 500;
        while (Date.now() < until); // the answer arrives meanwhile, the timer expires
        r();
      }),
    );
    const r = await pending;
    t.ok(r.succeeded, `attempt ${i}: the txn's answer is taken`);
  }
});

t.test("loading the client module is not counted against the bound: a slow load is not etcd's timeout", async (t) => {
  // A fresh process whose load of etcd3 takes 1.5 s more, with a bound of 500 ms: as on a loaded
  // machine, where loading gRPC and protobuf took past the bound by itself. It is loaded with
  // require() (src/lib/packages.ts), so the preload holds the thread in the CommonJS loader, as a
  // slow compile would.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-slow-load-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const preload = path.join(dir, 'slow-etcd3.cjs');
  fs.writeFileSync(
    preload,
    `const Module = require('node:module');
const load = Module._load;
Module._load = function (request, ...rest) {
  if (request === 'etcd3') Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1500);
  return load.call(this, request, ...rest);
};
`,
  );
  const etcdModule = new URL('../../../src/store/etcd/etcd.js', import.meta.url).href;
  const script = `
    const { EtcdStore } = await import(${JSON.stringify(etcdModule)});
    const store = new EtcdStore({ endpoints: ${JSON.stringify(endpoints)}, timeoutMs: 500 });
    const started = Date.now();
    try {
      await store.get('/slow-load/x');
      console.log(JSON.stringify({ ok: true, ms: Date.now() - started }));
    } catch (err) {
      console.log(JSON.stringify({ ok: false, ms: Date.now() - started, error: String(err) }));
    } finally {
      await store.close();
    }`;
  const r = spawnSync(process.execPath, ['--require', preload, '--input-type=module', '-e', script], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  const out = JSON.parse(r.stdout.trim() || '{}') as { ok?: boolean; ms?: number; error?: string };
  t.ok(out.ms !== undefined && out.ms >= 1500, `the control: the first call waited for the slow load (${out.ms} ms; ${r.stderr})`);
  t.same({ ok: out.ok, error: out.error }, { ok: true, error: undefined }, 'the first call answered: the load was not timed');
});
