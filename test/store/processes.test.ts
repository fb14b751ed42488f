/**
 * Several processes on one store: compare-and-swap from two processes, on each backend, and a
 * process killed with SIGKILL in the middle of embedded transactions.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { loadConfig } from '../../src/config/config.js';
import { openStore } from '../../src/store/open.js';
import { etcdEndpoints } from '../helpers/services.js';

const worker = fileURLToPath(new URL('../helpers/store-worker.js', import.meta.url));
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-proc-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

function run(
  args: string[],
  onLine?: (line: string, kill: () => void) => void,
): Promise<{ code: number | null; signal: string | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [worker, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    let partial = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      partial += d.toString();
      const lines = partial.split('\n');
      partial = lines.pop() ?? '';
      for (const l of lines) onLine?.(l, () => child.kill('SIGKILL'));
    });
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, out }));
  });
}

const backends: [string, string][] = [
  ['sqlite', `sqlite:${path.join(dir, 'cas.db')}`],
  ['etcd', `etcd://${etcdEndpoints().join(',')}`],
];

for (const [name, spec] of backends) {
  t.test(`${name}: two processes x 500 compare-and-swap increments end at exactly 1000`, async (t) => {
    const key = `/ovsnet-test/${randomUUID()}/counter`;
    const [a, b] = await Promise.all([run(['cas', spec, key, '500']), run(['cas', spec, key, '500'])]);
    t.equal(a.code, 0);
    t.equal(b.code, 0);
    const store = openStore(loadConfig({ OVSNET_STORE: spec }).store, 5000);
    t.teardown(() => store.close());
    const kv = await store.get(key);
    t.equal(kv?.value, '1000');
    t.equal(kv?.version, 1000, 'one write per successful swap');
    t.comment(`conflicts: ${a.out.trim()} / ${b.out.trim()}`);
    await store.txn({ compares: [], success: [{ type: 'delete', key }] });
  });
}

t.test('sqlite: SIGKILL in the middle of transactions loses no acknowledged one, keeps no partial one', async (t) => {
  const file = path.join(dir, 'crash.db');
  const spec = `sqlite:${file}`;
  let acked = -1;
  const killAt = 300 + Math.floor(Math.random() * 400);
  // The writer has far more to do than it is let, so that its kill does not depend on the runner
  // keeping up with its acks: 1,000 transactions take it ~0.1 s, 1,000,000 minutes. It is killed at
  // the first ack read at or past killAt.
  const res = await run(['crash', spec, '/c/', '1000000'], (line, kill) => {
    const m = /^ack (\d+)$/.exec(line);
    if (m !== null) acked = Number(m[1]);
    if (acked >= killAt) kill();
  });
  t.equal(res.signal, 'SIGKILL', `the writer died by SIGKILL (exit code ${res.code}, through ack ${acked})`);
  t.ok(acked >= killAt, `acknowledged through ${acked}`);
  const store = openStore(loadConfig({ OVSNET_STORE: spec }).store, 5000);
  t.teardown(() => store.close());
  const a = (await store.list('/c/a/')).kvs.map((kv) => Number(kv.value)).sort((x, y) => x - y);
  const b = (await store.list('/c/b/')).kvs.map((kv) => Number(kv.value)).sort((x, y) => x - y);
  const count = Number((await store.get('/c/count'))?.value);
  t.same(a, b, 'every transaction is whole: both keys or neither');
  t.equal(a.length, count, 'the counter agrees with the keys');
  t.same(
    a,
    Array.from({ length: a.length }, (_, i) => i),
    'no gap',
  );
  t.ok(count >= acked + 1, `every acknowledged transaction is there (${count} >= ${acked + 1})`);
});
